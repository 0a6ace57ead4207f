"""Schedules on every backend, sync and async: which ticks a look starts, each once,
by a clock the test gives; missed ticks caught up once or skipped; bad schedules
refused. The fleet of racing worker processes is ``test_schedule_fleet``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api

T0 = datetime(2026, 12, 4, 18, 0, tzinfo=UTC).timestamp()  # a whole minute


def noop(state: Any) -> None:
    return None


def look(api: Api, schedule: ds.Schedule, at: float) -> list[str]:
    """One worker's look at ``schedule`` at time ``at``: the runs it started."""
    if api.is_async:
        coro = schedule.start_due_async(api.store.aio, now=at)
        return asyncio.run_coroutine_threadsafe(coro, api.loop).result(60)
    return schedule.start_due(api.store, now=at)


def test_each_tick_starts_one_run_named_by_its_time(api: Api, run_id: str) -> None:
    """A look starts every tick since the last one handled, once: a second look at the
    same time (another worker) starts nothing; runs are named by schedule and tick,
    with the tick in their input, on the workflow's queue."""
    w = ds.Workflow(run_id, [ds.Step("s", noop)], queue=ds.Queue("cron-q", priority=3))
    s = ds.Schedule(w, cron="* * * * * */10", input={"report": "daily"})  # every 10 s
    assert look(api, s, T0 + 1) == []  # first sight: ticks from now on
    assert look(api, s, T0 + 25) == [
        f"{run_id}@2026-12-04T18:00:10Z",
        f"{run_id}@2026-12-04T18:00:20Z",
    ]
    assert look(api, s, T0 + 25) == []  # the same tick is never started twice
    assert look(api, s, T0 + 31) == [f"{run_id}@2026-12-04T18:00:30Z"]
    cp = api.store.load(f"{run_id}@2026-12-04T18:00:20Z")
    assert dict(cp.state) == {"report": "daily", "scheduled_at": T0 + 20, "caught_up": False}
    assert (cp.workflow, cp.queue, cp.priority, cp.status) == (run_id, "cron-q", 3, "running")


@pytest.mark.parametrize("catch_up", ["one", "skip"])
def test_ticks_missed_while_no_worker_lived(api: Api, run_id: str, catch_up: str) -> None:
    """Ticks older than ``grace`` when first seen came while no worker lived: with
    ``catch_up="one"`` the newest of them is started once (marked ``caught_up``), with
    ``"skip"`` none; ticks within ``grace`` are started each, as always."""
    w = ds.Workflow(run_id, [ds.Step("s", noop)])
    s = ds.Schedule(w, cron="* * * * *", start_at=T0, catch_up=catch_up, grace=100)  # type: ignore[arg-type]
    started = look(api, s, T0 + 10 * 60 + 30)  # back after 10 minutes: 18:01 .. 18:10
    minutes = [f"{run_id}@2026-12-04T18:{m:02d}:00Z" for m in (8, 9, 10)]
    assert started == ([minutes[0]] if catch_up == "one" else []) + minutes[1:]
    if catch_up == "one":
        assert api.store.load(minutes[0]).state["caught_up"] is True
    assert look(api, s, T0 + 10 * 60 + 31) == []


def test_a_cancelled_tick_stays_cancelled_and_counts_as_started(api: Api, run_id: str) -> None:
    """An operator's cancellation of a tick's run is not undone by a later look."""
    w = ds.Workflow(run_id, [ds.Step("s", noop)])
    s = ds.Schedule(w, cron="* * * * *", start_at=T0 + 30)
    assert look(api, s, T0 + 61) == [f"{run_id}@2026-12-04T18:01:00Z"]
    api.cancel(f"{run_id}@2026-12-04T18:01:00Z")
    assert look(api, s, T0 + 121) == [f"{run_id}@2026-12-04T18:02:00Z"]


def test_bad_schedules_are_refused_with_what_is_accepted() -> None:
    """A cron expression croniter cannot read, an unknown catch-up, a naive start time."""
    w = ds.Workflow("w", [ds.Step("s", noop)])
    with pytest.raises(ValueError, match="is not a cron expression; give five fields"):
        ds.Schedule(w, cron="every day")
    with pytest.raises(ValueError, match="catch_up must be 'one'"):
        ds.Schedule(w, cron="* * * * *", catch_up="all")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start_at must be timezone-aware"):
        ds.Schedule(w, cron="* * * * *", start_at=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="Schedule needs a Workflow"):
        ds.Schedule("w", cron="* * * * *")  # type: ignore[arg-type]
