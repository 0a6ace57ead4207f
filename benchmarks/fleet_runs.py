"""Part 15: the fleet at scale (issue 31's bench) -- N trivial runs through 8 worker
processes, and the same workload on DBOS queues (SQLite) side by side.

- ours: 8 ``durable-steps worker`` subprocesses (``--concurrency 50``, the default
  ``--interval`` of 1 s) on one store; once they are up (two warm-up runs each), four
  threads start N runs of a one-step workflow as fast as they can, each with its start
  time in its input; the step writes the time it began into the state. Throughput: N
  over the time from the first start to the last completion (the completed run's
  ``updated_at``); pickup latency: each run's ``began - started``, both read back from
  the store -- queueing included, since the runs arrive faster than 8 workers take
  them on two cores (the note shows the start rate: a fleet faster than its starters
  shows their rate). FileStore at N = 10,000; cosmos-local at 1,000 (one Node.js
  process serves every request, and its queries scan the container: a look at 10,000
  items takes it ~0.4 s, so 8 workers' looks alone would saturate it).
- DBOS: 8 processes each ``DBOS.launch()`` on one SQLite system database, dequeuing
  from one queue (``worker_concurrency=50``, ``polling_interval_sec=1.0``); a
  ``DBOSClient`` enqueues (from four threads) the same N one-step workflows (a
  ``@DBOS.step`` that returns the time it began). Throughput and pickup latency the
  same way, from DBOS's workflow status table (``updated_at``) and outputs.

The per-look cost with many leased runs is part 15's ``looks`` rows (``fleet.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

import durable_steps as ds

from .common import ROOT, Table, dbos_on_sqlite, ms
from .cosmos import SERVERS, cpu_seconds

WORKERS = 8
CONCURRENCY = 50
INTERVAL = 1.0
STARTERS = 4
"""Threads that start the runs (a start waits on its write: one thread would bound the
fleet's throughput by its own start rate)."""
FLOWS = (
    "import time\n"
    "import durable_steps as ds\n"
    "TRIVIAL = ds.Workflow('trivial', [ds.Step('s', lambda s: {'began': time.time()})])\n"
    "FLOWS = [TRIVIAL]\n"
)
TRIVIAL = ds.Workflow("trivial", [])


@dataclass
class Measured:
    """One fleet's run of ``n`` trivial runs through ``workers`` processes."""

    n: int
    workers: int
    seconds: float
    """From the first start to the last completion."""
    cpu: float
    """All the workers' CPU seconds (user + sys) over the timed part."""
    lost: int
    """Claims a worker lost to another (its run was "leased" when it came to it)."""
    pickups: list[float]
    server: float | None = None
    """The cosmos-local server's CPU seconds over the timed part (None: no server)."""

    @property
    def rate(self) -> float:
        return self.n / self.seconds

    @property
    def cpu_per_run(self) -> float:
        return self.cpu / self.n

    def pickup(self, q: float) -> float:
        ordered = sorted(self.pickups)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


RESULTS: dict[str, Measured] = {}
"""The measurements of this bench run, by name, for the fleet table (``fleet_table``)."""


class Workers(list[int]):
    """The lines each worker process printed so far, the claims they lost, their pids."""

    def __init__(self, n: int) -> None:
        super().__init__([0] * n)
        self.lost = 0
        self.pids: list[int] = []

    def cpu(self) -> float:
        """CPU seconds (user + sys) of the processes so far (their threads included)."""
        total = 0.0
        for pid in self.pids:
            with contextlib.suppress(psutil.Error):
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system
        return total


@contextmanager
def _processes(commands: list[list[str]], cwd: Path, env: dict[str, str]) -> Iterator[Workers]:
    """The processes running, and how many lines each has printed so far (read as they
    come: a full pipe would stop a worker); SIGTERM to each at the end, then wait."""
    env = {**env, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env["PYTHONUNBUFFERED"] = "1"
    procs = [
        subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for c in commands
    ]
    lines = Workers(len(procs))
    lines.pids = [p.pid for p in procs]

    def read(i: int, out: IO[bytes]) -> None:
        for line in out:
            lines[i] += 1
            if line.rstrip().endswith(b": leased"):
                lines.lost += 1

    for i, proc in enumerate(procs):
        assert proc.stdout is not None
        threading.Thread(target=read, args=(i, proc.stdout), daemon=True).start()
    try:
        yield lines
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _workers(n: int) -> int:
    """8 processes; 2 in ``--quick`` (n < 100), a smoke run that must stay quick."""
    return WORKERS if n >= 100 else 2


def measured(
    rows: list[tuple[float, float, float]], workers: int, cpu: float, lost: int
) -> Measured:
    """rows: (started, began, completed) wall times of each run."""
    first, last = min(r[0] for r in rows), max(r[2] for r in rows)
    return Measured(len(rows), workers, last - first, cpu, lost, [r[1] - r[0] for r in rows])


def _report(table: Table, what: str, m: Measured, why: str = "") -> None:
    table.add(
        "15",
        f"{what}: {m.n:,} trivial runs, {m.workers} worker processes",
        f"{m.rate:.0f} runs/s",
        note=f"pickup (start to step) p50 {ms(m.pickup(0.5))}, p99 {ms(m.pickup(0.99))}; "
        f"{m.seconds:.1f} s; CPU {m.cpu_per_run * 1000:.2f} ms a run (all workers' user + "
        f"sys); {m.lost / m.n:.3f} lost claims a run; concurrency {CONCURRENCY} per "
        f"process, interval {INTERVAL:g} s{why}"
        + ("" if m.server is None else f"; the server's CPU {m.server / m.n * 1000:.2f} ms a run"),
    )


def ours(
    table: Table | None,
    name: str,
    env: dict[str, str],
    base: Path,
    n: int,
    *,
    workers: int | None = None,
    why: str = "",
    server: int | None = None,
) -> Measured:
    base.mkdir(parents=True)
    (base / "flows.py").write_text(FLOWS)
    script = str(Path(sys.executable).with_name("durable-steps"))
    command = [script, "worker", "flows:FLOWS", "--concurrency", str(CONCURRENCY)]
    command += ["--interval", str(INTERVAL)]
    k = workers or _workers(n)
    with ds.store_from_env(env) as store:
        store.load("warm")  # (Cosmos DB: the container made before the workers start)
        with _processes([command] * k, base, env) as lines:
            _warm(store, lines)
            cpu, lost = lines.cpu(), lines.lost
            theirs = cpu_seconds(server) if server else 0.0
            rows = _timed(store, n)
            m = measured(rows, k, lines.cpu() - cpu, lines.lost - lost)
            if server:  # what bounds a fleet on cosmos-local: its workers' CPU, or the server's
                m.server = cpu_seconds(server) - theirs
    if table is not None:
        _report(table, name, m, why)
    return m


def _warm(store: ds.Store, lines: list[int]) -> None:
    """Warm-up runs, one at a time, until every worker has run two (printed their lines):
    workers that have been up a while. (A worker's first look is a listing, its later ones
    another query; a Cosmos DB client's first run of a query costs it seconds.)"""
    deadline = time.monotonic() + 300
    for i in itertools.count():
        if min(lines) >= 2 or time.monotonic() > deadline:
            return
        TRIVIAL.start(f"warm-{i}", store)
        ds.wait_for_result(store, f"warm-{i}", timeout=300, interval=0.05)


def _timed(store: ds.Store, n: int) -> list[tuple[float, float, float]]:
    """Start n runs once the workers are up; (started, began, completed) of each."""
    ids = [f"fleet-{i:05d}" for i in range(n)]
    with ThreadPoolExecutor(STARTERS) as pool:
        list(pool.map(lambda r: TRIVIAL.start(r, store, input={"t0": time.time()}), ids))
    rows = []
    for run_id in ids:
        ds.wait_for_result(store, run_id, timeout=600, interval=0.05)
        cp = store.load(run_id)
        assert cp is not None
        assert cp.updated_at is not None
        rows.append((cp.state["t0"], cp.state["began"], cp.updated_at))
    return rows


def file_fleet(table: Table, base: Path, quick: bool) -> None:
    path = base / "fleet-runs"
    env = {**os.environ, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path / "store")}
    RESULTS["file"] = ours(table, "FileStore", env, path, 50 if quick else 10_000)


def cosmos_env(endpoint: str, prefix: str) -> dict[str, str]:
    """The environment of workers on a fresh container of cosmos-local."""
    from .listing import ds_key

    return {
        **os.environ,
        "DURABLE_STORE": "cosmos",
        "COSMOS_ENDPOINT": endpoint,
        "COSMOS_KEY": ds_key(),
        "COSMOS_CONTAINER": f"{prefix}-{time.time_ns()}",
        "COSMOS_CREATE_IF_MISSING": "true",
    }


def cosmos_fleet(table: Table, endpoint: str, base: Path, quick: bool) -> None:
    env = cosmos_env(endpoint, "fleet")
    n = 30 if quick else 1_000
    why = "" if quick else "; 1,000, not 10,000: one Node.js process serves every request"
    RESULTS["cosmos"] = ours(
        table,
        "cosmos-local",
        env,
        base / "fleet-runs-cosmos",
        n,
        why=why,
        server=SERVERS.get(endpoint),
    )


# -- DBOS queues on SQLite -------------------------------------------------------------


def _dbos(path: Path) -> Any:
    return dbos_on_sqlite("bench-fleet", path)


def dbos_worker(path: str) -> None:
    """One DBOS worker process: the queue's workflows until SIGTERM."""
    DBOS = _dbos(Path(path))

    @DBOS.step(name="stamp")
    def stamp() -> float:
        return time.time()

    @DBOS.workflow(name="trivial")
    def trivial(t0: float) -> dict[str, float]:
        began = stamp()
        print("ran", flush=True)  # a line per run, as the worker command prints (warm-up)
        return {"t0": t0, "began": began}

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    DBOS.launch()  # (a queue is registered in the system database: after the launch)
    DBOS.register_queue("fleet", worker_concurrency=CONCURRENCY, polling_interval_sec=INTERVAL)
    stop.wait()
    DBOS.destroy()


def dbos_fleet(table: Table, base: Path, quick: bool) -> None:
    try:
        import dbos  # noqa: F401
    except ImportError:
        table.add(
            "15", "DBOS queues (SQLite)", "-", note="dbos not installed: scripts/bench installs it"
        )
        return
    n = 30 if quick else 1_000
    why = "" if quick else "; 1,000, not 10,000: 8 processes on one SQLite file"
    RESULTS["dbos"] = m = dbos_runs(base / "fleet-dbos", n, _workers(n))
    _report(table, "DBOS queues (SQLite)", m, why)


def dbos_runs(path: Path, n: int, workers: int) -> Measured:
    """n trivial runs through ``workers`` DBOS processes on one queue (SQLite)."""
    path.mkdir()
    command = [sys.executable, "-m", "benchmarks.fleet_runs", "dbos-worker", str(path)]
    url = f"sqlite:///{path / 'dbos.sqlite'}"
    # One worker first: it makes the system database's tables (eight at once race on
    # SQLite's schema), and a warm-up run through it says the tables are there.
    with _processes([command], ROOT, dict(os.environ)) as first:
        client = _client_when_ready(url)
        try:
            with _processes([command] * (workers - 1), ROOT, dict(os.environ)) as lines:
                options: Any = {"queue_name": "fleet", "workflow_name": "trivial"}
                deadline = time.monotonic() + 300
                for i in itertools.count():  # as _warm: until every worker ran one
                    if all(lines) or time.monotonic() > deadline:
                        break
                    client.enqueue({**options, "workflow_id": f"warm-{i}"}, 0.0).get_result()
                cpu = first.cpu() + lines.cpu()
                ids = [f"fleet-{i:05d}" for i in range(n)]
                with ThreadPoolExecutor(STARTERS) as pool:
                    list(pool.map(lambda r: client.enqueue({**options, "workflow_id": r},
                                                           time.time()), ids))  # fmt: skip
                for run_id in ids:
                    client.retrieve_workflow(run_id).get_result()
                cpu = first.cpu() + lines.cpu() - cpu
                done = client.list_workflows(workflow_id_prefix="fleet-", load_input=False)
        finally:
            client.destroy()
    rows = [(w.output["t0"], w.output["began"], w.updated_at / 1000) for w in done]
    return measured(rows, workers, cpu, 0)


def _client_when_ready(url: str) -> Any:
    """A DBOSClient once the first worker made the tables and ran a warm-up workflow."""
    from dbos import DBOSClient

    deadline = time.monotonic() + 300
    while True:
        client = DBOSClient(system_database_url=url)
        try:
            options: Any = {"queue_name": "fleet", "workflow_name": "trivial"}
            client.enqueue({**options, "workflow_id": "warm"}, time.time()).get_result()
        except Exception:
            client.destroy()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # the worker's migration is not done yet
        else:
            return client


if __name__ == "__main__":
    if sys.argv[1] == "dbos-worker":
        dbos_worker(sys.argv[2])
