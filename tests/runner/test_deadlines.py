"""Run deadlines (issue 31 item 7): ``Workflow(timeout=)`` and ``start(..., timeout=)``
-- a run not finished by its deadline is cancelled (reason "deadline") whether it is
running, waiting or started and not yet taken; a worker's look finds it. Every
backend, sync and async, on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

import durable_steps as ds
from durable_steps.workers.discovery import Look

from ..conftest import Api, Clock


def test_a_running_run_past_its_deadline_is_cancelled_at_its_next_save(
    api: Api, run_id: str, clock: Clock
) -> None:
    """A step that returns after the deadline is not saved: the run is saved as
    cancelled (reason "deadline", lease released) and the next step never runs."""
    ran: list[str] = []

    def slow(state: Any) -> dict[str, Any]:
        ran.append("slow")
        clock.advance(61)
        return {"slow": True}

    w = ds.Workflow(f"wf-{run_id}", [ds.Step("slow", slow), ds.Step("next", ran.append)])
    w = ds.Workflow(w.name, w.steps, timeout=60)
    with pytest.raises(ds.RunCancelledError, match="deadline"):
        api.start(w, run_id)
    cp = api.store.load(run_id)
    assert (cp.status, cp.cancel_reason, cp.step, cp.owner) == ("cancelled", "deadline", -1, None)
    assert ran == ["slow"]


def test_a_started_run_past_its_deadline_is_found_by_a_look_and_cancelled(
    api: Api, run_id: str, clock: Clock
) -> None:
    """`start(timeout=)` fixes the deadline at the start; once it has passed, a worker's
    look answers the run and its claim cancels it: the step never runs."""
    ran: list[str] = []
    w = ds.Workflow(f"wf-{run_id}", [ds.Step("s", ran.append)])
    assert api.create(w, run_id, timeout=10)
    assert api.store.load(run_id).deadline == pytest.approx(clock.now + 10)
    assert [i.run_id for i in api.store.takeable([w.name], at=clock.now)] == [run_id]
    clock.advance(11)
    (outcome,) = api.recover([w])
    assert (outcome.run_id, outcome.outcome) == (run_id, "cancelled")
    cp = api.store.load(run_id)
    assert (cp.status, cp.cancel_reason) == ("cancelled", "deadline")
    assert ran == []


def test_a_waiting_run_past_its_deadline_is_cancelled_by_the_worker(
    api: Api, run_id: str, clock: Clock
) -> None:
    """A run waiting for a signal (no timer) is not takeable -- until its deadline
    passes: then a worker's look finds it, and its claim cancels it."""
    w = ds.Workflow(
        f"wf-{run_id}", [ds.Step("ask", lambda s: {"ok": ds.wait_for_signal("ok")})], timeout=30
    )
    with pytest.raises(ds.RunWaiting):
        api.start(w, run_id)
    look = Look(api.store, {w.name: w}, None)
    look.first = False  # a later look: the store's own filter
    assert look.take(4, (), 0.0) == ([], [])
    clock.advance(31)
    assert look.take(4, (), 0.0)[0] == [(run_id, w.name)]
    assert look.everything() == [(run_id, w.name)]
    with pytest.raises(ds.RunCancelledError, match="deadline"):
        api.start(w, run_id)
    assert api.store.load(run_id).status == "cancelled"
