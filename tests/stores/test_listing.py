"""list_runs and conditional delete, on every backend: filters and limit applied by the
store, a stream (not a list), and the new RunInfo fields."""

from __future__ import annotations

import inspect
import time
from dataclasses import replace

import pytest

import durable_steps as ds

from ..conftest import Backend


def seed(backend: Backend, run_id: str) -> dict[str, ds.Checkpoint]:
    old = time.time() - 3 * 86400
    store = backend.store
    cps = {
        "running": ds.Checkpoint(
            f"{run_id}-running",
            0,
            {},
            steps=("a",),
            workflow="w1",
            owner="me",
            lease_expires=time.time() + 60,
        ),
        "waiting": ds.Checkpoint(
            f"{run_id}-waiting",
            0,
            {},
            steps=("a",),
            workflow="w1",
            status="waiting",
            waiting_for="approval",
        ),
        "failed": ds.Checkpoint(
            f"{run_id}-failed",
            -1,
            {},
            workflow="w2",
            status="failed",
            error={"type": "TimeoutError", "message": "x"},
        ),
        "old-done": ds.Checkpoint(
            f"{run_id}-old-done", 0, {}, steps=("a",), workflow="w2", done=True, updated_at=old
        ),
        "plain": ds.Checkpoint(f"{run_id}-plain", -1, {}),
    }
    return {k: store.save(cp) for k, cp in cps.items()}


def mine(infos: object, run_id: str) -> dict[str, ds.RunInfo]:
    return {i.run_id.removeprefix(f"{run_id}-"): i for i in infos if i.run_id.startswith(run_id)}  # type: ignore[attr-defined]


def test_list_runs_reports_status_workflow_lease_and_wait(backend: Backend, run_id: str) -> None:
    """Each listed run carries status, workflow, lease, waited-for signal and etag."""
    saved = seed(backend, run_id)
    infos = mine(backend.store.list_runs(), run_id)
    assert set(infos) == set(saved)
    r = infos["running"]
    assert (r.status, r.workflow, r.owner, r.step, r.step_name) == ("running", "w1", "me", 0, "a")
    assert r.lease_expires == pytest.approx(saved["running"].lease_expires)
    assert (infos["waiting"].status, infos["waiting"].waiting_for) == ("waiting", "approval")
    assert infos["failed"].status == "failed"
    assert (infos["old-done"].status, infos["old-done"].done) == ("completed", True)
    assert all(i.etag == saved[k].etag for k, i in infos.items())


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"status": "running"}, {"running", "plain"}),
        ({"status": "waiting"}, {"waiting"}),
        ({"status": "completed"}, {"old-done"}),
        ({"workflow": "w1"}, {"running", "waiting"}),
        ({"workflow": "w2", "status": "failed"}, {"failed"}),
        ({"updated_before": time.time() - 86400}, {"old-done"}),
    ],
    ids=["running", "waiting", "completed", "workflow", "both", "updated-before"],
)
def test_list_runs_filters(
    backend: Backend, run_id: str, filters: dict[str, object], expected: set[str]
) -> None:
    """status, workflow and updated_before select exactly the matching runs."""
    seed(backend, run_id)
    assert set(mine(backend.store.list_runs(**filters), run_id)) == expected


def test_list_runs_limit_and_bad_filters(backend: Backend, run_id: str) -> None:
    """limit bounds how many runs come back; an unknown status or a negative limit is a
    ValueError saying what is accepted."""
    seed(backend, run_id)
    assert len(list(backend.store.list_runs(limit=2))) == 2
    assert list(backend.store.list_runs(limit=0)) == []
    with pytest.raises(ValueError, match="status must be one of"):
        list(backend.store.list_runs(status="done"))
    with pytest.raises(ValueError, match="limit"):
        list(backend.store.list_runs(limit=-1))


def test_list_runs_streams(backend: Backend, run_id: str) -> None:
    """list_runs gives an iterator that yields runs as it reads them, never one list."""
    seed(backend, run_id)
    store = getattr(backend.store, "aio", backend.store)
    listing = store.list_runs()
    assert (
        inspect.isgenerator(listing) or inspect.isasyncgen(listing) or hasattr(listing, "__next__")
    )
    assert not isinstance(listing, list | tuple)
    if inspect.isasyncgen(listing):
        backend.store._wait(listing.aclose())


def test_delete_with_an_etag_deletes_only_an_unchanged_run(backend: Backend, run_id: str) -> None:
    """delete(run_id, etag=...) deletes the run as it was listed; if it changed since
    (a worker resumed it), ConflictError and nothing is deleted."""
    saved = seed(backend, run_id)
    done = saved["old-done"]
    assert backend.store.delete(done.run_id, etag=done.etag) is True
    assert backend.store.load(done.run_id) is None
    running = saved["running"]
    newer = backend.store.save(replace(running, attempt=2, updated_at=None))
    with pytest.raises(ds.ConflictError, match="changed since"):
        backend.store.delete(running.run_id, etag=running.etag)
    assert backend.store.load(running.run_id).etag == newer.etag
    assert backend.store.delete(running.run_id, etag=newer.etag) is True
    assert backend.store.delete(running.run_id, etag=newer.etag) is False
