"""Durable timers (``sleep``, ``sleep_until``) and signal deadlines
(``wait_for_signal(timeout=..., default=...)``), on every backend and its async twin,
with a fake wall clock: no test waits for real time to pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api, Clock


def test_a_sleep_holds_no_worker_and_resumes_after_its_wake_time(
    api: Api, run_id: str, clock: Clock
) -> None:
    """sleep() records its wake time and suspends the run (waiting, no lease, RunWaiting
    with .wake_at); before that time a run raises RunWaiting again and runs nothing; after
    it, the step runs again, its calls replay, and the sleep returns at once."""
    ran: list[str] = []

    async def remind(state: Any) -> dict[str, Any]:
        sent = await ds.call_async("ask", lambda: ran.append("ask") or "asked")
        ds.sleep(24 * 3600)
        ran.append("after")
        return {"sent": sent}

    start = clock.now
    with pytest.raises(ds.RunWaiting) as waiting:
        api.run(run_id, [api.step("remind", remind)])
    assert (waiting.value.signal, waiting.value.wake_at) == (None, start + 24 * 3600)
    cp = api.store.load(run_id)
    assert (cp.status, cp.wake_at, cp.owner, cp.waiting_for) == (
        "waiting",
        start + 24 * 3600,
        None,
        None,
    )
    clock.advance(3600)
    with pytest.raises(ds.RunWaiting, match="asleep until"):
        api.run(run_id, [api.step("remind", remind)])
    clock.advance(23 * 3600)
    assert api.run(run_id, [api.step("remind", remind)]) == {"sent": "asked"}
    assert ran == ["ask", "after"]
    assert api.store.load(run_id).wake_at is None


def test_several_sleeps_in_a_step_are_numbered_like_calls(
    api: Api, run_id: str, clock: Clock
) -> None:
    """Two sleeps between calls: each suspends once, and is passed at once after."""
    ran: list[str] = []

    async def step(state: Any) -> dict[str, Any]:
        for n in range(3):
            await ds.call_async(f"work{n}", lambda n=n: ran.append(f"work{n}"))
            if n < 2:
                ds.sleep(60)
        return {}

    for _ in range(2):
        with pytest.raises(ds.RunWaiting):
            api.run(run_id, [api.step("step", step)])
        clock.advance(61)
    assert api.run(run_id, [api.step("step", step)]) == {}
    assert ran == ["work0", "work1", "work2"]
    assert api.store.load(run_id).status == "completed"


def test_sleep_until_takes_an_aware_datetime_or_epoch_seconds(
    api: Api, run_id: str, clock: Clock
) -> None:
    """sleep_until(datetime) with a timezone waits until that moment; a naive datetime is
    refused (ValueError, the step fails); a time already past returns at once."""
    when = datetime.fromtimestamp(clock.now, UTC) + timedelta(hours=2)

    async def step(state: Any) -> dict[str, Any]:
        ds.sleep_until(when)
        ds.sleep_until(clock.now - 5)  # past already: no pause
        return {"woke": True}

    with pytest.raises(ds.RunWaiting) as waiting:
        api.run(run_id, [api.step("step", step)])
    assert waiting.value.wake_at == when.timestamp()
    clock.advance(7201)  # (a datetime keeps microseconds: it may round up)
    assert api.run(run_id, [api.step("step", step)]) == {"woke": True}

    async def naive(state: Any) -> None:
        ds.sleep_until(datetime(2030, 1, 1))

    with pytest.raises(ValueError, match="no timezone"):
        api.run(f"{run_id}-naive", [api.step("step", naive)])


def test_lengths_may_be_timedeltas_and_wake_times_datetimes(
    api: Api, run_id: str, clock: Clock
) -> None:
    """sleep(timedelta) and wait_for_signal(timeout=timedelta) take a timedelta as they
    take seconds; RunWaiting.wake_time is the wake time (or deadline) as a timezone-aware
    UTC datetime, the same moment as the float wake_at, and None without one."""

    async def step(state: Any) -> dict[str, Any]:
        ds.sleep(timedelta(hours=1, seconds=30))
        return {"answer": ds.wait_for_signal("ok", timeout=timedelta(days=1), default="no")}

    start = clock.now
    with pytest.raises(ds.RunWaiting) as asleep:
        api.run(run_id, [api.step("s", step)])
    assert asleep.value.wake_at == start + 3630
    assert asleep.value.wake_time == datetime.fromtimestamp(start + 3630, UTC)
    assert asleep.value.wake_time.tzinfo is UTC
    clock.advance(3630)
    with pytest.raises(ds.RunWaiting) as waiting:
        api.run(run_id, [api.step("s", step)])
    assert waiting.value.wake_at == start + 3630 + 86400
    assert waiting.value.wake_time == datetime.fromtimestamp(start + 3630 + 86400, UTC)
    clock.advance(86400)
    assert api.run(run_id, [api.step("s", step)]) == {"answer": "no"}
    assert ds.RunWaiting("m", run_id=run_id, signal="x", wake_at=None).wake_time is None


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "60", timedelta(seconds=-1)])
def test_a_sleep_of_no_sensible_length_is_refused(api: Api, run_id: str, bad: Any) -> None:
    """A negative, infinite or non-number length is refused in the step, nothing saved
    as waiting."""

    async def step(state: Any) -> None:
        ds.sleep(bad)

    with pytest.raises((ValueError, TypeError), match="seconds"):
        api.run(run_id, [api.step("step", step)])
    assert api.store.load(run_id).status == "failed"


def test_a_signal_deadline_passes_to_the_default(api: Api, run_id: str, clock: Clock) -> None:
    """wait_for_signal(timeout=, default=): the deadline is recorded at the first
    suspension; resumed after it without the signal, the wait returns the default."""

    async def approve(state: Any) -> dict[str, Any]:
        return {"decision": ds.wait_for_signal("approval", timeout=3600, default="rejected")}

    start = clock.now
    with pytest.raises(ds.RunWaiting) as waiting:
        api.run(run_id, [api.step("approve", approve)])
    assert (waiting.value.signal, waiting.value.wake_at) == ("approval", start + 3600)
    clock.advance(1800)
    with pytest.raises(ds.RunWaiting, match="deadline"):
        api.run(run_id, [api.step("approve", approve)])
    clock.advance(1800)
    assert api.run(run_id, [api.step("approve", approve)]) == {"decision": "rejected"}


def test_a_missed_deadline_without_default_raises_in_the_step(
    api: Api, run_id: str, clock: Clock
) -> None:
    """Without a default, SignalTimeoutError is raised in the step: it can catch it, or
    the run fails with it recorded."""

    async def approve(state: Any) -> dict[str, Any]:
        try:
            return {"decision": ds.wait_for_signal("approval", timeout=60)}
        except ds.SignalTimeoutError as exc:
            return {"decision": None, "why": exc.signal}

    with pytest.raises(ds.RunWaiting):
        api.run(run_id, [api.step("approve", approve)])
    clock.advance(61)
    assert api.run(run_id, [api.step("approve", approve)]) == {"decision": None, "why": "approval"}

    async def strict(state: Any) -> None:
        ds.wait_for_signal("approval", timeout=60)

    other = f"{run_id}-strict"
    with pytest.raises(ds.RunWaiting):
        api.run(other, [api.step("approve", strict)])
    clock.advance(61)
    with pytest.raises(ds.SignalTimeoutError, match="did not come before its deadline"):
        api.run(other, [api.step("approve", strict)])
    assert api.store.load(other).status == "failed"


def test_a_late_signal_that_is_there_when_the_run_resumes_wins(
    api: Api, run_id: str, clock: Clock
) -> None:
    """A signal delivered after the deadline but before the run resumed is returned."""

    async def approve(state: Any) -> dict[str, Any]:
        return {"decision": ds.wait_for_signal("approval", timeout=60, default="rejected")}

    with pytest.raises(ds.RunWaiting):
        api.run(run_id, [api.step("approve", approve)])
    clock.advance(120)
    api.signal(run_id, "approval", "approved late")
    assert api.run(run_id, [api.step("approve", approve)]) == {"decision": "approved late"}


def test_due_runs_are_found_by_the_listing_not_by_reading_states(
    api: Api, run_id: str, clock: Clock
) -> None:
    """list_runs(status="waiting", due_before=t) gives the waiting runs whose wake time or
    deadline is at or before t, and only those; recover resumes exactly them."""
    w = ds.Workflow("naps", [api.step("nap", _nap)])
    for n, seconds in enumerate((10, 100, 1000)):
        with pytest.raises(ds.RunWaiting):
            api.start(w, f"{run_id}-{n}", input={"seconds": seconds})
    due = {i.run_id for i in api.store.list_runs(status="waiting", due_before=clock.now + 100)}
    assert due == {f"{run_id}-0", f"{run_id}-1"}
    clock.advance(100)
    done = api.recover([w])
    assert sorted((r.run_id, r.outcome) for r in done) == [
        (f"{run_id}-0", "completed"),
        (f"{run_id}-1", "completed"),
    ]
    assert api.store.load(f"{run_id}-2").status == "waiting"


async def _nap(state: Any) -> dict[str, Any]:
    ds.sleep(state["seconds"])
    return {"rested": True}
