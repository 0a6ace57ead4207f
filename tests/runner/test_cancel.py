"""Cancelling runs (``cancel_run``): a conditional save that never overwrites the owner's;
a cancelled run starts no other step or call, and nothing runs it again. On every
backend (and the async twins)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api
from ..helpers.waiting import wait_until


def slow_steps(log: list[str], gate: threading.Event | None = None) -> list[ds.Step]:
    def step(name: str) -> ds.Step:
        def fn(state: Any) -> dict[str, Any]:
            log.append(name)
            if gate is not None and name == "b":
                assert gate.wait(60)
            return {name: True}

        return ds.Step(name, fn)

    return [step("a"), step("b"), step("c")]


def test_a_cancelled_run_runs_nothing_more(api: Api, run_id: str) -> None:
    """Cancel a run that stopped between steps (its step failed): True, status cancelled
    with the reason, no lease. Then run, start, send_signal and recover all leave it
    alone (RunCancelledError before anything runs); cancelling again gives False."""
    w = ds.Workflow("job", [api.step("a", _fails)])
    with pytest.raises(RuntimeError):
        api.start(w, run_id)
    assert api.cancel(run_id, reason="wrong customer") is True
    cp = api.store.load(run_id)
    assert (cp.status, cp.cancel_reason, cp.owner, cp.lease_expires) == (
        "cancelled",
        "wrong customer",
        None,
        None,
    )
    with pytest.raises(ds.RunCancelledError, match="wrong customer") as err:
        api.start(w, run_id)
    assert (err.value.run_id, err.value.reason) == (run_id, "wrong customer")
    with pytest.raises(ds.RunCancelledError):
        api.create(w, run_id)
    with pytest.raises(ds.RunCancelledError):
        api.signal(run_id, "approval")
    assert api.recover([w]) == []
    assert api.cancel(run_id) is False
    assert api.store.load(run_id) == cp


async def _fails(state: Any) -> None:
    raise RuntimeError("boom")


def test_a_waiting_run_and_a_started_run_can_be_cancelled(api: Api, run_id: str) -> None:
    """A run waiting for a signal, and a run started for the workers but not picked up."""

    async def gate(state: Any) -> None:
        ds.wait_for_signal("approval")

    with pytest.raises(ds.RunWaiting):
        api.run(run_id, [api.step("gate", gate)])
    assert api.cancel(run_id) is True
    assert api.store.load(run_id).status == "cancelled"
    w = ds.Workflow("job", [api.step("gate", gate)])
    assert api.create(w, f"{run_id}-2") is True
    assert api.cancel(f"{run_id}-2") is True
    assert api.recover([w]) == []


def test_completed_and_missing_runs_are_refused(api: Api, run_id: str) -> None:
    """A completed run cannot be cancelled (ConflictError, nothing changed); a run that
    does not exist raises RunNotFoundError."""
    api.run(run_id, [api.step("a", _nothing)])
    before = api.store.load(run_id)
    with pytest.raises(ds.ConflictError, match="completed"):
        api.cancel(run_id)
    assert api.store.load(run_id) == before
    with pytest.raises(ds.RunNotFoundError):
        api.cancel(f"{run_id}-missing")


async def _nothing(state: Any) -> dict[str, Any]:
    return {"done": True}


def test_the_owner_of_a_sync_step_drops_its_result_and_stops(
    durable_store: ds.Store, run_id: str
) -> None:
    """Under run, the step in progress runs to its end; its result is not saved, the next
    step never starts, and run raises RunCancelledError."""
    log: list[str] = []
    gate = threading.Event()
    outcome: list[BaseException] = []

    def owner() -> None:
        try:
            ds.run(run_id, slow_steps(log, gate), durable_store)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=owner)
    thread.start()
    wait_until(lambda: log == ["a", "b"], "step b to run")
    assert ds.cancel_run(durable_store, run_id, reason="stop") is True
    gate.set()
    thread.join(60)
    assert isinstance(outcome[0], ds.RunCancelledError)
    assert log == ["a", "b"]
    cp = durable_store.load(run_id)
    assert (cp.status, cp.steps, dict(cp.state)) == ("cancelled", ("a",), {"a": True})


def test_an_async_step_is_cancelled_at_the_next_heartbeat(
    async_durable_store: Any, run_id: str
) -> None:
    """Under run_async the heartbeat notices the cancellation and cancels the running
    step (as for a lost lease): run_async raises RunCancelledError without waiting for
    the step, which would never end by itself."""
    stopped: list[str] = []

    async def forever(state: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.append("cancelled")
            raise

    async def scenario() -> ds.Checkpoint:
        async with async_durable_store as store:
            steps = [ds.Step("s", forever)]
            owner = asyncio.create_task(ds.run_async(run_id, steps, store, lease=0.3))
            while (await store.load(run_id)) is None:
                await asyncio.sleep(0.01)
            assert await ds.cancel_run_async(store, run_id) is True
            done, _ = await asyncio.wait({owner}, timeout=30)  # never cancels the owner
            assert done, "the heartbeat did not stop the step"
            assert isinstance(owner.exception(), ds.RunCancelledError)
            cp = await store.load(run_id)
            assert cp is not None
            return cp  # type: ignore[no-any-return]

    cp = asyncio.run(scenario())
    assert stopped == ["cancelled"] and cp.status == "cancelled"


def test_no_call_starts_after_the_owner_learns_of_the_cancellation(
    durable_store: ds.Store, run_id: str
) -> None:
    """A step making calls: the first call recorded after the cancellation fails with
    RunCancelledError, and the calls after it never run."""
    made: list[int] = []

    def agent(state: Any) -> None:
        for n in range(10):
            ds.call(f"c{n}", made.append, n)
            if n == 2:
                ds.cancel_run(durable_store, run_id)

    with pytest.raises(ds.RunCancelledError):
        ds.run(run_id, [ds.Step("agent", agent)], durable_store)
    assert made == [0, 1, 2, 3]  # 3 ran; its save found the run cancelled
    cp = durable_store.load(run_id)
    assert (cp.status, [r["i"] for r in cp.calls]) == ("cancelled", [0, 1, 2])


@pytest.mark.parametrize("turn", range(6))
def test_a_cancellation_racing_the_owner_never_overwrites_its_saves(
    durable_store: ds.Store, run_id: str, turn: int
) -> None:
    """The owner runs quick steps while another thread cancels: either the run completed
    first (ConflictError) or it is cancelled with exactly the steps the owner saw saved;
    no step's save is ever lost under the cancellation."""

    ran: list[int] = []

    def step(i: int) -> ds.Step:
        return ds.Step(f"s{i}", lambda state: ran.append(i) or {f"s{i}": i})

    outcome: list[Any] = []

    def owner() -> None:
        try:
            outcome.append(ds.run(run_id, [step(i) for i in range(40)], durable_store))
        except ds.RunCancelledError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=owner)
    thread.start()

    # Cancel at a different point of the run in each turn (or after it, in the last).
    def reached() -> bool:
        cp = durable_store.load(run_id)
        return cp is not None and cp.step >= turn * 8 - 1

    wait_until(reached, "the run to reach the point")
    try:
        cancelled = ds.cancel_run(durable_store, run_id)
    except ds.ConflictError:
        cancelled = False
    thread.join(60)
    cp = durable_store.load(run_id)
    if cancelled:
        assert isinstance(outcome[0], ds.RunCancelledError)
        assert cp.status == "cancelled"
        assert dict(cp.state) == {f"s{i}": i for i in range(len(cp.steps))}
        assert len(cp.steps) >= len(ran) - 1  # all saved but the step the save refused
    else:
        assert outcome[0] == {f"s{i}": i for i in range(40)} and cp.status == "completed"
