"""When the worker looks for runs: a started run is picked up within ``--interval``,
whatever a look costs (within reason) and whatever runs are in progress -- on a fake
clock, so the test measures the schedule and not the machine's load."""

from __future__ import annotations

import itertools
import threading
from concurrent import futures
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.workers import loop

from ..helpers.waiting import wait_until

INTERVAL = 1.0
LOOKS = 6


class FakeClock:
    """The worker loop's monotonic clock: a listing moves it by its cost, a wait by its
    timeout (a wait ends early only when a run ended for real)."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeStop(threading.Event):
    """The worker's stop event, whose timed wait passes on the fake clock at once."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.advance(timeout or 0.0)
        return self.is_set()


def look_starts(
    monkeypatch: pytest.MonkeyPatch, run_id: str, listing_costs: float
) -> tuple[list[float], float]:
    """Serve on a MemoryStore with a run in progress (its step blocks until the end),
    every listing costing ``listing_costs`` fake seconds; the fake times at which the
    first LOOKS looks while that run was in its step began, and what one look cost."""
    clock = FakeClock()
    monkeypatch.setattr(loop, "_monotonic", lambda: clock.now)

    def fake_wait(fs: Any, timeout: float, return_when: str) -> Any:
        done, pending = futures.wait(fs, timeout=0, return_when=return_when)
        if not done:
            clock.advance(timeout)
        return done, pending

    monkeypatch.setattr(loop, "wait", fake_wait)
    entered, release = threading.Event(), threading.Event()

    def block(state: Any) -> dict[str, Any]:
        entered.set()
        return {"done": release.wait(60)}

    blocking = ds.Workflow("blocking", [ds.Step("s", block)])
    store = ds.MemoryStore()
    blocking.start(run_id, store)
    starts: list[float] = []
    list_runs = store.list_runs

    def costly(**filters: Any) -> Any:
        if filters["status"] == "running" and entered.is_set():  # a look lists these first
            starts.append(clock.now)
        clock.advance(listing_costs)
        return list_runs(**filters)

    store.list_runs = costly  # type: ignore[method-assign]
    stop = FakeStop(clock)
    options: dict[str, Any] = {"once": False, "concurrency": 4, "interval": INTERVAL}
    options |= {"lease": 60.0, "owner": None, "echo": lambda line: None, "stop": stop}
    serving = threading.Thread(target=loop.serve, args=(store, [blocking]), kwargs=options)
    serving.start()
    try:
        wait_until(lambda: len(starts) >= LOOKS, f"{LOOKS} looks with the run in progress")
    finally:
        stop.set()
        release.set()
        serving.join(60)
    return starts[:LOOKS], 2 * listing_costs  # a look: its running, then its waiting runs


def test_the_next_look_has_listed_a_started_run_within_the_interval(
    monkeypatch: pytest.MonkeyPatch, run_id: str
) -> None:
    """A run started just after a look began is missed by it and listed by the next:
    that next look ends within the interval of the one it followed -- the rest is
    the interval less two looks -- and a run in progress does not delay it."""
    starts, look = look_starts(monkeypatch, run_id, listing_costs=0.1)
    for before, after in itertools.pairwise(starts):
        assert after + look <= before + INTERVAL + 1e-9, starts


def test_a_store_too_big_for_the_interval_is_not_listed_back_to_back(
    monkeypatch: pytest.MonkeyPatch, run_id: str
) -> None:
    """When a look takes over a third of the interval, the promise cannot hold: the
    worker then rests as long as a look lasts, so listing takes at most half its time."""
    starts, look = look_starts(monkeypatch, run_id, listing_costs=0.4)
    for before, after in itertools.pairwise(starts):
        assert after - before >= 2 * look - 1e-9, starts
