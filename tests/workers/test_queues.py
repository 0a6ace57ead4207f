"""Queues on every backend, sync and async: the record of a queue's slots and rate held
in the store (``workers.queues``), its runs taken by priority, and bad queues refused.
The fleet of real worker processes is ``test_queue_fleet``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.runner.requests import execute
from durable_steps.runner.store_io import blocking_io, execute_on
from durable_steps.workers.queues import Admission, Verdict, admit, record_id

from ..conftest import Api


def noop(state: Any) -> dict[str, Any]:
    return {"ran": True}


def admitted(api: Api, queue: ds.Queue, run_id: str, grace: float = 60.0) -> Verdict:
    """What the queue says to taking ``run_id`` now, asked as a worker asks it."""
    info = info_of(api, run_id)
    if api.is_async:
        coro = execute_on(admit(queue, info, grace=grace), api.store.aio)
        return asyncio.run_coroutine_threadsafe(coro, api.loop).result(60)
    return execute(admit(queue, info, grace=grace), blocking_io(api.store))


def info_of(api: Api, run_id: str) -> ds.RunInfo:
    info = api.store.run_info(run_id)
    assert info is not None
    return info


def test_a_queue_holds_its_concurrency_in_the_store(api: Api, run_id: str) -> None:
    """At most ``concurrency`` runs of a queue are admitted at once; a run being claimed
    or running holds its slot, a run that completed frees it, and a partition has
    limits of its own."""
    q = ds.Queue(f"q-{run_id}", concurrency=2)
    w = ds.Workflow("queued", [ds.Step("s", noop)], queue=q)
    ids = [f"{run_id}-{i}" for i in range(4)]
    for i in ids:
        assert api.create(w, i)
    assert info_of(api, ids[0]).queue == q.name
    assert [admitted(api, q, i) for i in ids[:3]] == ["taken", "taken", "full"]
    assert admitted(api, q, ids[0]) == "held"  # admitted by another worker, being claimed
    api.start(w, ids[0])  # its worker ran it to the end: its slot is free
    assert admitted(api, q, ids[2]) == "taken"
    assert admitted(api, q, ids[3]) == "full"
    other = f"{run_id}-tenant"
    assert api.create(w, other, partition="tenant-b")
    assert info_of(api, other).partition == "tenant-b"
    assert admitted(api, q, other) == "taken"  # its partition's own limit
    record = api.store.load(record_id(q.name, None))
    assert record is not None and sorted(record.state["slots"]) == sorted([ids[1], ids[2]])


def test_a_slot_frees_when_its_run_is_not_claimed_in_time(api: Api, run_id: str) -> None:
    """A worker that admitted a run and died before claiming it holds its slot only for
    ``grace`` seconds (a claimed run's slot lasts as long as its lease)."""
    q = ds.Queue(f"q-{run_id}", concurrency=1)
    w = ds.Workflow("queued", [ds.Step("s", noop)], queue=q)
    for i in (f"{run_id}-a", f"{run_id}-b"):
        api.create(w, i)
    assert admitted(api, q, f"{run_id}-a", grace=0.0) == "taken"
    assert admitted(api, q, f"{run_id}-b", grace=0.0) == "taken"


def test_a_queue_holds_its_rate(api: Api, run_id: str) -> None:
    """At most ``n`` runs of a queue are taken per ``per_seconds``, whatever its
    concurrency."""
    q = ds.Queue(f"q-{run_id}", rate=(2, 3600.0))
    w = ds.Workflow("rated", [ds.Step("s", noop)], queue=q)
    for i in range(3):
        api.create(w, f"{run_id}-{i}")
    verdicts = [admitted(api, q, f"{run_id}-{i}") for i in range(3)]
    assert verdicts == ["taken", "taken", "full"]


def test_recover_takes_higher_priority_first_within_the_limit(api: Api, run_id: str) -> None:
    """``recover`` takes the runs of a queue by priority (the queue's for runs started
    without one), and none past the queue's limit."""
    q = ds.Queue(f"q-{run_id}", concurrency=1, priority=5)
    w = ds.Workflow(f"prio-{run_id}", [ds.Step("s", noop)], queue=q)
    api.create(w, f"{run_id}-low", priority=1)
    api.create(w, f"{run_id}-mid")  # the queue's priority: 5
    api.create(w, f"{run_id}-high", priority=9)
    done = [r.run_id for r in api.recover([w]) if r.outcome == "completed"]
    done += [r.run_id for r in api.recover([w]) if r.outcome == "completed"]
    done += [r.run_id for r in api.recover([w]) if r.outcome == "completed"]
    assert done == [f"{run_id}-high", f"{run_id}-mid", f"{run_id}-low"]


def test_bad_queues_are_refused_before_anything_is_stored(tmp_path: Any) -> None:
    """Limits, priorities and partitions are checked where they are given, with a
    message that says what is accepted."""
    with pytest.raises(ValueError, match="concurrency must be an int of 1 or more"):
        ds.Queue("q", concurrency=0)
    with pytest.raises(ValueError, match=r"rate must be \(n, per_seconds\)"):
        ds.Queue("q", rate=(5, 0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="priority must be an int"):
        ds.Queue("q", priority=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="queue= takes a Queue"):
        ds.Workflow("w", [ds.Step("s", noop)], queue="q")  # type: ignore[arg-type]
    w = ds.Workflow("w", [ds.Step("s", noop)])
    with ds.FileStore(tmp_path / "store") as store:
        with pytest.raises(ValueError, match="give queue="):
            w.start("r", store, priority=3)
        with pytest.raises(ValueError, match="queue partition key"):
            w.start("r", store, queue="q", partition="")
        assert store.load("r") is None


def test_two_different_queues_of_one_name_are_refused() -> None:
    """A worker cannot keep two sets of limits under one queue name."""
    a = ds.Workflow("a", [ds.Step("s", noop)], queue=ds.Queue("q", concurrency=1))
    b = ds.Workflow("b", [ds.Step("s", noop)], queue=ds.Queue("q", concurrency=2))
    with pytest.raises(ValueError, match="two queues are named 'q'"):
        Admission.of([a, b], 60.0)
