"""A codec on every store: values encrypted at rest, metadata clear, a wrong key refused
before anything is written, a plain run continued encrypted, keys rotated. Once per
store (file, memory, cosmos-local); the contract suite runs every guarantee of a store
with encryption on too (the ``+aes`` backends)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.codec import Compression, Keyring, ValueCodec

from ..conftest import Cosmos
from ..helpers.clitools import Cli

SECRET = "SECRET-4711"
KEY_A, KEY_B = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))


def codec(key_id: str = "a", keys: dict[str, str] | None = None) -> ValueCodec:
    return ValueCodec(
        compression=Compression(threshold=64),
        keys=Keyring(key_id, keys or {"a": KEY_A}),
    )


class Place:
    """One store's storage, opened with any codec; and its raw contents."""

    def __init__(self, kind: str, tmp_path: Path, cosmos: Cosmos | None) -> None:
        self.kind, self.tmp_path, self.cosmos = kind, tmp_path, cosmos
        self.memory = ds.MemoryStore()
        self.opened: list[ds.Store] = []

    def store(self, c: ValueCodec | None) -> ds.Store:
        made: ds.Store
        if self.kind == "file":
            made = ds.FileStore(self.tmp_path / "store", codec=c)
        elif self.kind == "memory":
            made = self.memory
            made.codec = c
        else:
            assert self.cosmos is not None
            made = self.cosmos.store(codec=c)
        self.opened.append(made)
        return made

    def raw(self) -> list[Any]:
        """Everything stored, as stored (file bytes; memory's JSON; Cosmos DB's items)."""
        if self.kind == "file":
            runs = sorted((self.tmp_path / "store" / "runs").iterdir())
            return [p.read_bytes() for p in runs]
        if self.kind == "memory":
            return sorted(self.memory._runs.items())
        assert self.cosmos is not None
        items = self.cosmos.raw_container().query_items(
            "SELECT * FROM c", enable_cross_partition_query=True
        )
        return sorted((i["id"], i["_etag"], json.dumps(i, sort_keys=True)) for i in items)


@pytest.fixture(params=["file", "memory", "cosmos-local"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    cosmos = None
    if request.param == "cosmos-local":
        cosmos = request.getfixturevalue("cosmos_local").fresh()
    made = Place(request.param, tmp_path, cosmos)
    yield made
    for s in made.opened:
        s.close()
    if cosmos is not None:
        cosmos.drop()


def first(state: Any) -> dict[str, Any]:
    return {"secret": SECRET, "messages": [f"{SECRET} hello"], "n": 1}


def second(state: Any) -> dict[str, Any]:
    answer = ds.call("llm", lambda: {"text": f"{SECRET} answer " * 20})
    return {"messages": [*state["messages"], answer["text"]], "answer": answer}


def failing(state: Any) -> None:
    raise RuntimeError("not yet")


STEPS = [ds.Step("first", first), ds.Step("second", second)]
HALF = [STEPS[0], ds.Step("second", failing)]
"""The same run, failing at its second step: left unfinished after its first."""
FLOW = ds.Workflow("coded", STEPS)


def test_values_are_encrypted_at_rest_and_the_metadata_is_not(place: Place, run_id: str) -> None:
    """State values, list items and call results are stored encrypted: the secret is
    nowhere in the stored bytes, the run loads back as it was with the key, and its
    listing, run_info and head (status, workflow, step names) need no key."""
    final = FLOW.run(run_id, place.store(codec()))
    stored = repr(place.raw())
    assert SECRET not in stored
    assert '"$ds"' in stored and "coded" in stored and "second" in stored
    again = place.store(codec()).load(run_id)
    assert again is not None and again.state == final and final["secret"] == SECRET
    keyless = place.store(None)
    info = keyless.run_info(run_id)
    assert info is not None and info.status == "completed" and info.workflow == "coded"
    assert [i.run_id for i in keyless.list_runs()] == [run_id]
    head = keyless.load_head(run_id)
    assert head is not None and head.steps == ("first", "second")


def test_a_wrong_key_is_a_codec_error_and_nothing_is_written(place: Place, run_id: str) -> None:
    """A run saved with key A and resumed by a worker with key B (or none) raises
    CodecError naming the key id and the run, at load: its stored bytes stay the same,
    byte for byte, and key A then finishes it."""
    with pytest.raises(RuntimeError):
        ds.run(run_id, HALF, place.store(codec()))
    before = place.raw()
    for other in (codec("b", {"b": KEY_B}), None):
        with pytest.raises(ds.CodecError) as caught:
            ds.run(run_id, STEPS, place.store(other))
        assert "'a'" in str(caught.value) and run_id in str(caught.value)
        assert caught.value.run_id == run_id
        assert place.raw() == before
    assert ds.run(run_id, STEPS, place.store(codec()))["secret"] == SECRET


def test_a_plain_run_continues_encrypted(place: Place, run_id: str) -> None:
    """A run written before the codec was turned on loads with it and goes on: its plain
    values stay readable, the new ones are encrypted (a store reads the mix; without the
    key it is a CodecError, never a half-read state)."""
    with pytest.raises(RuntimeError):
        ds.run(run_id, HALF, place.store(None))
    assert SECRET in repr(place.raw())
    final = ds.run(run_id, STEPS, place.store(codec()))
    assert final["answer"]["text"].startswith(SECRET)
    loaded = place.store(codec()).load(run_id)
    assert loaded is not None and loaded.state == final
    with pytest.raises(ds.CodecError):
        place.store(None).load(run_id)


def test_rotated_keys_read_old_values_and_write_new_ones(tmp_path: Path, run_id: str) -> None:
    """With key b current and key a kept for reading, a run written under a loads and
    goes on; what is written from then on is under b (a store with b alone reads the
    new values but not the old ones)."""
    with pytest.raises(RuntimeError):
        ds.run(run_id, HALF, ds.FileStore(tmp_path, codec=codec()))
    rotated = codec("b", {"a": KEY_A, "b": KEY_B})
    final = ds.run(run_id, STEPS, ds.FileStore(tmp_path, codec=rotated))
    loaded = ds.FileStore(tmp_path, codec=rotated).load(run_id)
    assert loaded is not None and loaded.state == final
    with pytest.raises(ds.CodecError) as caught:
        ds.FileStore(tmp_path, codec=codec("b", {"b": KEY_B})).load(run_id)
    assert "'a'" in str(caught.value)


def test_a_value_moved_to_another_key_or_run_is_corrupt(run_id: str) -> None:
    """Tampering -- an encrypted value swapped into another key, or an altered byte --
    is CorruptCheckpointError at load: a value's run and place are authenticated."""
    store = ds.MemoryStore(codec=codec())
    ds.run(run_id, STEPS, store)
    doc = json.loads(store._runs[run_id])
    swapped = {**doc, "state": {**doc["state"], "secret": doc["state"]["answer"]}}
    store._runs[run_id] = json.dumps(swapped).encode()
    with pytest.raises(ds.CorruptCheckpointError):
        store.load(run_id)
    envelope = doc["state"]["secret"]
    # (a character of the middle: the last ones may carry base64's padding bits only)
    v, i = envelope["v"], len(envelope["v"]) // 2
    flipped = v[:i] + ("0" if v[i] != "0" else "1") + v[i + 1 :]
    altered = {**doc, "state": {**doc["state"], "secret": {**envelope, "v": flipped}}}
    store._runs[run_id] = json.dumps(altered).encode()
    with pytest.raises(ds.CorruptCheckpointError):
        store.load(run_id)
    store._runs[f"{run_id}-copy"] = json.dumps({**doc, "run_id": f"{run_id}-copy"}).encode()
    with pytest.raises(ds.CorruptCheckpointError):
        store.load(f"{run_id}-copy")


def test_a_plain_value_shaped_like_an_envelope_is_refused(run_id: str) -> None:
    """A state value that would read back as an encoded one is InvalidStateError at save,
    codec or not; the previous checkpoint stays."""
    for c in (None, codec()):
        store = ds.MemoryStore(codec=c)
        bad = ds.Step("bad", lambda s: {"x": [{"$ds": 1, "v": "abc"}]})
        with pytest.raises(ds.InvalidStateError, match="'x'"):
            ds.run(run_id, [STEPS[0], bad], store)
        loaded = store.load(run_id)
        assert loaded is not None and loaded.steps == ("first",)


def test_the_environment_turns_the_codec_on(tmp_path: Path, run_id: str) -> None:
    """DURABLE_CODEC with DURABLE_KEY gives store_from_env a codec: the run file holds no
    secret, and a store opened without the key refuses to read it."""
    env = {
        "DURABLE_FILE_PATH": str(tmp_path / "store"),
        "DURABLE_CODEC": "zstd,aes256gcm",
        "DURABLE_KEY": KEY_A,
    }
    with ds.store_from_env(env) as store:
        ds.run(run_id, STEPS, store)
        assert isinstance(store, ds.FileStore)
        assert SECRET not in repr(store.file_for(run_id).read_bytes())
    plain = ds.store_from_env({"DURABLE_FILE_PATH": env["DURABLE_FILE_PATH"]})
    with plain, pytest.raises(ds.CodecError):
        plain.load(run_id)


def test_runs_show_without_the_key_says_a_value_is_encrypted(tmp_path: Path, run_id: str) -> None:
    """`runs show` without the key prints the run's fields and "<encrypted with key 'a'>"
    for each encrypted value instead of failing; with the key, the values."""
    path = tmp_path / "store"
    ds.run(run_id, STEPS, ds.FileStore(path, codec=codec()))
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)})
    shown = cli("runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "<encrypted with key 'a'>" in shown.stdout and SECRET not in shown.stdout
    as_json = json.loads(cli("runs", "show", run_id, "--json").stdout)
    assert as_json["state"]["secret"] == "<encrypted with key 'a'>"
    assert as_json["steps"] == ["first", "second"]
    keyed = cli("runs", "show", run_id, "--key", "secret", DURABLE_CODEC="aes256gcm",
                DURABLE_KEY_ID="a", DURABLE_KEY=KEY_A)  # fmt: skip
    assert keyed.returncode == 0, keyed.stderr
    assert SECRET in keyed.stdout


def test_a_codec_set_on_an_open_file_store_reaches_its_saves_and_loads(
    tmp_path: Path, run_id: str
) -> None:
    """The file store holds its codec once: set after opening (as the command line sets
    ``Shown``), saves write with it and loads read with it."""
    store = ds.FileStore(tmp_path / "s")
    store.codec = codec()
    ds.run(run_id, STEPS, store)
    raw = b"".join(p.read_bytes() for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert SECRET.encode() not in raw
    assert ds.FileStore(tmp_path / "s", codec=store.codec).load(run_id).state["secret"] == SECRET


class Counting:
    """A codec that counts what it encodes (the seam encodes; a store never does)."""

    def __init__(self, inner: ValueCodec) -> None:
        self.inner, self.places = inner, []  # type: list[bytes]

    def encode(self, value: Any, data: bytes, where: bytes) -> Any:
        self.places.append(where)
        return self.inner.encode(value, data, where)

    def decode(self, stored: Any, where: bytes, run_id: str) -> Any:
        return self.inner.decode(stored, where, run_id)


def test_a_save_encodes_its_change_only(place: Place, run_id: str) -> None:
    """Each save encodes the values its update changed -- a key set, a list's new items,
    a call's result -- never the state before them: the 20th step encodes as much as
    the 2nd, however many values the state holds; a store is given an encoded delta,
    and the run loads back whole."""
    counting = Counting(codec())
    store = place.store(counting)  # type: ignore[arg-type]

    def grow(state: Any) -> dict[str, Any]:
        n = len(state) - 1
        got = ds.call("llm", lambda: f"{SECRET} call {n}")
        return {f"k{n}": f"{SECRET} {n}", "log": [*state["log"], got]}

    steps = [ds.Step(f"s{i}", grow) for i in range(20)]
    final = ds.run(run_id, steps, store, input={"log": []})
    per_step: list[list[bytes]] = [[]]
    for where in counting.places:
        per_step[-1].append(where)
        if b"call:" in where:  # each step's call, then its completing save
            per_step.append([])
    assert len(final) == 21 and len(final["log"]) == 20
    # The first save encodes the input whole; every later step: its call's result,
    # then its key and its list item -- 3 values, wherever the state stands.
    assert [len(p) for p in per_step[2:-1]] == [3] * (len(per_step) - 3), per_step
    assert SECRET not in repr(place.raw())
    again = place.store(codec()).load(run_id)
    assert again is not None and again.state == final


def test_load_at_decodes_what_history_kept(place: Place, run_id: str) -> None:
    """A step's state read back from history is decoded like the latest one."""
    ds.run(run_id, STEPS, place.store(codec()))
    assert ds.load_at(place.store(codec()), run_id, 0)["secret"] == SECRET
