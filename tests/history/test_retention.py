"""Deleting or expiring a run removes its history and every record or segment of it
(issue 33, item 5), verified by listing what is left in the directory or container."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.workers.retention import Expiry

from ..conftest import Api, Backend
from .test_history import _steps


def leftovers(backend: Backend, run_id: str) -> list[Any]:
    """What the store still holds of ``run_id``: files (a run file or history) in a
    file store's directory, items of its partition in a Cosmos DB container, entries
    of a memory store."""
    if backend.path is not None:
        # (due/: the worker's index of runs to take -- hints, a stale one dropped by a look;
        # procs/: the processes that hold leases on the store, not any run's)
        kept = [p for p in backend.path.rglob("*") if p.is_file()]
        return [p for p in kept if not {"locks", "due", "procs"} & set(p.parts)]
    if backend.cosmos is not None:
        query = "SELECT c.id FROM c WHERE c.run = @run"
        params: list[dict[str, Any]] = [{"name": "@run", "value": run_id}]
        container = backend.cosmos.raw_container()
        return list(container.query_items(query, parameters=params, partition_key=run_id))
    store = getattr(backend.store, "aio", backend.store)
    memory = getattr(store, "sync", store)
    return [k for table in (memory._runs, memory._kept) for k in table if k == run_id]


def test_deleting_a_run_removes_its_history(api: Api, run_id: str) -> None:
    """A run with history (superseded logs, kept segments) leaves nothing once deleted."""
    api.run(run_id, _steps(Counter(), n=30))  # replaced values: compactions and folds
    assert len(api.store.run_history(run_id)) == 30
    assert leftovers(api.backend, run_id)
    assert api.store.delete(run_id)
    assert leftovers(api.backend, run_id) == []
    assert api.store.run_history(run_id) is None


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_expired_runs_go_with_their_history(kind: str, tmp_path: Path) -> None:
    """finished_ttl on a store without item TTL: delete_expired (the worker, runs prune)
    deletes completed runs last saved longer ago, with their history; others stay --
    a failed or cancelled run too, which can be resumed (as on Cosmos DB, whose item
    TTL is stamped on a completed run only)."""
    store: ds.Store = (
        ds.FileStore(tmp_path, finished_ttl=60)
        if kind == "file"
        else ds.MemoryStore(finished_ttl=60)
    )
    ds.run("done", _steps(Counter(), n=12), store)
    with pytest.raises(RuntimeError):
        ds.run("failed", [ds.Step("boom", _fail)], store)
    store.save(ds.Checkpoint("cancelled", -1, {}))
    assert ds.cancel_run(store, "cancelled")
    assert store.load("cancelled").status == "cancelled"  # type: ignore[union-attr]
    assert store.delete_expired(now=time.time() + 30) == 0  # not yet
    assert store.delete_expired(now=time.time() + 120) == 1
    assert store.load("done") is None and store.load("failed") is not None
    assert store.load("cancelled") is not None
    assert store.run_history("done") is None
    if kind == "file":
        assert not any((tmp_path / "history").glob("*/*"))


def _fail(state: Any) -> None:
    raise RuntimeError("fails for good")


def test_the_worker_deletes_expired_runs() -> None:
    """The worker's retention pass (``Expiry``) deletes a run that ended past the
    store's finished_ttl, at most once per its period."""
    store = ds.MemoryStore(finished_ttl=60)
    old = time.time() - 120
    store.save(ds.Checkpoint("old", 0, {}, steps=("s",), status="completed", updated_at=old))
    store.save(ds.Checkpoint("new", 0, {}, steps=("s",), status="completed"))
    expiry = Expiry(store, every=3600)
    assert expiry.due() == 1
    assert store.load("old") is None and store.load("new") is not None
    store.save(ds.Checkpoint("old", 0, {}, steps=("s",), status="completed", updated_at=old))
    assert expiry.due() == 0  # the next pass is not due yet


@pytest.fixture(params=["file", "memory", "cosmos-local"])
def keeping_five(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A store of each kind that keeps at least the last 5 completed steps."""
    if request.param == "file":
        yield ds.FileStore(tmp_path, keep_last=5)
    elif request.param == "memory":
        yield ds.MemoryStore(keep_last=5)
    else:
        cosmos = request.getfixturevalue("cosmos_local").fresh()
        with cosmos.store(history="steps", keep_last=5) as store:
            yield store
        cosmos.drop()


def test_keep_last_keeps_at_least_the_last_steps(keeping_five: Any, run_id: str) -> None:
    """keep_last=5: the last five completed steps stay loadable; older ones go (at the
    next compaction or fold), and asking for one is StepNotKeptError."""
    store = keeping_five
    ds.run(run_id, _steps(Counter(), n=30), store)
    kept = [h.step for h in store.run_history(run_id)]
    assert kept[-5:] == [25, 26, 27, 28, 29] and 0 not in kept
    assert store.load_at(run_id, 25).state["log"] == list(range(26))
    with pytest.raises(ds.StepNotKeptError):
        store.load_at(run_id, 0)


# Cosmos DB: tests/stores/cosmos/test_cosmos_expiry.py (the expiry index, what is left).
