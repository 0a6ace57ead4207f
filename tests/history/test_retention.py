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
        # (due/: the worker's index of runs to take -- hints, a stale one dropped by a look)
        kept = [p for p in backend.path.rglob("*") if p.is_file()]
        return [p for p in kept if "locks" not in p.parts and "due" not in p.parts]
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
    deletes ended runs last saved longer ago, with their history; others stay."""
    store: ds.Store = (
        ds.FileStore(tmp_path, finished_ttl=60)
        if kind == "file"
        else ds.MemoryStore(finished_ttl=60)
    )
    ds.run("done", _steps(Counter(), n=12), store)
    with pytest.raises(RuntimeError):
        ds.run("failed", [ds.Step("boom", _fail)], store)
    assert store.delete_expired(now=time.time() + 30) == 0  # not yet
    assert store.delete_expired(now=time.time() + 120) == 1
    assert store.load("done") is None and store.load("failed") is not None
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


def _service_ttl(container: Any, at: float) -> None:
    """What Cosmos DB's TTL does by ``at`` (the local server has no TTL): every item
    whose ``_ts + ttl`` is past is deleted."""
    for item in list(container.query_items("SELECT * FROM c", enable_cross_partition_query=True)):
        if isinstance(item.get("ttl"), int) and item["_ts"] + item["ttl"] <= at:
            container.delete_item(item["id"], partition_key=item["run"])


def _chatty(n: int) -> list[ds.Step]:
    def step(i: int) -> ds.Step:
        def body(state: Any) -> dict[str, Any]:
            ds.write_stream("out", f"chunk {i}")
            ds.set_event("progress", i)
            return {f"k{i}": "v" * 2000}  # past the inline size: history's segments

        return ds.Step(f"s{i}", body)

    return [step(i) for i in range(n)]


def test_an_expired_cosmos_run_leaves_nothing_in_its_container(cosmos_local: Any) -> None:
    """finished_ttl on Cosmos DB: the service expires a completed run's head and snapshot;
    its stream chunks, events and kept history carry no ttl, and the store's
    delete_expired (the worker's retention pass, runs prune) removes them once the head
    is gone -- every item of the container is listed with its partition key: nothing of
    the run is left. A run still alive keeps everything."""
    cosmos = cosmos_local.fresh()
    try:
        with cosmos.store(finished_ttl=60) as store:
            ds.run("ends", _chatty(4), store)
            with pytest.raises(RuntimeError):
                ds.run("stays", [*_chatty(2), ds.Step("boom", _fail)], store)
            container = cosmos.raw_container()

            def everything() -> list[tuple[str, str]]:
                rows = container.query_items(
                    "SELECT c.id, c.run FROM c", enable_cross_partition_query=True
                )
                return sorted((r["run"], r["id"]) for r in rows)

            before = everything()
            assert {run for run, _ in before} == {"ends", "stays"}
            later = time.time() + 60 + 2 * 3600  # the head's ttl, the snapshot's margin
            _service_ttl(container, later)
            left = [row for row in everything() if row[0] == "ends"]
            assert left and ("ends", "ends") not in left  # the head went; the rest did not
            assert store.delete_expired(now=time.time()) == 0  # not older than the ttl yet
            assert store.delete_expired(now=later) == 1
            assert [row for row in everything() if row[0] == "ends"] == []
            assert [row for row in everything() if row[0] == "stays"] == [
                row for row in before if row[0] == "stays"
            ]
            assert len(list(ds.read_stream(store, "stays", "out", follow=False))) == 2
    finally:
        cosmos.drop()
