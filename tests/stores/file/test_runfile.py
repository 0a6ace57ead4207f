"""The run file's journal: what a save writes, compaction and the sizes it is measured
by, a stale etag, a record too large for its length field. (The torn-tail rule and what
a save reads of the file: test_runfile_tails.)"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam import delta, document
from durable_steps.seam.state import freeze, frozen_state
from durable_steps.stores.file import fileio, runfile
from durable_steps.stores.file import writer as file_writer

from ...helpers.journals import advance, history, same


def test_records_replay_to_every_saved_checkpoint(store: ds.FileStore) -> None:
    """Each kind of change survives the round trip: a fresh store loads exactly what was
    saved last, and the file holds one snapshot plus one record per save."""
    saved = history(store)
    fresh = ds.FileStore(store.path).load("r")
    assert same(fresh, saved[-1].checkpoint)
    assert fresh is not None
    assert fresh.state["messages"] == ["hi", {"role": "tool"}, "bye"]
    data = store.file_for("r").read_bytes()
    assert data.count(runfile.RS) == len(saved)


def test_a_save_writes_its_changes_not_the_state(store: ds.FileStore) -> None:
    """With a 1 MB state, a step that adds 5 KB appends about 5 KB, a list extended by one
    item appends that item, and a heartbeat (lease only) appends a few hundred bytes."""
    big = "x" * 1_000_000
    first = store.save(ds.Checkpoint("r", -1, {"blob": big, "messages": ["m" * 5000]}))
    cp = replace(first, state=frozen_state(first.state, "r", stored_as=first.etag))
    target = store.file_for("r")

    def grows(updates: dict[str, Any], **fields: Any) -> int:
        nonlocal cp
        before = target.stat().st_size
        cp = advance(store, cp, updates, **fields)
        return target.stat().st_size - before

    assert grows({"k1": "y" * 5000}, step=0, steps=("a",)) < 6000
    assert grows({"messages": [*cp.state["messages"], "z" * 5000]}, step=1, steps=("a", "b")) < 6000
    assert grows({}, lease_expires=2e9, owner="me") < 600
    loaded = store.load("r")
    assert loaded is not None
    assert loaded.state["messages"] == ["m" * 5000, "z" * 5000]


@pytest.mark.parametrize("variant", ["keys", "list"])
def test_growing_state_writes_about_the_sum_of_its_updates(
    store: ds.FileStore, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 steps that each add 5 KB (as a new key, or by extending one list) write about
    the 1 MB of new data and each record's fields. Its log holds nothing superseded, so
    no save compacts it: after the run's first file every save appends (compacting at
    4x the first record rewrote it at 64 KB, 256 KB and 1 MB)."""
    written: list[int] = []
    new_files: list[int] = []
    real_write_at, real_atomic_write = fileio.write_at, file_writer.atomic_write

    def write_at(fd: int, offset: int, data: bytes) -> None:
        written.append(len(data))
        real_write_at(fd, offset, data)

    def atomic_write(target: Path, data: bytes) -> None:
        new_files.append(len(data))
        real_atomic_write(target, data)

    monkeypatch.setattr(fileio, "write_at", write_at)
    monkeypatch.setattr(file_writer, "atomic_write", atomic_write)
    text = "t" * 5000

    def step(i: int) -> ds.Step:
        if variant == "keys":
            return ds.Step(f"s{i}", lambda s: {f"k{i}": text})
        return ds.Step(f"s{i}", lambda s: {"messages": [*s["messages"], text]})

    workflow = ds.Workflow("grow", [step(i) for i in range(200)])
    final = workflow.run("r", store, input={"messages": []})
    assert len(final) == (201 if variant == "keys" else 1)
    assert len(new_files) == 1  # the run's first file, nothing since
    assert sum(written) < 1.2 * 200 * 5000
    assert store.file_for("r").stat().st_size < 1.2 * 200 * 5000


def test_a_journal_is_compacted_so_a_load_reads_at_most_about_4x_the_state(
    store: ds.FileStore,
) -> None:
    """Small steps on a 100 KB state (of a constant size): the file never grows past 4x
    its snapshot, because a save that would cross that writes a new snapshot instead."""
    cp = store.save(ds.Checkpoint("r", -1, {"blob": "b" * 100_000, "i": 0, "note": "0" * 200}))
    cp = replace(cp, state=frozen_state(cp.state, "r", stored_as=cp.etag))
    target = store.file_for("r")
    rewrites, inode, snapshot = 0, target.stat().st_ino, target.stat().st_size
    for i in range(2000):
        cp = advance(store, cp, {"i": i % 10, "note": f"{i:0200d}"})
        now = target.stat()
        if now.st_ino != inode:  # this save wrote a new snapshot
            rewrites, inode, snapshot = rewrites + 1, now.st_ino, now.st_size
        # "about": a record's time stamps vary by a few bytes from the one before
        assert now.st_size <= 4 * snapshot + 256
    assert rewrites >= 2
    assert same(store.load("r"), cp)


def last_sizes(store: ds.FileStore, run_id: str = "r") -> Any:
    data = store.file_for(run_id).read_bytes()
    return json.loads(runfile.scan(data, run_id, "test")[-1].meta).get("sizes")


def exact_sizes(cp: ds.Checkpoint) -> list[int]:
    parts = (dict(cp.state), list(cp.steps), dict(cp.signals), list(cp.calls))
    return [len(json.dumps(p, ensure_ascii=False, separators=(",", ":")).encode()) for p in parts]


def test_every_record_knows_the_exact_size_of_its_snapshot(store: ds.FileStore) -> None:
    """The sizes each record carries equal the JSON of the state, step names, signals
    and journal it adds up to -- kept exact from the changes alone (new keys, replaced
    values of other lengths, lists extended from empty or not, unicode, new step names,
    signals, call records added, replaced and dropped), through compactions too."""
    rng = random.Random(13)

    def value() -> Any:
        kind = rng.randrange(6)
        if kind == 0:
            return "ü" * rng.randrange(30) + '\n"'
        if kind == 1:
            return rng.randrange(-(10**6), 10**6)
        if kind == 2:
            return rng.random()
        if kind == 3:
            return None
        if kind == 4:
            return [value() for _ in range(rng.randrange(3))]
        return {f"k{rng.randrange(5)}": value() for _ in range(rng.randrange(3))}

    cp = store.save(ds.Checkpoint("r", -1, {"log": []}))
    cp = replace(cp, state=frozen_state(cp.state, "r", stored_as=cp.etag))
    for i in range(400):
        kind = rng.randrange(4)
        updates: dict[str, Any] = {}
        if kind == 0:
            updates = {f"key{rng.randrange(30)}": value()}
        elif kind == 1:
            updates = {"log": [*cp.state["log"], *(value() for _ in range(rng.randrange(1, 3)))]}
        elif kind == 2:
            updates = {f"n{rng.randrange(9)}": value(), "ключ": [value()]}
        fields: dict[str, Any] = {}
        if rng.random() < 0.3:  # a step completes: its journal is dropped
            fields = {"step": cp.step + 1, "steps": (*cp.steps, f"s-ü{cp.step + 1}"), "calls": ()}
        elif rng.random() < 0.5:  # a call recorded, or one of its attempts replaced by it
            n = len(cp.calls)
            at = n - 1 if n and rng.random() < 0.3 else n
            record = freeze({"i": at, "name": f"c-ü{at}", "result": value()}, "", "r", 0)
            fields = {"calls": (*cp.calls[:at], record)}
        if rng.random() < 0.03:
            fields["signals"] = {**cp.signals, f"sig{i}": value()}
        cp = advance(store, cp, updates, **fields)
        assert last_sizes(store) == exact_sizes(cp), i
    assert store.file_for("r").stat().st_size < 4 * sum(exact_sizes(cp)) + 70_000


def test_a_replaced_value_is_not_encoded_again_to_measure_it(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that replaces a big value: the save encodes the new value, and knows what
    the old one took from when it was encoded -- a save's cost stays that of its update."""
    cp = store.save(ds.Checkpoint("r", -1, {}))
    cp = replace(cp, state=frozen_state(cp.state, "r", stored_as=cp.etag))
    cp = advance(store, cp, {"summary": "a" * 100_000})
    encoded: list[Any] = []
    real = delta.dumps

    def dumps(value: Any) -> bytes:
        encoded.append(value)
        return real(value)

    monkeypatch.setattr(delta, "dumps", dumps)
    monkeypatch.setattr(delta, "_escape", lambda s: encoded.append(s) or real(s).decode())
    cp = advance(store, cp, {"summary": "b" * 90_000})
    assert "b" * 90_000 in encoded
    assert "a" * 100_000 not in encoded
    assert last_sizes(store) == exact_sizes(cp)


def test_a_state_that_shrinks_is_compacted_to_its_new_size(store: ds.FileStore) -> None:
    """A 100 KB value replaced by a small one: the file is rewritten at once, since it
    holds more than 4x the state (the first record's length would allow 400 KB)."""
    cp = store.save(ds.Checkpoint("r", -1, {"blob": "b" * 100_000}))
    cp = replace(cp, state=frozen_state(cp.state, "r", stored_as=cp.etag))
    cp = advance(store, cp, {"i": 1})
    assert store.file_for("r").stat().st_size > 100_000
    cp = advance(store, cp, {"blob": "small"})
    assert store.file_for("r").stat().st_size < 2_000
    for i in range(200):
        cp = advance(store, cp, {"i": i})
        assert store.file_for("r").stat().st_size <= runfile.COMPACT_MIN + 1_000
    assert same(ds.FileStore(store.path).load("r"), cp)


def test_a_journal_of_the_earlier_version_is_rewritten_with_sizes_by_its_next_save(
    store: ds.FileStore,
) -> None:
    """CallRecords without sizes (as version 0.1 wrote them) load; the next save writes a
    snapshot, which measures the sizes (so the state size limit holds from that save
    on), and every record after it carries them and is appended."""
    doc = document.to_document(ds.Checkpoint("r", -1, {"blob": "b" * 20_000}), etag="a" * 24)
    meta = runfile.meta_of(doc)
    meta["schema"] = 2
    old = runfile.encode(meta, {k: doc[k] for k in ("state", "steps", "signals")}, "a" * 24)
    target = store.file_for("r")
    target.write_bytes(old)
    loaded = store.load("r")
    assert loaded is not None
    inode = target.stat().st_ino
    cp = replace(loaded, state=frozen_state(loaded.state, "r", stored_as=loaded.etag))
    cp = advance(store, cp, {"i": 0})
    assert target.stat().st_ino != inode  # a new snapshot
    assert last_sizes(store) == exact_sizes(cp)
    inode, size = target.stat().st_ino, target.stat().st_size
    cp = advance(store, cp, {"z": 1})
    assert (target.stat().st_ino, last_sizes(store)) == (inode, exact_sizes(cp))
    assert target.stat().st_size > size  # appended
    assert same(ds.FileStore(store.path).load("r"), cp)


def test_a_stale_etag_writes_nothing(store: ds.FileStore) -> None:
    """ConflictError leaves the file byte for byte as it was."""
    saved = history(store)
    target = store.file_for("r")
    before = target.read_bytes()
    with pytest.raises(ds.ConflictError):
        store.save(replace(saved[-2].checkpoint, attempt=9, updated_at=None))
    assert target.read_bytes() == before


def test_a_record_too_large_for_its_length_field_is_refused_before_io(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record's lengths have 8 hex digits (4 GiB); a larger one is StateTooLargeError,
    and the stored checkpoint stays as it was (the limit is lowered here to test it)."""
    cp = store.save(ds.Checkpoint("r", -1, {"a": 1}))
    before = store.file_for("r").read_bytes()
    monkeypatch.setattr(runfile, "MAX_RECORD", 1000)
    with pytest.raises(ds.StateTooLargeError, match="does not fit a FileStore record"):
        store.save(replace(cp, state={"a": "x" * 2000}))
    assert store.file_for("r").read_bytes() == before


def test_a_recorded_call_writes_its_result_not_the_state_or_earlier_calls(
    store: ds.FileStore,
) -> None:
    """On a 500 KB state, each of 60 calls returning 1 KB appends one record of about its
    result: the 60th as small as the 1st (no compaction in between)."""
    sizes: list[int] = []
    target = store.file_for("r")

    def result(n: int) -> str:
        sizes.append(target.stat().st_size)
        return f"{n:04d}" * 256

    def agent(state: Any) -> dict[str, Any]:
        return {"n": len([ds.call("tool", result, n) for n in range(60)])}

    ds.run("r", [ds.Step("agent", agent)], store, input={"blob": "b" * 500_000})
    grown = [b - a for a, b in itertools.pairwise(sizes)]
    # Beside its result a record carries the run's head: lease, attempt log, where the
    # head lies in the file (``head_place``) -- some 600 bytes, the same for every call.
    assert all(1024 < g < 1024 + 700 for g in grown), grown
    assert max(grown) - min(grown) < 16, grown
    assert store.load("r").calls == ()  # the step completed: records dropped
