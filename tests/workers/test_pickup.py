"""When the worker looks for runs: a started run is picked up within ``--interval``,
whatever a look and a claim cost (within reason) and whatever runs are in progress --
on a fake clock, so the test checks the schedule and not the machine's load."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.workers import fleet, loop

from ..helpers.waiting import wait_until

INTERVAL = 1.0
LOOKS = 6


class FakeClock:
    """The worker loop's monotonic clock: a listing moves it by its cost, a claim's save
    by its cost, a wait by its timeout."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def look_starts(
    monkeypatch: pytest.MonkeyPatch, run_id: str, listing: float, claim: float
) -> list[float]:
    """Serve on a MemoryStore whose every listing costs ``listing`` fake seconds, with a
    run whose claim costs ``claim`` and whose step then blocks until the end; the fake
    times at which the first LOOKS looks after it entered its step began."""
    clock = FakeClock()
    monkeypatch.setattr(fleet, "_monotonic", lambda: clock.now)
    entered, release = threading.Event(), threading.Event()

    def block(state: Any) -> dict[str, Any]:
        entered.set()
        return {"done": release.wait(60)}

    blocking = ds.Workflow("blocking", [ds.Step("s", block)])
    store = ds.MemoryStore()
    blocking.start(run_id, store)
    starts: list[float] = []
    listing_of, save = store.listing, store.save

    def costly_listing(filters: Any) -> Any:
        if filters.status == "running" and entered.is_set():  # a look lists these first
            starts.append(clock.now)
        clock.advance(listing)
        return listing_of(filters)

    def costly_save(cp: ds.Checkpoint) -> ds.Checkpoint:
        clock.advance(claim)  # the claim: the only save until the step returns
        return save(cp)

    async def fake_wait(fs: Any, timeout: float) -> Any:
        # no rest before the run is in its step: its claim is known then
        await asyncio.to_thread(entered.wait, 60)
        done = {f for f in fs if f.done()}
        if not done:
            clock.advance(timeout)
            await asyncio.sleep(0)
        return done

    store.listing = costly_listing  # type: ignore[method-assign]
    store.save = costly_save  # type: ignore[method-assign]
    monkeypatch.setattr(fleet, "_wait", fake_wait)
    stop = threading.Event()
    options: dict[str, Any] = {"once": False, "concurrency": 4, "interval": INTERVAL}
    options |= {"lease": 60.0, "owner": None, "echo": lambda line: None, "stop": stop}
    serving = threading.Thread(target=loop.serve, args=(store, [blocking]), kwargs=options)
    serving.start()
    try:
        wait_until(lambda: len(starts) >= LOOKS, f"{LOOKS} looks with the run in its step")
    finally:
        stop.set()
        release.set()
        serving.join(60)
    return starts[:LOOKS]


@pytest.mark.parametrize("claim", [0.0, 0.2], ids=["instant-claim", "slow-claim"])
def test_the_next_look_has_a_started_run_claimed_within_the_interval(
    monkeypatch: pytest.MonkeyPatch, run_id: str, claim: float
) -> None:
    """A run started just after a look began is missed by it and found by the next:
    that next look has listed it and claimed it (as long as the last claim took)
    within the interval of the one before -- and a run in progress delays no look."""
    listing = 0.1
    starts = look_starts(monkeypatch, run_id, listing, claim)
    look = 2 * listing  # a look lists running, then waiting runs
    for before, after in itertools.pairwise(starts):
        assert after + look + claim <= before + INTERVAL + 1e-9, starts


def test_a_store_too_big_for_the_interval_is_not_listed_back_to_back(
    monkeypatch: pytest.MonkeyPatch, run_id: str
) -> None:
    """When a look takes over a third of the interval, the promise cannot hold: the
    worker then rests as long as a look lasts, so listing takes at most half its time."""
    listing = 0.4
    starts = look_starts(monkeypatch, run_id, listing, claim=0.0)
    for before, after in itertools.pairwise(starts):
        assert after - before >= 2 * (2 * listing) - 1e-9, starts


def test_slow_claims_do_not_make_the_worker_look_back_to_back(
    monkeypatch: pytest.MonkeyPatch, run_id: str
) -> None:
    """A claim that took longer than the interval (a loaded machine, a busy event loop)
    cannot be made faster by looking again at once: the looks stay at least a quarter
    of the interval apart (they went back to back: 130 a second against cosmos-local)."""
    starts = look_starts(monkeypatch, run_id, 0.01, claim=1.5 * INTERVAL)
    assert len(starts) >= 3, starts
    for before, after in itertools.pairwise(starts):
        assert after - before >= INTERVAL / 4 - 1e-9, starts
