"""Saves that fail: a failure no retry can cure fails the run once, and an error
recording a call is not swallowed by a step that catches ``Exception``.

A step's result over the size limit, not JSON, or refused at its save with a step-name
mismatch would be refused again on every attempt: the run is saved as ``failed`` with
the error recorded, the step ran once, and ``recover`` leaves it alone. A store error,
a lost lease or a cancellation while a call is recorded reaches the step as a
``BaseException`` (``except Exception`` does not catch it); ``run`` raises the error
itself, with its type, and nothing the step did after it is kept. On file, memory and
cosmos-local stores with a small state limit (DURABLE_MAX_STATE_BYTES), sync and async.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Retry, Step, Workflow

from ..conftest import Api, Backend, SyncFacade, store_env
from ..helpers.around import Around, AroundAsync

LIMIT = 100_000


@pytest.fixture(
    params=[(kind, aio) for aio in (False, True) for kind in ("file", "memory", "cosmos-local")],
    ids=lambda p: f"{p[0]}{'-async' if p[1] else ''}",
)
def small(
    request: pytest.FixtureRequest, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> Iterator[Api]:
    """The public calls on a store whose state limit is LIMIT bytes."""
    kind, aio = request.param
    env = {**store_env(request, tmp_path, kind), "DURABLE_MAX_STATE_BYTES": str(LIMIT)}
    store: Any = ds.async_store_from_env(env) if aio else ds.store_from_env(env)
    facade = SyncFacade(store, loop) if aio else store
    yield Api(Backend(f"{kind}{'-async' if aio else ''}", facade, lambda r, d: None), loop)
    facade.close()


def counted(api: Api, name: str, body: Callable[[Any], Any], **kw: Any) -> tuple[Step, list[int]]:
    """A step that counts its executions (its side effect) before ``body``."""
    ran: list[int] = []

    async def fn(state: Any) -> Any:
        ran.append(1)
        return body(state)

    return api.step(name, fn, **kw), ran


def test_a_result_over_the_limit_fails_the_run_once(small: Api, run_id: str) -> None:
    """A step whose result puts the state over the limit: StateTooLargeError, the run
    failed with it recorded and its lease released, the step run once; recover leaves
    the run alone; an explicit run starts the step again (the operator's decision)."""
    step, ran = counted(small, "big", lambda s: {"blob": "x" * (2 * LIMIT)})
    w = Workflow("big", [small.step("a", _a), step])
    with pytest.raises(ds.StateTooLargeError):
        small.start(w, run_id)
    cp = small.store.load(run_id)
    assert (cp.status, cp.step, cp.owner, cp.lease_expires) == ("failed", 0, None, None)
    assert (cp.error["type"], cp.error["step"]) == ("durable_steps.StateTooLargeError", 1)
    assert "blob" not in cp.state and len(ran) == 1
    assert small.recover([w]) == []
    assert len(ran) == 1
    with pytest.raises(ds.StateTooLargeError):
        small.start(w, run_id)
    assert len(ran) == 2 and small.store.load(run_id).status == "failed"


async def _a(state: Any) -> dict[str, Any]:
    return {"a": 1}


@pytest.mark.parametrize(
    "result", [{"when": object()}, ["not", "a", "mapping"]], ids=["not-json", "not-a-mapping"]
)
def test_a_result_that_cannot_be_kept_is_not_retried(small: Api, run_id: str, result: Any) -> None:
    """A result that is not a JSON mapping fails the run at once, even under a Retry
    that would retry any Exception: InvalidStateError (also a TypeError), recorded."""
    step, ran = counted(small, "s", lambda s: result, retry=Retry(attempts=3, backoff=0))
    with pytest.raises(ds.InvalidStateError):
        small.run(run_id, [step])
    cp = small.store.load(run_id)
    assert (cp.status, cp.error["type"], len(ran)) == (
        "failed",
        "durable_steps.InvalidStateError",
        1,
    )


def test_a_call_record_over_the_limit_is_not_swallowed(small: Api, run_id: str) -> None:
    """A call whose result is over the limit, in a loop that catches Exception around
    its calls: the step does not go on to its next call; the run fails once with
    StateTooLargeError recorded, and no call of that loop is recorded."""
    after: list[str] = []

    async def agent(state: Any) -> dict[str, Any]:
        for n in range(3):
            try:
                await ds.call_async(f"tool{n}", lambda: "y" * (2 * LIMIT))
            except Exception as exc:  # an agent loop handing errors to the model
                after.append(type(exc).__name__)
        return {"done": True}

    with pytest.raises(ds.StateTooLargeError):
        small.run(run_id, [small.step("agent", agent)])
    cp = small.store.load(run_id)
    assert (cp.status, cp.error["type"], cp.calls) == (
        "failed",
        "durable_steps.StateTooLargeError",
        (),
    )
    assert after == []


# -- a store that fails one save -----------------------------------------------------------


class FailingSave(Around):
    """Around a store: the first save that ``when`` picks raises ``error`` and writes
    nothing, as a store that is unreachable for a moment (the others pass)."""

    def __init__(self, store: Any, when: Callable[[ds.Checkpoint], bool], error: Exception):
        super().__init__(store)
        self.when, self.error = when, error
        self.failed = 0

    def refuse(self, cp: ds.Checkpoint) -> bool:
        if self.failed or not self.when(cp):
            return False
        self.failed += 1
        return True

    def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        if self.refuse(checkpoint):
            raise self.error
        return self.inner.save(checkpoint)


class FailingSaveAsync(AroundAsync):
    def __init__(self, store: Any, when: Callable[[ds.Checkpoint], bool], error: Exception):
        super().__init__(store)
        self.when, self.error = when, error
        self.failed = 0

    refuse = FailingSave.refuse

    async def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        if self.refuse(checkpoint):  # type: ignore[arg-type]
            raise self.error
        return await self.inner.save(checkpoint)


def failing(api: Api, when: Callable[[ds.Checkpoint], bool], error: Exception) -> Api:
    """``api`` over its store wrapped in FailingSave."""
    if api.is_async:
        inner: Any = FailingSaveAsync(api.store.aio, when, error)
        wrapped: Any = SyncFacade(inner, api.loop)
    else:
        wrapped = FailingSave(api.store, when, error)
    return Api(Backend(api.backend.name, wrapped, api.backend.write_raw), api.loop)


def recording(cp: ds.Checkpoint) -> bool:
    """The save of a call's record."""
    return any("result" in r for r in cp.calls)


DOWN = ds.StoreError("the store answered 503", status_code=503)


@pytest.mark.parametrize("catches", ["Exception", "BaseException"])
def test_a_store_error_recording_a_call_ends_the_run_with_it(
    small: Api, run_id: str, catches: str
) -> None:
    """A step catching Exception -- or even BaseException, and returning normally --
    around a call whose record cannot be saved: run raises the store's StoreError;
    the step's result is not saved, no call is recorded, no later call is made, and
    the run stays running with its lease released, for a later attempt."""
    api = failing(small, recording, DOWN)
    made: list[str] = []
    caught = Exception if catches == "Exception" else BaseException

    seen: list[str] = []

    async def agent(state: Any) -> dict[str, Any]:
        for n in range(3):
            try:
                await ds.call_async(f"tool{n}", lambda n=n: made.append(f"tool{n}"))
            except caught as exc:  # an agent loop handing errors to the model
                seen.append(type(exc).__name__)
        return {"done": True}

    with pytest.raises(ds.StoreError) as raised:
        api.run(run_id, [api.step("agent", agent)])
    assert raised.value is DOWN
    assert made == ["tool0"]
    # (a step that catches BaseException sees the StepInterrupted at each later call)
    assert seen == ([] if caught is Exception else ["StepInterrupted"] * 3)
    cp = small.store.load(run_id)
    assert (cp.status, cp.step, cp.calls, cp.owner, cp.error) == ("running", -1, (), None, None)
    assert small.run(run_id, [small.step("agent", agent)]) == {"done": True}
    assert made == ["tool0", "tool0", "tool1", "tool2"]


@pytest.mark.parametrize("together", ["gather", "TaskGroup"])
def test_a_store_error_recording_a_gathered_call_ends_the_run_with_it(
    small: Api, run_id: str, together: str
) -> None:
    """Calls made together (asyncio.gather, a TaskGroup), one of whose records cannot be
    saved, in a step that catches Exception around them: run raises the StoreError."""
    api = failing(small, recording, DOWN)

    async def agent(state: Any) -> dict[str, Any]:
        calls = [ds.call_async(f"tool{n}", lambda n=n: n) for n in range(3)]
        try:
            if together == "gather":
                await asyncio.gather(*calls)
            else:
                async with asyncio.TaskGroup() as tg:
                    for c in calls:
                        tg.create_task(c)
        except Exception as exc:  # what an agent loop may do
            return {"caught": repr(exc)}
        return {"done": True}

    with pytest.raises(ds.StoreError) as raised:
        api.run(run_id, [api.step("agent", agent)])
    assert raised.value is DOWN
    cp = small.store.load(run_id)
    assert (cp.status, cp.step, cp.owner) == ("running", -1, None)


def test_a_cancellation_noticed_while_recording_is_not_swallowed(small: Api, run_id: str) -> None:
    """The run is cancelled while a call runs, in a loop that catches Exception around
    its calls: the call's record finds the run cancelled; run raises RunCancelledError
    and no later call is made."""
    made: list[str] = []

    async def tool(n: int) -> str:
        made.append(f"tool{n}")
        if n == 0 and small.is_async:  # (on the loop the step runs on)
            assert await ds.cancel_run_async(small.store.aio, run_id, reason="stop")
        elif n == 0:
            assert ds.cancel_run(small.store, run_id, reason="stop")
        return "ok"

    async def agent(state: Any) -> dict[str, Any]:
        for n in range(3):
            try:
                await ds.call_async(f"tool{n}", tool, n)
            except Exception as exc:  # what an agent loop may do
                return {"caught": repr(exc)}
        return {"done": True}

    with pytest.raises(ds.RunCancelledError, match="stop"):
        small.run(run_id, [small.step("agent", agent)])
    assert made == ["tool0"]
    cp = small.store.load(run_id)
    assert (cp.status, cp.calls) == ("cancelled", ())


@pytest.mark.parametrize(
    "error",
    [
        ds.StepMismatchError("the store found 0 completed step names, not 1", run_id="r"),
        ds.InvalidStateError("the store found a value that is not JSON", run_id="r"),
    ],
    ids=["step-mismatch", "invalid-state"],
)
def test_a_result_refused_by_the_store_for_good_fails_the_run_once(
    small: Api, run_id: str, error: Exception
) -> None:
    """A store that refuses the step's result with an error no retry can cure (a
    step-name mismatch, a state that is not JSON, found at save): the run is failed with
    it recorded, the step ran once, and recover leaves it alone."""
    api = failing(small, lambda cp: cp.step == 0, error)
    step, ran = counted(api, "s", lambda s: {"x": 1}, retry=Retry(attempts=3, backoff=0))
    w = Workflow("refused", [step])
    with pytest.raises(type(error)):
        api.start(w, run_id)
    cp = small.store.load(run_id)
    assert (cp.status, cp.step, cp.error["type"], cp.owner) == (
        "failed",
        -1,
        f"durable_steps.{type(error).__name__}",
        None,
    )
    assert api.recover([w]) == [] and len(ran) == 1
