"""The runner's rarer paths, on the in-memory stores through run() and run_async(): a
false conflict on the claim, a run taken between recover's listing and its claim, a
nested run's LeaseLostError, a worker stopping at a step boundary, and Retry's
arithmetic and checks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Retry, Step, Workflow
from durable_steps.runner import run as run_module
from durable_steps.runner.drivers import drive, drive_async
from durable_steps.seam.rules import RunFilter

from ..helpers.around import Around, AroundAsync


class Sync:
    """The sync API over a MemoryStore, and a way to wrap its store."""

    is_async = False

    def __init__(self) -> None:
        self.memory = ds.MemoryStore()
        self.store: Any = self.memory

    def run(self, run_id: str, steps: list[Step], **kw: Any) -> dict[str, Any]:
        return ds.run(run_id, steps, self.store, **kw)

    def start(self, w: Workflow, run_id: str, **kw: Any) -> dict[str, Any]:
        return w.run(run_id, self.store, **kw)

    def recover(self, workflows: list[Workflow]) -> list[ds.Recovered]:
        return ds.recover(self.store, workflows)

    def drive(self, r: Any) -> dict[str, Any]:
        return drive(r, self.store)


class Async(Sync):
    """The same calls through run_async over an AsyncMemoryStore."""

    is_async = True

    def __init__(self) -> None:
        self.aio = ds.AsyncMemoryStore()
        self.memory = self.aio.sync
        self.store = self.aio

    def run(self, run_id: str, steps: list[Step], **kw: Any) -> dict[str, Any]:
        return asyncio.run(ds.run_async(run_id, steps, self.store, **kw))

    def start(self, w: Workflow, run_id: str, **kw: Any) -> dict[str, Any]:
        return asyncio.run(w.run_async(run_id, self.store, **kw))

    def recover(self, workflows: list[Workflow]) -> list[ds.Recovered]:
        return asyncio.run(ds.recover_async(self.store, workflows))

    def drive(self, r: Any) -> dict[str, Any]:
        return asyncio.run(drive_async(r, self.store))


@pytest.fixture(params=["run", "run_async"])
def api(request: pytest.FixtureRequest) -> Sync:
    return Sync() if request.param == "run" else Async()


class FalseConflicts(Around):
    """Around a store: the first ``n`` saves raise ConflictError and write nothing, as a
    replica that has not seen the latest write yet answers a fresh client."""

    def __init__(self, store: Any, n: int) -> None:
        super().__init__(store)
        self.n = n

    def refuse(self, cp: ds.Checkpoint) -> bool:
        self.n -= 1
        return self.n >= 0

    def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        if self.refuse(checkpoint):
            raise ds.ConflictError("a stale replica answered", run_id=checkpoint.run_id)
        return self.inner.save(checkpoint)


class FalseConflictsAsync(AroundAsync):
    def __init__(self, store: Any, n: int) -> None:
        super().__init__(store)
        self.n = n

    refuse = FalseConflicts.refuse

    async def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        if self.refuse(checkpoint):  # type: ignore[arg-type]
            raise ds.ConflictError("a stale replica answered", run_id=checkpoint.run_id)
        return await self.inner.save(checkpoint)


def test_a_false_conflict_on_the_claim_is_retried_after_a_reload(
    api: Sync, run_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A claim refused although nobody else holds the run is tried again after a fresh
    load (three tries in all, each logged as a WARNING): the run then runs normally."""
    api.store = (FalseConflictsAsync if api.is_async else FalseConflicts)(api.store, 2)
    assert api.run(run_id, [Step("a", lambda s: {"a": 1})]) == {"a": 1}
    assert api.memory.load(run_id).status == "completed"
    warnings = [r for r in caplog.records if "while we claimed it" in r.getMessage()]
    assert [r.levelno for r in warnings] == [logging.WARNING] * 2


def test_a_claim_that_keeps_meeting_a_writer_fails_and_writes_nothing(
    api: Sync, run_id: str
) -> None:
    """When every try of the claim conflicts (``run._CLAIMS`` of them), the ConflictError
    stands and nothing was written or run."""
    ran: list[str] = []
    tries = run_module._CLAIMS
    api.store = (FalseConflictsAsync if api.is_async else FalseConflicts)(api.store, tries)
    with pytest.raises(ds.ConflictError) as err:
        api.run(run_id, [Step("a", lambda s: ran.append("a"))])
    assert not isinstance(err.value, ds.LeaseLostError)
    assert (ran, api.memory.load(run_id)) == ([], None)


class TakenAfterListing(Around):
    """Around a store: every run it lists is claimed by another live worker right after
    it was listed, before recover can claim it."""

    def __init__(self, store: Any, memory: ds.MemoryStore) -> None:
        super().__init__(store)
        self.memory = memory

    def take(self, info: ds.RunInfo) -> None:
        cp = self.memory.load(info.run_id)
        assert cp is not None
        self.memory.save(replace(cp, owner="other", lease_expires=time.time() + 600))

    def listing(self, filters: RunFilter) -> Iterator[ds.RunInfo]:
        for info in self.inner.listing(filters):
            self.take(info)
            yield info


class TakenAfterListingAsync(AroundAsync):
    def __init__(self, store: Any, memory: ds.MemoryStore) -> None:
        super().__init__(store)
        self.memory = memory

    take = TakenAfterListing.take

    async def listing(self, filters: RunFilter) -> AsyncIterator[ds.RunInfo]:  # type: ignore[override]
        async for info in self.inner.listing(filters):
            self.take(info)  # type: ignore[arg-type]
            yield info


def test_recover_reports_a_run_another_worker_took_first(api: Sync, run_id: str) -> None:
    """A run listed as free but claimed by another worker before recover claims it is
    reported as outcome "leased", with the RunLeasedError; nothing of it ran here."""
    ran: list[str] = []
    w = Workflow("w", [Step("a", lambda s: ran.append("a"))])
    api.memory.save(ds.Checkpoint(run_id, -1, {}, workflow="w"))
    api.store = (TakenAfterListingAsync if api.is_async else TakenAfterListing)(
        api.store, api.memory
    )
    (got,) = api.recover([w])
    assert (got.run_id, got.workflow, got.outcome) == (run_id, "w", "leased")
    assert isinstance(got.error, ds.RunLeasedError) and got.error.owner == "other"
    assert ran == []


def test_a_nested_runs_lost_lease_is_the_steps_own_failure(api: Sync, run_id: str) -> None:
    """A LeaseLostError about another run (a run started inside a step) is that step's
    error like any other: the run is failed with it recorded and its lease released."""

    def nested(state: Any) -> None:
        raise ds.LeaseLostError("the inner run lost its lease", run_id=f"{run_id}-inner")

    with pytest.raises(ds.LeaseLostError):
        api.run(run_id, [Step("outer", nested)])
    cp = api.memory.load(run_id)
    assert (cp.status, cp.owner, cp.error["type"]) == (
        "failed",
        None,
        "durable_steps.LeaseLostError",
    )


def test_a_stop_at_a_step_boundary_releases_without_counting_an_attempt(
    api: Sync, run_id: str
) -> None:
    """A stopping worker (recover's stop=) releases the run before its next step; the
    step never started, so the run resumes it as attempt 1, not 2."""
    seen: list[tuple[str, int]] = []
    stopping = [False]

    def step(name: str) -> Step:
        def fn(state: Any) -> None:
            seen.append((name, ds.current_step().attempt))
            stopping[0] = True  # the worker is told to stop while this step runs

        return Step(name, fn)

    w = Workflow("w", [step("a"), step("b")])
    with pytest.raises(Exception, match="the worker is stopping") as err:
        api.drive(w.program(run_id, None, 60.0, None, lambda: stopping[0]))
    assert type(err.value).__name__ == "StopRequested"
    cp = api.memory.load(run_id)
    assert (cp.step, cp.status, cp.owner) == (0, "running", None)
    api.run(run_id, list(w.steps))
    assert seen == [("a", 1), ("b", 1)]


@pytest.mark.parametrize("retry", [None, Retry(attempts=2, backoff=0)], ids=["once", "retried"])
def test_a_step_error_whose_message_is_not_unicode_fails_the_run_as_usual(
    api: Sync, run_id: str, retry: Retry | None
) -> None:
    """A step failing with a message that holds a lone surrogate (a file name decoded with
    surrogateescape, say) fails like any other: its own exception propagates, and the run
    is recorded as failed with that error."""

    def bad(state: Any) -> None:
        raise ValueError("cannot open caf\udce9.txt")

    with pytest.raises(ValueError, match="cannot open"):
        api.run(run_id, [Step("a", bad, retry=retry)])
    cp = api.memory.load(run_id)
    assert (cp.status, cp.owner, cp.error["type"]) == ("failed", None, "ValueError")


@pytest.mark.parametrize("bad", [[], [("a", 1)], "x", 0])
def test_a_workflow_input_must_be_a_json_object(api: Sync, run_id: str, bad: Any) -> None:
    """input= that is not a JSON object (an empty list included) is refused before
    anything runs or is written."""
    w = Workflow("w", [Step("a", lambda s: None)])
    with pytest.raises(ds.InvalidStateError, match="must be a dict"):
        api.start(w, run_id, input=bad)
    assert api.memory.load(run_id) is None


# -- Retry ------------------------------------------------------------------------------


def test_retry_defaults() -> None:
    """Retry() is three attempts, a 1 s backoff capped at 60 s, on any Exception."""
    assert Retry() == Retry(attempts=3, backoff=1.0, max_backoff=60.0, on=(Exception,))


def test_backoff_doubles_within_its_cap_with_jitter() -> None:
    """The pause after attempt n is backoff * 2**(n-1), capped at max_backoff, times a
    random factor in [0.5, 1]: never above the cap, and not the same every time."""
    r = Retry(attempts=10, backoff=1.0, max_backoff=5.0)
    for n, cap in [(1, 1), (2, 2), (3, 4), (4, 5), (9, 5)]:
        pauses = {r.delay(n) for _ in range(200)}
        assert all(cap / 2 <= p <= cap for p in pauses), (n, min(pauses), max(pauses))
        assert len(pauses) > 1  # jitter: workers failing together do not retry together


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"attempts": 0}, ValueError),
        ({"attempts": True}, TypeError),
        ({"attempts": 2.5}, TypeError),
        ({"backoff": -1}, ValueError),
        ({"backoff": 10, "max_backoff": 5}, ValueError),
        ({"max_backoff": float("inf")}, ValueError),
        ({"backoff": "1"}, TypeError),
        ({"on": ()}, TypeError),
        ({"on": (ValueError, "nope")}, TypeError),
    ],
)
def test_a_bad_retry_is_refused_when_made(kwargs: dict[str, Any], error: type[Exception]) -> None:
    """Retry's arguments are checked when it is made, not when a step first fails."""
    with pytest.raises(error, match="Retry"):
        Retry(**kwargs)


def test_retry_on_takes_one_class_or_a_list() -> None:
    """on= may be one exception class or a list of them; it is kept as a tuple."""
    assert Retry(on=TimeoutError).on == (TimeoutError,)
    assert Retry(on=[TimeoutError, ConnectionError]).on == (TimeoutError, ConnectionError)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit, asyncio.CancelledError])
def test_interrupts_are_never_retried_whatever_on_says(interrupt: type[BaseException]) -> None:
    """KeyboardInterrupt, SystemExit and CancelledError are not retried, even when on=
    names them."""
    assert not Retry(attempts=5, on=(BaseException,)).retries(interrupt(), 1)
    assert Retry(attempts=5, on=(BaseException,)).retries(ValueError(), 1)
