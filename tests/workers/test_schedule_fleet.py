"""Schedules across a fleet: 8 real worker processes racing for every tick of two
per-second schedules (catch-up "one" and "skip") on one store -- the file store and
cosmos-local --, then all SIGKILLed, then two workers back after ticks came and went
with no worker alive."""

from __future__ import annotations

import itertools
import signal
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import durable_steps as ds

from ..helpers.waiting import wait_until
from ..helpers.worker_process import worker, workers_die_with_their_test  # noqa: F401

GRACE = 5.0  # a tick later than this came while no worker lived (a loaded machine stalls)
FLOWS = textwrap.dedent(
    f"""
    import durable_steps as ds

    ONE = ds.Workflow("tick-one", [ds.Step("s", lambda s: {{"ran": True}})])
    SKIP = ds.Workflow("tick-skip", [ds.Step("s", lambda s: {{"ran": True}})])
    TARGETS = [
        ds.Schedule(ONE, cron="* * * * * *", catch_up="one", grace={GRACE}),
        ds.Schedule(SKIP, cron="* * * * * *", catch_up="skip", grace={GRACE}),
    ]
    """
)
NAMES = ("tick-one", "tick-skip")


def ticks(store: Any, name: str) -> dict[float, str]:
    """The runs of a schedule by tick (the time in each run id)."""
    found: dict[float, str] = {}
    for info in store.list_runs(workflow=name):
        when = datetime.strptime(info.run_id.split("@")[1], "%Y-%m-%dT%H:%M:%SZ")
        tick = when.replace(tzinfo=UTC).timestamp()
        assert tick not in found, f"tick {tick} has two runs"
        found[tick] = info.run_id
    return found


def fleet(env: dict[str, str], tmp_path: Path, n: int, first: int = 0) -> list[Any]:
    procs = []
    for i in range(first, first + n):
        cwd = tmp_path / f"w{i}"
        cwd.mkdir()
        (cwd / "flows.py").write_text(FLOWS)
        procs.append(worker(env, cwd, "flows:TARGETS", "--interval", "0.2"))
    return procs


def continuous(seconds: list[float]) -> bool:
    return all(b - a == 1.0 for a, b in itertools.pairwise(seconds))


def test_racing_workers_start_each_tick_once_and_catch_up_as_told(
    env: dict[str, str], tmp_path: Path
) -> None:
    """8 workers racing: each tick has exactly one run, and none is missed while they
    live. All killed, then two back after 3+ ticks with no worker: the "one" schedule
    starts the newest missed tick once (``caught_up``), the "skip" schedule none of
    them; both go on with every tick from then on."""
    store = ds.store_from_env(env)
    racing = fleet(env, tmp_path, 8)
    wait_until(lambda: all(len(ticks(store, n)) >= 4 for n in NAMES), "ticks under 8 workers", 120)
    for proc in racing:
        proc.send_signal(signal.SIGKILL)
    for proc in racing:
        proc.wait(30)
    before = {n: sorted(ticks(store, n)) for n in NAMES}
    down = time.time()
    wait_until(lambda: time.time() > down + GRACE + 3, "ticks to come and go unserved", 30)
    back = time.time()
    fleet(env, tmp_path, 2, first=8)
    wait_until(
        lambda: all(len(ticks(store, n)) >= len(before[n]) + 4 for n in NAMES),
        "ticks under the returning workers",
        120,
    )
    for name in NAMES:
        runs = ticks(store, name)
        assert continuous(before[name]), before[name]  # none missed while 8 lived
        after = sorted(t for t in runs if t > before[name][-1])
        caught = [t for t in after if store.load(runs[t]).state["caught_up"]]
        on_time = [t for t in after if t not in caught]
        assert continuous(on_time) and on_time[0] > back - GRACE, (on_time, back)
        assert on_time[0] - before[name][-1] >= 3  # ticks came and went unserved
        if name == "tick-one":
            assert len(caught) == 1 and before[name][-1] < caught[0] < on_time[0], caught
        else:
            assert caught == [], caught
    store.close()
