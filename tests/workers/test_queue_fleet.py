"""A queue's limits across a fleet: 8 real worker processes (``durable-steps worker``)
on one store -- the file store and cosmos-local -- two of them SIGKILLed halfway. The
concurrency limit is never exceeded (sampled from the store while they run, and from
the runs' own step times), the rate holds, higher priority goes first, nothing
starves."""

from __future__ import annotations

import signal
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import durable_steps as ds
from durable_steps.seam.lease import lease_holder

from ..helpers.waiting import wait_until
from ..helpers.worker_process import worker, workers_die_with_their_test  # noqa: F401

FLOWS = textwrap.dedent(
    """
    import os, time
    import durable_steps as ds

    def work(state):
        began = time.time()
        time.sleep(0.25)  # the run's work: it holds its slot meanwhile
        return {"began": began, "ended": time.time()}

    LIMITED = ds.Workflow(
        "limited", [ds.Step("work", work)], queue=ds.Queue("limited", concurrency=3)
    )
    RATED = ds.Workflow(
        "rated", [ds.Step("work", lambda s: {"began": time.time()})],
        queue=ds.Queue("rated", rate=(2, 3.0)),
    )
    WORKFLOWS = [LIMITED, RATED]
    """
)
LIMIT, HIGH, LOW, RATED, (N, PER) = 3, 6, 14, 4, (2, 3.0)


def test_eight_workers_keep_a_queues_limits(env: dict[str, str], tmp_path: Path) -> None:
    """Runs started on a queue of concurrency 3 and a queue of 2 starts per 3 s, served
    by 8 worker processes of which 2 are killed while they work: never more than 3
    runs of the first hold a live lease at once, every high-priority run starts before
    any low one could, no 3 runs of the second start within one period, and every run
    completes."""
    store = ds.store_from_env(env)
    limited = ds.Workflow("limited", [ds.Step("work", lambda s: None)])
    rated = ds.Workflow("rated", [ds.Step("work", lambda s: None)])
    high = [f"high-{i}" for i in range(HIGH)]
    low = [f"low-{i}" for i in range(LOW)]
    for run_id in low:  # the low ones first: priority, not age, must decide
        limited.start(run_id, store, queue="limited", priority=0)
    for run_id in high:
        limited.start(run_id, store, queue="limited", priority=10)
    for i in range(RATED):
        rated.start(f"rated-{i}", store, queue="rated")

    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            now = time.time()
            live = [
                i for i in store.list_runs(status="running", workflow="limited")
                if lease_holder(i, "", now) is not None
            ]  # fmt: skip
            peak[0] = max(peak[0], len(live))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    workers = []
    for n in range(8):
        cwd = tmp_path / f"w{n}"
        cwd.mkdir()
        (cwd / "flows.py").write_text(FLOWS)
        workers.append(worker(env, cwd, "flows:WORKFLOWS", "--interval", "0.2"))

    def completed(ids: list[str]) -> int:
        return sum(1 for r in ids if (i := store.run_info(r)) is not None and i.done)

    wait_until(lambda: completed(high + low) >= 4, "the first runs to complete", timeout=120)
    for killed in workers[:2]:
        killed.send_signal(signal.SIGKILL)  # holding slots, likely: their runs resume elsewhere
    everything = high + low + [f"rated-{i}" for i in range(RATED)]
    wait_until(lambda: completed(everything) == len(everything), "every run", timeout=180)
    stop.set()
    sampler.join()
    ready = [tmp_path / f"w{n}" / "worker.err" for n in range(2, 8)]
    wait_until(  # each has its SIGTERM handler (a loaded machine may still be importing)
        lambda: all("recovering runs of" in err.read_text() for err in ready), "the workers"
    )
    for proc in workers[2:]:
        proc.send_signal(signal.SIGTERM)
    assert all(proc.wait(60) == 0 for proc in workers[2:])

    states: dict[str, Any] = {r: store.load(r).state for r in everything}  # type: ignore[union-attr]
    assert 1 < peak[0] <= LIMIT, peak  # sampled from the store: reached, never exceeded
    spans = [(states[r]["began"], states[r]["ended"]) for r in high + low]
    assert max(sum(1 for b, e in spans if b <= t < e) for t, _ in spans) <= LIMIT
    # A low run is admitted only once every high run was: at most LIMIT - 1 of them
    # were still holding slots, so the others had ended before it began.
    for r in low:
        ended_before = sum(1 for h in high if states[h]["ended"] < states[r]["began"])
        assert ended_before >= HIGH - (LIMIT - 1), (r, ended_before)
    began = sorted(states[f"rated-{i}"]["began"] for i in range(RATED))
    gaps = [later - first for first, later in zip(began, began[N:], strict=False)]
    assert min(gaps) > PER / 2, gaps  # N starts a period (half of it: a claim's delay)
    store.close()
