"""Part 16: what a queue's limit costs (``workers.queues``). One admission on FileStore
(a read and a conditional save of the queue's record; when full, a metadata read of
each slot's run), and 8 worker processes running trivial runs of a queue of
concurrency 4 against the same runs without a queue. The fleet's throughput at scale
is the fleet part's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import durable_steps as ds
from durable_steps.runner.requests import execute
from durable_steps.runner.store_io import blocking_io
from durable_steps.workers.queues import admit

from .common import ROOT, Table, median, ms

WORKERS = 8
FLOWS = (
    "import durable_steps as ds\n"
    "PLAIN = ds.Workflow('plain', [ds.Step('s', lambda s: {'ok': True})])\n"
    "QUEUED = ds.Workflow('queued', [ds.Step('s', lambda s: {'ok': True})],\n"
    "                     queue=ds.Queue('four', concurrency=4))\n"
    "FLOWS = [PLAIN, QUEUED]\n"
)


def queues(table: Table, base: Path, quick: bool) -> None:
    admission(table, base, 50 if quick else 500)
    fleet(table, base, 16 if quick else 120)


def admission(table: Table, base: Path, n: int) -> None:
    """The median time of one admission to a queue that is not full."""
    q = ds.Queue("wide", concurrency=n + 1)
    w = ds.Workflow("wide", [ds.Step("s", lambda s: None)], queue=q)
    with ds.FileStore(base / "admission") as store:
        times = []
        for i in range(n):
            w.start(f"r{i}", store)
            info = store.run_info(f"r{i}")
            assert info is not None
            t0 = time.perf_counter()
            assert execute(admit(q, info, grace=60.0), blocking_io(store)) == "taken"
            times.append(time.perf_counter() - t0)
    table.add("16", "queue admission on FileStore (read + conditional save)", ms(median(times)))


def fleet(table: Table, base: Path, n: int) -> None:
    """8 workers: n trivial runs through a queue of concurrency 4, and without one."""
    flows = base / "queues"
    flows.mkdir()
    (flows / "flows.py").write_text(FLOWS)
    env = {**os.environ, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(flows / "store")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    script = str(Path(sys.executable).with_name("durable-steps"))
    procs = [
        subprocess.Popen(
            [script, "worker", "flows:FLOWS", "--interval", "0.1", "--concurrency", "4"],
            cwd=flows,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(WORKERS)
    ]
    seconds: dict[str, float] = {}
    try:
        with ds.FileStore(flows / "store") as store:
            warm = ds.Workflow("plain", [])
            warm.start("warm", store)  # the workers up before the clock starts
            ds.wait_for_result(store, "warm", timeout=120, interval=0.01)
            for name in ("plain", "queued"):
                w = ds.Workflow(name, [])
                t0 = time.perf_counter()
                for i in range(n):
                    w.start(f"{name}-{i}", store, queue="four" if name == "queued" else None)
                for i in range(n):
                    ds.wait_for_result(store, f"{name}-{i}", timeout=300, interval=0.01)
                seconds[name] = time.perf_counter() - t0
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
    plain, queued = (n / seconds[k] for k in ("plain", "queued"))
    table.add("16", f"{WORKERS} workers, {n} trivial runs, no queue", f"{plain:.0f} runs/s")
    table.add(
        "16",
        f"{WORKERS} workers, {n} trivial runs, queue of concurrency 4",
        f"{queued:.0f} runs/s",
        note=f"{plain / queued:.2f}x the time without a queue; per start "
        f"{ms((seconds['queued'] - seconds['plain']) / n)} more",
    )
