"""Retries on every backend, through run() and run_async(): attempts counted with
backoff, then failed; success after retries; only the errors in on=; a failed run run
again; interrupts never retried."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Retry, Workflow

from ..conftest import Api
from ..helpers.steps import Effects


def test_retries_count_attempts_back_off_and_then_fail(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """A step raising an error in on= is retried with growing, jittered pauses; when the
    attempts are used up the run is failed with the error recorded and the error raised."""
    fx = Effects()

    def flaky(state: Any) -> None:
        raise TimeoutError("429 from the model")

    retry = Retry(attempts=4, backoff=1.0, max_backoff=3.0)
    with pytest.raises(TimeoutError, match="429"):
        api.run(run_id, [fx.step("flaky", flaky, retry=retry)])
    assert fx.log == ["flaky:1", "flaky:2", "flaky:3", "flaky:4"]
    assert len(pauses) == 3
    for n, pause in enumerate(pauses, start=1):
        cap = min(3.0, 2 ** (n - 1))
        assert cap / 2 <= pause <= cap
    cp = api.store.load(run_id)
    assert (cp.status, cp.owner, cp.attempt) == ("failed", None, 4)
    assert (cp.error["type"], cp.error["message"], cp.error["step"]) == (
        "TimeoutError",
        "429 from the model",
        0,
    )


def test_a_retried_step_that_then_succeeds_completes(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """Two failures, then success: the run completes, the error is cleared."""
    fx = Effects()
    outcomes = iter([ConnectionError("reset"), ConnectionError("reset"), None])

    def flaky(state: Any) -> dict[str, int]:
        if (exc := next(outcomes)) is not None:
            raise exc
        return {"ok": ds.current_step().attempt}

    assert api.run(run_id, [fx.step("f", flaky, retry=Retry(attempts=3))]) == {"ok": 3}
    cp = api.store.load(run_id)
    assert (cp.status, cp.error, len(pauses)) == ("completed", None, 2)


def test_only_the_errors_in_on_are_retried(api: Api, run_id: str, pauses: list[float]) -> None:
    """An exception outside on= fails the run at once, without a retry."""
    fx = Effects()

    def bug(state: Any) -> None:
        raise KeyError("a bug, not a blip")

    with pytest.raises(KeyError):
        api.run(run_id, [fx.step("f", bug, retry=Retry(attempts=5, on=(TimeoutError,)))])
    assert (fx.log, pauses) == (["f:1"], [])
    assert api.store.load(run_id).status == "failed"


def test_an_explicit_run_of_a_failed_run_starts_its_attempts_afresh(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """After the attempts are used up, running the failed run again gives the step a new
    round of attempts (attempt numbers keep counting), and recover() leaves it alone."""
    fx = Effects()

    def down(state: Any) -> None:
        raise TimeoutError("down")

    w = Workflow(f"retry-{run_id}", [fx.step("f", down, retry=Retry(attempts=2))])
    with pytest.raises(TimeoutError):
        api.start(w, run_id)
    assert api.recover([w]) == []
    with pytest.raises(TimeoutError):
        api.start(w, run_id)
    assert fx.log == ["f:1", "f:2", "f:3", "f:4"]


def test_interrupts_are_never_retried(api: Api, run_id: str, pauses: list[float]) -> None:
    """KeyboardInterrupt and SystemExit (CancelledError under run_async) are not retried
    even with on=(BaseException,); the lease is released and the run stays running, to
    resume there."""
    # An event loop lets KeyboardInterrupt and SystemExit escape run_forever (they would
    # stop the test's loop), so under run_async the interrupt is a cancellation.
    kinds = [asyncio.CancelledError] if api.is_async else [KeyboardInterrupt, SystemExit]
    for n, interrupt in enumerate(kinds):
        fx = Effects()

        def interrupted(state: Any, interrupt: type[BaseException] = interrupt) -> None:
            raise interrupt

        step = fx.step("f", interrupted, retry=Retry(attempts=5, on=(BaseException,)))
        # (a cancelled coroutine reaches this thread as concurrent.futures.CancelledError)
        with pytest.raises((interrupt, concurrent.futures.CancelledError)):
            api.run(f"{run_id}-{n}", [step])
        assert (fx.log, pauses) == (["f:1"], [])
        cp = api.store.load(f"{run_id}-{n}")
        assert (cp.status, cp.owner) == ("running", None)
