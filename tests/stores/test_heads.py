"""A run's head read and written alone (``load_head``, ``save_head`` of the ``Store``
methods every store of the package has): the contract on every backend. A signal, a
cancellation and ``Workflow.start`` use them, so they cost the head whatever the
state's size (on Cosmos DB counted on the wire: ``test_cosmos_heads``)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

import durable_steps as ds
from durable_steps.seam.checkpoint import NOT_READ

from ..conftest import Backend, SyncFacade

BIG = "b" * 20_000
"""Past Cosmos DB's inline data (4 KiB): the state lives in segments there."""


def waiting_run(store: ds.Store, run_id: str, **state: object) -> ds.Checkpoint:
    """A run of two saves that waits for a signal, with a recorded call in its journal."""
    cp = store.save(ds.Checkpoint(run_id, -1, {"big": BIG, **state}))
    return store.save(
        replace(
            cp,
            step=0,
            steps=("a",),
            status="waiting",
            waiting_for="go",
            calls=({"i": 0, "name": "llm", "result": {"text": "hi"}},),
            updated_at=None,
        )
    )


def test_every_store_is_of_the_typed_interface(backend: Backend) -> None:
    """Every store of the package inherits the one interface (heads included): the
    runner, the workers and the CLI reach every method without a fallback."""
    store = backend.store
    if isinstance(store, SyncFacade):
        assert isinstance(store.aio, ds.AsyncStore)
    else:
        assert isinstance(store, ds.Store)


def test_load_head_gives_every_field_but_the_data(backend: Backend, run_id: str) -> None:
    """load_head is load without the state (a stand-in that refuses to be read) and the
    journal; the etag is the stored one. A missing run is None."""
    store = backend.store
    assert store.load_head(run_id) is None
    saved = waiting_run(store, run_id)
    head = store.load_head(run_id)
    whole = store.load(run_id)
    assert head is not None and whole is not None
    assert head.etag == whole.etag == saved.etag
    assert head.state is NOT_READ and head.calls == ()
    assert replace(head, state=whole.state, calls=whole.calls) == whole
    with pytest.raises(TypeError, match=r"read without its state.*store\.load"):
        head.state["big"]


def test_save_head_changes_the_fields_and_keeps_the_data(backend: Backend, run_id: str) -> None:
    """save_head writes every field but the data over the version it was read at: the
    state and the journal stay as stored, and a save on top of it works."""
    store = backend.store
    waiting_run(store, run_id)
    head = store.load_head(run_id)
    assert head is not None
    changed = replace(
        head, signals={"go": {"ok": True}}, status="running", waiting_for=None, updated_at=None
    )
    saved = store.save_head(changed)
    assert saved.state is NOT_READ and saved.etag not in (None, head.etag)
    loaded = store.load(run_id)
    assert loaded is not None and loaded.etag == saved.etag
    assert loaded.state == {"big": BIG}
    assert [dict(r) for r in loaded.calls] == [{"i": 0, "name": "llm", "result": {"text": "hi"}}]
    assert (loaded.status, dict(loaded.signals), loaded.steps) == (
        "running",
        {"go": {"ok": True}},
        ("a",),
    )
    assert store.load_head(run_id) == head_of(loaded)
    again = store.save(replace(loaded, state={**loaded.state, "more": 1}, updated_at=None))
    assert store.load(run_id).state == {"big": BIG, "more": 1}  # type: ignore[union-attr]
    assert again.etag != saved.etag


def head_of(cp: ds.Checkpoint) -> ds.Checkpoint:
    return replace(cp, state=NOT_READ, calls=())


def test_save_head_is_conditional_and_writes_nothing_when_it_loses(
    backend: Backend, run_id: str
) -> None:
    """A stale etag, or a run gone, is a ConflictError and the stored run is unchanged;
    a head without an etag is a ValueError (a head changes a stored run), before I/O."""
    store = backend.store
    waiting_run(store, run_id)
    head = store.load_head(run_id)
    assert head is not None
    newer = store.save_head(replace(head, cancel_reason="first", updated_at=None))
    with pytest.raises(ds.ConflictError):
        store.save_head(replace(head, cancel_reason="stale", updated_at=None))
    loaded = store.load(run_id)
    assert loaded is not None and loaded.etag == newer.etag and loaded.cancel_reason == "first"
    with pytest.raises(ValueError, match="needs the etag"):
        store.save_head(replace(head, etag=None))
    store.delete(run_id)
    with pytest.raises(ds.ConflictError):
        store.save_head(newer)
    assert store.load(run_id) is None


def test_a_head_is_never_saved_whole(backend: Backend, run_id: str) -> None:
    """save() of a checkpoint read without its state is refused before any I/O: it would
    replace the run's state with nothing."""
    store = backend.store
    waiting_run(store, run_id)
    head = store.load_head(run_id)
    assert head is not None
    with pytest.raises(TypeError, match="read without its state"):
        store.save(replace(head, cancel_reason="x"))
    assert store.load(run_id).state == {"big": BIG}  # type: ignore[union-attr]


def test_a_run_written_by_an_earlier_version_takes_a_head_save(
    backend: Backend, run_id: str
) -> None:
    """A checkpoint of schema 2 as an earlier version wrote it (one whole document; on
    Cosmos DB an item without the fields this version adds) reads as a head and takes a
    head-only save, its state kept."""
    etag = "e" * 24
    backend.write_raw(
        run_id,
        {
            "schema": 2,
            "run_id": run_id,
            "etag": etag,
            "step": 0,
            "steps": ["a"],
            "status": "waiting",
            "waiting_for": "go",
            "state": {"big": BIG},
        },
    )
    head = backend.store.load_head(run_id)
    assert head is not None and (head.status, head.waiting_for) == ("waiting", "go")
    saved = backend.store.save_head(replace(head, signals={"go": 1}, status="running"))
    loaded = backend.store.load(run_id)
    assert loaded is not None and loaded.etag == saved.etag
    assert (loaded.state, dict(loaded.signals), loaded.status) == (
        {"big": BIG},
        {"go": 1},
        "running",
    )


def test_on_the_file_log_a_signal_and_a_cancellation_append_a_record_of_the_head(
    store: ds.FileStore, run_id: str
) -> None:
    """On a 1.5 MB state, send_signal and cancel_run each append one record of the
    head's fields, step names and signals (a few hundred bytes), never the state."""
    wait = ds.Workflow("waits", [ds.Step("w", lambda s: ds.wait_for_signal("go"))])
    wait.start(run_id, store, input={"blob": "x" * 1_500_000})
    with pytest.raises(ds.RunWaiting):
        wait.run(run_id, store)
    file = store.file_for(run_id)
    sizes = [file.stat().st_size]
    ds.send_signal(store, run_id, "note", {"n": 1})
    sizes.append(file.stat().st_size)
    assert ds.cancel_run(store, run_id, reason="enough")
    sizes.append(file.stat().st_size)
    grown = [b - a for a, b in itertools.pairwise(sizes)]
    assert all(0 < n < 1000 for n in grown), grown
    loaded = store.load(run_id)
    assert loaded is not None and loaded.state == {"blob": "x" * 1_500_000}
    assert (loaded.status, dict(loaded.signals)) == ("cancelled", {"note": {"n": 1}})
