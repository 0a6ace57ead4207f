"""``DurableSaver`` on a store with a codec: a graph's checkpoints, channel values and
pending writes are stored encrypted (no plaintext of a secret in the backend's bytes,
not even under the serializer's base64), resume and time travel work as without it, a
wrong or missing key is ``CodecError`` naming the key id, and a sealed record altered or
moved to another place is ``CorruptCheckpointError``. Once per store: file, memory,
cosmos-local. (The conformance suite runs on the ``+aes`` backends too.)"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.base import empty_checkpoint

import durable_steps as ds
from durable_steps.integrations.langgraph import DurableSaver
from durable_steps.integrations.langgraph._layout import blobs_kind, checkpoints_kind, thread_run

from ..stores.test_codec_at_rest import KEY_B, SECRET, Place, codec
from .test_langgraph import post_graph

_BASE64 = re.compile(rb"[A-Za-z0-9+/]{12,}={0,2}")


class Raw(Place):
    """A store's whole storage as bytes: run files and item logs, the memory store's
    runs and items, every Cosmos DB item."""

    def everything(self) -> bytes:
        if self.kind == "file":
            files = sorted(p for p in (self.tmp_path / "store").rglob("*") if p.is_file())
            return b"\n".join(p.read_bytes() for p in files)
        if self.kind == "memory":
            return repr((self.memory._runs, self.memory._items)).encode()
        return "\n".join(x[2] for x in self.raw()).encode()


def leaks(raw: bytes, secret: str) -> bool:
    """Whether ``secret`` is in ``raw`` as it is, or inside any base64 run of it (how the
    saver writes the serializer's bytes)."""
    if secret.encode() in raw:
        return True
    for match in _BASE64.finditer(raw):
        text = match.group()
        for start in range(4):  # a run may begin mid-group: try each alignment
            part = text[start:]
            part = part[: len(part) - len(part) % 4]
            try:
                if secret.encode() in base64.b64decode(part):
                    return True
            except (binascii.Error, ValueError):
                continue
    return False


@pytest.fixture(params=["file", "memory", "cosmos-local"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Raw]:
    cosmos = None
    if request.param == "cosmos-local":
        cosmos = request.getfixturevalue("cosmos_local").fresh()
    made = Raw(request.param, tmp_path, cosmos)
    yield made
    for s in made.opened:
        s.close()
    if cosmos is not None:
        cosmos.drop()


def config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4()}"}}


def test_a_graph_on_an_encrypted_store_leaves_no_plaintext_and_time_travels(place: Raw) -> None:
    """The same graph on a plain store leaks the secret (so the check can fail); on an
    encrypted one nothing of it is readable, and history, replay and a fork work."""
    plain = post_graph(DurableSaver(place.store(None)))
    plain.invoke({"topic": "PLAIN-0815"}, config())
    assert leaks(place.everything(), "PLAIN-0815")

    store = place.store(codec())
    graph, cfg = post_graph(DurableSaver(store)), config()
    assert graph.invoke({"topic": SECRET}, cfg)["title"] == f"ABOUT {SECRET}"
    assert not leaks(place.everything(), SECRET)

    history = list(post_graph(DurableSaver(store)).get_state_history(cfg))
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]
    before_title = next(h for h in history if h.next == ("title",))
    assert before_title.values["draft"] == f"about {SECRET}"
    assert graph.invoke(None, before_title.config)["log"] == ["draft", "title"]
    forked = graph.update_state(before_title.config, {"draft": "about dogs"})
    assert graph.invoke(None, forked)["title"] == "ABOUT DOGS"
    assert graph.get_state(cfg).values["title"] == "ABOUT DOGS"
    assert not leaks(place.everything(), SECRET)


def test_a_wrong_or_missing_key_is_a_codec_error_naming_the_key(place: Raw) -> None:
    """Another key under the same id, a keyring without the id, and no codec at all:
    each read is ``CodecError`` naming key ``a`` -- never a damaged checkpoint."""
    cfg = config()
    post_graph(DurableSaver(place.store(codec()))).invoke({"topic": SECRET}, cfg)
    for other in (codec("a", {"a": KEY_B}), codec("b", {"b": KEY_B}), None):
        saver = DurableSaver(place.store(other))
        with pytest.raises(ds.CodecError, match="'a'") as caught:
            saver.get_tuple(cfg)
        assert caught.value.key_id == "a"
        assert not isinstance(caught.value, ds.CorruptCheckpointError)


def test_large_values_are_sealed_in_chunks_and_tampering_is_corruption(place: Raw) -> None:
    """A value over an item's size is sealed then chunked, and comes back whole; a
    sealed record altered, or copied under another key, is ``CorruptCheckpointError``."""
    store = place.store(codec())
    saver, cfg = DurableSaver(store), {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}
    big = os.urandom(200_000).hex() + SECRET  # incompressible: several items sealed
    cp = empty_checkpoint()
    cp["channel_values"], cp["channel_versions"] = (
        {"doc": big, "a": "1" * 600, "b": "2" * 600},  # over INLINE: records of their own
        {
            "doc": 1,
            "a": 1,
            "b": 1,
        },
    )
    stored = saver.put(cfg, cp, {"step": 0}, {"doc": 1, "a": 1, "b": 1})
    saver.put_writes(stored, [("doc", SECRET * 3)], "task-1")
    found = DurableSaver(store).get_tuple(cfg)
    assert found is not None
    assert found.checkpoint["channel_values"] == {"doc": big, "a": "1" * 600, "b": "2" * 600}
    assert found.pending_writes == [("task-1", "doc", SECRET * 3)]
    assert not leaks(place.everything(), SECRET)

    run, kind = thread_run("big"), blobs_kind("")
    blobs = {i.key: i for i in store.read_items(run, kind)}
    a, b = blobs["a 1"], blobs["b 1"]
    assert a.value.get("e") == 1
    store.put_item(run, kind, "b 1", a.value)  # a's sealed value under b's key
    with pytest.raises(ds.CorruptCheckpointError):
        DurableSaver(store).get_tuple(cfg)
    store.put_item(run, kind, "b 1", b.value)
    assert DurableSaver(store).get_tuple(cfg) is not None

    ckind = checkpoints_kind("")
    head = store.read_items(run, ckind, limit=1)[0]
    envelope = json.loads(head.value["d"])
    flipped = "A" if envelope["v"][5] != "A" else "B"
    envelope["v"] = envelope["v"][:5] + flipped + envelope["v"][6:]
    store.put_item(run, ckind, head.key, {**head.value, "d": json.dumps(envelope)})
    with pytest.raises(ds.CorruptCheckpointError):
        DurableSaver(store).get_tuple(cfg)


def test_a_copied_thread_is_sealed_for_itself_and_goes_on(place: Raw) -> None:
    """``copy_thread`` on an encrypted store: the copy has the same history (its list
    channel stored as extensions too), resumes from an earlier checkpoint, leaves the
    source as it was, and nothing of it is readable in the backend."""
    store = place.store(codec())
    graph, src, dst = post_graph(DurableSaver(store)), config(), config()
    graph.invoke({"topic": SECRET}, src)
    before = [h.config["configurable"]["checkpoint_id"] for h in graph.get_state_history(src)]
    DurableSaver(store).copy_thread(
        src["configurable"]["thread_id"], dst["configurable"]["thread_id"]
    )

    copy = post_graph(DurableSaver(store))
    history = list(copy.get_state_history(dst))
    assert [h.config["configurable"]["checkpoint_id"] for h in history] == before
    assert history[0].values == graph.get_state(src).values
    assert history[0].values["log"] == ["draft", "title"]
    before_title = next(h for h in history if h.next == ("title",))
    forked = copy.update_state(before_title.config, {"draft": "about dogs"})
    assert copy.invoke(None, forked)["title"] == "ABOUT DOGS"
    assert graph.get_state(src).values["title"] == f"ABOUT {SECRET}"
    assert not leaks(place.everything(), SECRET)
