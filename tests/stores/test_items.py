"""Per-run items (``seam.items``: what streams and events are stored as): the contract
on every backend, sync and async -- create-only appends, upserts, reads after a key in
key order, values never aliased, items gone with their run and never listed as runs."""

from __future__ import annotations

import pytest

import durable_steps as ds
from durable_steps.seam.items import MAX_ITEM_BYTES, offset_key

from ..conftest import Backend

KIND = "stream:out"


def test_append_is_create_only_and_reads_come_in_key_order(backend: Backend, run_id: str) -> None:
    """Appended items come back in key order whatever the order written; appending a key
    that exists raises ConflictError and leaves the first value."""
    store = backend.store
    for offset in (2, 0, 1):
        store.append_item(run_id, KIND, offset_key(offset), {"n": offset})
    with pytest.raises(ds.ConflictError, match="exists already"):
        store.append_item(run_id, KIND, offset_key(1), {"n": "again"})
    items = store.read_items(run_id, KIND)
    assert [(i.key, i.value) for i in items] == [(offset_key(n), {"n": n}) for n in range(3)]


def test_read_after_a_key_with_a_limit(backend: Backend, run_id: str) -> None:
    """A read gives the items after ``after``, at most ``limit``; nothing after the last
    key is an empty list, and so is a run or kind with no items."""
    store = backend.store
    for offset in range(5):
        store.append_item(run_id, KIND, offset_key(offset), offset)
    assert [i.value for i in store.read_items(run_id, KIND, after=offset_key(1), limit=2)] == [2, 3]
    assert [i.value for i in store.read_items(run_id, KIND, after=offset_key(3))] == [4]
    assert store.read_items(run_id, KIND, after=offset_key(4)) == []
    assert store.read_items(run_id, "stream:other") == []
    assert store.read_items(f"{run_id}-none", KIND) == []


def test_put_replaces_and_kinds_are_apart(backend: Backend, run_id: str) -> None:
    """put_item is an upsert; items of another kind or run are not seen."""
    store = backend.store
    store.put_item(run_id, "events", "progress", 1)
    store.put_item(run_id, "events", "answer", {"text": "hi"})
    store.put_item(run_id, "events", "progress", 2)
    store.append_item(run_id, KIND, offset_key(0), "chunk")
    store.put_item(f"{run_id}-b", "events", "progress", 99)
    got = {i.key: i.value for i in store.read_items(run_id, "events")}
    assert got == {"answer": {"text": "hi"}, "progress": 2}


def test_values_are_not_aliased(backend: Backend, run_id: str) -> None:
    """A value changed after it was appended, or after it was read, changes nothing stored."""
    store = backend.store
    value = {"list": [1, 2]}
    store.append_item(run_id, KIND, offset_key(0), value)
    value["list"].append(3)
    read = store.read_items(run_id, KIND)[0].value
    read["list"].append(4)
    assert store.read_items(run_id, KIND)[0].value == {"list": [1, 2]}


def test_bad_values_and_names_are_refused_before_any_io(backend: Backend, run_id: str) -> None:
    """A value that is not plain JSON, or over MAX_ITEM_BYTES, is InvalidStateError; a
    bad run id InvalidRunIdError; nothing is stored."""
    store = backend.store
    with pytest.raises(ds.InvalidStateError):
        store.append_item(run_id, KIND, offset_key(0), {"x": object()})
    with pytest.raises(ds.InvalidStateError, match="smaller chunks"):
        store.append_item(run_id, KIND, offset_key(0), "x" * (MAX_ITEM_BYTES + 1))
    with pytest.raises(ds.InvalidRunIdError):
        store.append_item("a/b", KIND, offset_key(0), 1)
    assert store.read_items(run_id, KIND) == []


def test_items_go_with_their_run_and_are_not_listed(backend: Backend, run_id: str) -> None:
    """A run's items are not runs in its listing, and delete removes them with it."""
    store = backend.store
    store.save(ds.Checkpoint(run_id, -1, {"a": 1}))
    store.append_item(run_id, KIND, offset_key(0), "one")
    store.put_item(run_id, "events", "k", 1)
    assert [i.run_id for i in store.list_runs() if i.run_id.startswith(run_id)] == [run_id]
    assert store.delete(run_id)
    assert store.read_items(run_id, KIND) == []
    assert store.read_items(run_id, "events") == []
    store.append_item(run_id, KIND, offset_key(0), "new life")  # the same key is free again
    assert [i.value for i in store.read_items(run_id, KIND)] == ["new life"]


def test_delete_items_removes_those_keys_only(backend: Backend, run_id: str) -> None:
    """delete_items removes the keys named (a key not there is no error), leaves the
    others and other kinds; a removed key can be appended again; a fresh look at the
    store (another process's) sees the same."""
    store = backend.store
    for offset in range(4):
        store.append_item(run_id, KIND, offset_key(offset), offset)
    store.put_item(run_id, "events", offset_key(1), "other kind")
    store.delete_items(run_id, KIND, [offset_key(1), offset_key(3), "not-there"])
    store.delete_items(run_id, KIND, [])
    store.delete_items(f"{run_id}-none", KIND, [offset_key(0)])
    assert [i.value for i in store.read_items(run_id, KIND)] == [0, 2]
    assert [i.value for i in store.read_items(run_id, KIND, after=offset_key(0))] == [2]
    assert [i.value for i in store.read_items(run_id, "events")] == ["other kind"]
    store.append_item(run_id, KIND, offset_key(1), "again")
    assert [i.value for i in store.read_items(run_id, KIND)] == [0, "again", 2]
    if backend.path is not None:  # a file store opened afresh reads the log from its start
        with ds.FileStore(backend.path) as fresh:
            assert [i.value for i in fresh.read_items(run_id, KIND)] == [0, "again", 2]
