"""A save whose outcome is unknown -- its answer lost, and the read-back failing too --
inside a run, on the real SDK against cosmos-local through the test proxy (``run`` and
``run_async``). The save did land, under this run's own owner id; the failure saved
next meets it. That version is the run's own: adopted, not taken for another worker's
(which said "another worker took over" and left the run leased to nobody for the whole
lease). The run raises the store's error, its lease is released, and what landed is
kept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import durable_steps as ds

from ...conftest import Cosmos, SyncFacade
from ...helpers.proxy import Proxy

DOWN = {"code": "InternalServerError", "message": "read-back refused by the test proxy"}


def run_on(store: Any, loop: asyncio.AbstractEventLoop, run_id: str, steps: list[ds.Step]) -> Any:
    if isinstance(store, SyncFacade):
        coro = ds.run_async(run_id, steps, store.aio, lease=30)
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)
    return ds.run(run_id, steps, store, lease=30)


def agent(store: Any, tool: Any) -> ds.Step:
    """A step that makes one durable call, for run() or run_async()."""
    if isinstance(store, SyncFacade):

        async def step(state: Any) -> dict[str, Any]:
            return {"reply": await ds.call_async("tool", tool)}

        return ds.Step("agent", step)
    return ds.Step("agent", lambda state: {"reply": ds.call("tool", tool)})


def lose_the_answer_and_the_read_back(proxy: Proxy, method: str) -> None:
    """The next ``method`` write lands, its answer is lost, and the read-back that
    follows fails (500): the save's outcome is unknown to the store."""
    proxy.drop_answer(method, "/docs/", then=lambda: proxy.answer("GET", 500, DOWN, "/docs/", 1))


def test_a_recorded_call_whose_outcome_is_unknown_is_the_runs_own_not_a_lost_lease(
    through: tuple[Any, Proxy, Cosmos], run_id: str, loop: asyncio.AbstractEventLoop
) -> None:
    """The save of a call's record lands unconfirmed: the step's attempt ends with the
    StoreError (outcome unknown); releasing the lease meets the run's own landed record
    and goes on top of it. The run raises that StoreError, not LeaseLostError; it stays
    running (a store error is no failure of the step: a later attempt goes on) with its
    lease released at once; the call is recorded and never runs again."""
    store, proxy, _ = through
    ran: list[str] = []

    def tool() -> str:
        ran.append("tool")
        if len(ran) == 1:
            lose_the_answer_and_the_read_back(proxy, "PUT")  # (the first record: the head replaced)
        return "answer"

    steps = [agent(store, tool)]
    with pytest.raises(ds.StoreError, match="outcome is unknown") as err:
        run_on(store, loop, run_id, steps)
    assert not isinstance(err.value, ds.ConflictError), err.value
    proxy.heal()
    failed = store.load(run_id)
    assert failed is not None
    assert (failed.status, failed.owner, failed.lease_expires) == ("running", None, None)
    assert [r["name"] for r in failed.calls] == ["tool"]
    assert run_on(store, loop, run_id, steps) == {"reply": "answer"}
    assert ran == ["tool"]  # the recorded call was replayed, not run again


def test_a_step_result_whose_outcome_is_unknown_is_kept_and_the_lease_released(
    through: tuple[Any, Proxy, Cosmos], run_id: str, loop: asyncio.AbstractEventLoop
) -> None:
    """The save of a step's result lands unconfirmed: the run raises the StoreError, and
    releasing the lease meets the run's own landed save. It releases that one (the step
    stays done) instead of failing: a re-run resumes at once with the next step."""
    store, proxy, _ = through
    ran: list[str] = []

    def first(state: Any) -> dict[str, int]:
        ran.append("first")
        lose_the_answer_and_the_read_back(proxy, "PUT")
        return {"first": 1}

    def second(state: Any) -> dict[str, int]:
        ran.append("second")
        return {"second": 2}

    steps = [ds.Step("first", first), ds.Step("second", second)]
    with pytest.raises(ds.StoreError, match="outcome is unknown") as err:
        run_on(store, loop, run_id, steps)
    assert not isinstance(err.value, ds.ConflictError), err.value
    proxy.heal()
    saved = store.load(run_id)
    assert saved is not None
    assert (saved.step, saved.owner, saved.lease_expires) == (0, None, None)
    assert run_on(store, loop, run_id, steps) == {"first": 1, "second": 2}
    assert ran == ["first", "second"]


@pytest.mark.parametrize("status", [500, 503])
def test_a_new_run_whose_create_is_unknown_is_not_left_leased(
    through: tuple[Any, Proxy, Cosmos],
    run_id: str,
    loop: asyncio.AbstractEventLoop,
    status: int,
) -> None:
    """The create of a new run's first checkpoint lands unconfirmed (its answer lost,
    the read-back answering 500 or 503): the run raises the StoreError, and the run it
    created is not left leased by the failed call -- a caller retrying ``run()`` of the
    same id (a web handler) runs it at once instead of meeting RunLeasedError for the
    whole lease; its step runs once."""
    store, proxy, _ = through
    ran: list[str] = []

    def step(state: Any) -> dict[str, int]:
        ran.append("step")
        return {"done": 1}

    steps = [ds.Step("step", step)]
    body = {"code": "ServiceUnavailable" if status == 503 else "InternalServerError"}
    proxy.drop_answer("POST", "/docs", then=lambda: proxy.answer("GET", status, body, "/docs/", 1))
    with pytest.raises(ds.StoreError, match="outcome is unknown") as err:
        run_on(store, loop, run_id, steps)
    assert not isinstance(err.value, ds.ConflictError), err.value
    proxy.heal()
    created = store.load(run_id)
    assert created is not None and (created.owner, created.lease_expires) == (None, None)
    assert run_on(store, loop, run_id, steps) == {"done": 1}
    assert ran == ["step"]
