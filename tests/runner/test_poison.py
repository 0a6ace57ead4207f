"""Poison runs, in process on the in-memory stores through run() and run_async(): a
run whose attempts keep ending without a result in the same step is failed, instead
of started again, once the step was started ``max_attempts`` times in a round. An
attempt here ends as a killed one leaves the run -- still ``running``, its attempt
counted, no result -- by an interrupt: KeyboardInterrupt under run, the step's task
cancelled under run_async. (tests/workers/test_failing_runs.py SIGKILLs real workers.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

import durable_steps as ds
from durable_steps import Retry, Step, Workflow

from .test_runner_edges import Async, Sync

T = TypeVar("T")


@pytest.fixture(params=["run", "run_async"])
def api(request: pytest.FixtureRequest) -> Sync:
    return Sync() if request.param == "run" else Async()


class Dying:
    """A step that counts its executions and dies in the first ``dies`` of them."""

    def __init__(self, api: Sync, dies: int = 10**6) -> None:
        self.api, self.dies, self.ran = api, dies, 0
        self.interrupt: type[BaseException] = (
            asyncio.CancelledError if api.is_async else KeyboardInterrupt
        )

    async def fn(self, state: Any) -> dict[str, Any]:
        self.ran += 1
        if self.ran <= self.dies:
            if self.api.is_async:
                asyncio.current_task().cancel()  # type: ignore[union-attr]
                await asyncio.sleep(0)
            raise KeyboardInterrupt
        return {"ran": self.ran}

    def survived(self, call: Callable[[], T]) -> T:
        """``call()``, whose step must not run: an interrupt here fails the test (and
        does not end the test session, as a KeyboardInterrupt would)."""
        try:
            return call()
        except (KeyboardInterrupt, asyncio.CancelledError) as exc:
            raise AssertionError("the step was started again") from exc

    def step(self, name: str, **kw: Any) -> Step:
        if self.api.is_async:
            return Step(name, self.fn, **kw)
        return Step(name, lambda state: asyncio.run(self.fn(state)), **kw)


def test_a_step_started_max_attempts_times_fails_the_run_instead(api: Sync, run_id: str) -> None:
    """Three attempts of step 1 end without a result (max_attempts=3): recover's claim
    does not start a 4th; it saves the run as failed with TooManyAttemptsError recorded
    (lease released) and reports it as failed; later passes leave the run alone. An
    explicit run then gives the step a new round of attempts."""
    dying = Dying(api)
    w = Workflow("w", [Step("a", lambda s: {"a": 1}), dying.step("dies")], max_attempts=3)
    for attempt in (1, 2, 3):
        with pytest.raises(dying.interrupt):
            api.start(w, run_id)
        cp = api.memory.load(run_id)
        assert (cp.status, cp.step, cp.attempt, cp.owner) == ("running", 0, attempt, None)
    (got,) = dying.survived(lambda: api.recover([w]))
    assert (got.run_id, got.outcome) == (run_id, "failed")
    error = got.error
    assert isinstance(error, ds.TooManyAttemptsError)
    assert (error.run_id, error.step, error.step_name, error.attempts) == (run_id, 1, "dies", 3)
    assert "started 3 times (attempts 1..3)" in str(error) and "max_attempts=3" in str(error)
    assert dying.ran == 3
    cp = api.memory.load(run_id)
    assert (cp.status, cp.step, cp.attempt, cp.owner, cp.lease_expires) == (
        "failed",
        0,
        3,
        None,
        None,
    )
    assert (cp.error["type"], cp.error["step"]) == ("durable_steps.TooManyAttemptsError", 1)
    assert dying.survived(lambda: api.recover([w])) == []
    with pytest.raises(dying.interrupt):
        api.start(w, run_id)
    cp = api.memory.load(run_id)
    assert (dying.ran, cp.status, cp.attempt, cp.first_attempt) == (4, "running", 4, 4)


def test_progress_starts_the_count_again(api: Sync, run_id: str) -> None:
    """The limit counts the attempts of one step: a run whose every step dies twice
    before it completes finishes under max_attempts=3."""
    steps = [Dying(api, dies=2), Dying(api, dies=2)]
    w = Workflow("w", [d.step(f"s{n}") for n, d in enumerate(steps)], max_attempts=3)
    for _ in range(4):
        with pytest.raises(steps[0].interrupt):
            api.start(w, run_id)
    assert api.start(w, run_id) == {"ran": 3}
    assert [d.ran for d in steps] == [3, 3]


def test_plain_run_takes_max_attempts_too_and_none_is_no_limit(api: Sync, run_id: str) -> None:
    """run(max_attempts=2) fails the run at the 3rd start with TooManyAttemptsError;
    max_attempts=None never does."""
    dying = Dying(api)
    for _ in range(2):
        with pytest.raises(dying.interrupt):
            api.run(run_id, [dying.step("s")], max_attempts=2)
    with pytest.raises(ds.TooManyAttemptsError, match="started 2 times"):
        dying.survived(lambda: api.run(run_id, [dying.step("s")], max_attempts=2))
    assert dying.ran == 2
    unlimited = f"{run_id}-unlimited"
    for _ in range(12):
        with pytest.raises(dying.interrupt):
            api.run(unlimited, [dying.step("s")], max_attempts=None)
    assert api.memory.load(unlimited).attempt == 12


def test_a_retry_with_more_attempts_raises_the_limit_for_its_step(api: Sync, run_id: str) -> None:
    """A step whose Retry allows 5 attempts is started 5 times under max_attempts=2."""
    dying = Dying(api)
    w = Workflow("w", [dying.step("s", retry=Retry(attempts=5, backoff=0))], max_attempts=2)
    for _ in range(5):
        with pytest.raises(dying.interrupt):
            api.start(w, run_id)
    with pytest.raises(ds.TooManyAttemptsError, match="started 5 times"):
        dying.survived(lambda: api.start(w, run_id))
    assert dying.ran == 5


def test_the_default_is_ten_and_bad_limits_are_refused() -> None:
    """Workflow's max_attempts is 10 unless given; it must be a whole number from 1
    (or None), checked when the workflow is made."""
    assert Workflow("w", [Step("s", lambda s: None)]).max_attempts == 10
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="max_attempts"):
            Workflow("w", [Step("s", lambda s: None)], max_attempts=bad)  # type: ignore[arg-type]
