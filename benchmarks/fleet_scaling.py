"""Part 15's scaling and the fleet table: the same workload at 1, 2, 4 and 8 worker
processes, ours on FileStore and DBOS queues on SQLite, runs/s and CPU seconds per run
(all the workers' user + sys over the timed part, from the processes' own counters);
then the judged rows that put the fleet beside DBOS -- throughput, CPU per run, lost
claims, pickup -- from the measurements of this bench run (``fleet_runs.RESULTS``).

On a 2-core machine throughput is bounded by CPU, so CPU per run is the figure that
carries to a bigger machine. The scaling runs are smaller than the headline's (2,000
runs ours, 1,000 DBOS's) to keep the bench's time; the 8-process row is the headline's
own measurement (10,000 runs ours, 1,000 DBOS's).
"""

from __future__ import annotations

import os
from pathlib import Path

from .common import Table, ms
from .fleet_runs import RESULTS, Measured, dbos_runs, ours

COUNTS = (1, 2, 4, 8)


def scaling(table: Table, base: Path, quick: bool) -> None:
    """The rows at 1, 2, 4 and 8 processes. The headline's measurements (``fleet_runs``:
    8 processes, or 2 in ``--quick``) are that row when this run made them; ``--quick``
    measures DBOS at no other count (a DBOS fleet takes it ~40 s to start)."""
    counts = (1, 2) if quick else COUNTS
    n_ours, n_dbos = (20, 20) if quick else (2_000, 1_000)
    try:
        import dbos  # noqa: F401

        peer = True
    except ImportError:
        peer = False
    for k in counts:
        mine = _reused("file", k)
        if mine is None:
            path = base / f"fleet-scaling-{k}"
            env = {**os.environ, "DURABLE_STORE": "file"}
            env["DURABLE_FILE_PATH"] = str(path / "store")
            mine = ours(None, "FileStore", env, path, n_ours, workers=k)
        RESULTS[f"scale-file-{k}"] = mine
        theirs = _reused("dbos", k)
        if theirs is None and peer and not quick:
            theirs = dbos_runs(base / f"fleet-scaling-dbos-{k}", n_dbos, k)
        if theirs is not None:
            RESULTS[f"scale-dbos-{k}"] = theirs
        table.add(
            "15",
            f"scaling: {k} worker process{'es' if k > 1 else ''}, ours (FileStore) / DBOS",
            f"{mine.rate:.0f} / {theirs.rate:.0f} runs/s" if theirs else f"{mine.rate:.0f} runs/s",
            note=f"CPU a run {_cpu(mine)} / {_cpu(theirs) if theirs else '-'}; lost claims a "
            f"run {mine.lost / mine.n:.3f}; {mine.n:,} runs ours, "
            f"{theirs.n if theirs else 0:,} DBOS",
        )


def _reused(name: str, workers: int) -> Measured | None:
    """The headline's measurement of ``name`` if it ran with ``workers`` processes."""
    m = RESULTS.get(name)
    return m if m is not None and m.workers == workers else None


def _cpu(m: Measured) -> str:
    return f"{m.cpu_per_run * 1000:.2f} ms"


def fleet_table(table: Table) -> None:
    """The judged rows, from what this run measured (a row is left out when its parts
    did not run)."""
    r = RESULTS
    for ours_, what, limit in (("file", "FileStore", 2.0), ("cosmos", "cosmos-local", 1.0)):
        if ours_ in r and "dbos" in r:
            m, d = r[ours_], r["dbos"]
            table.judge(
                "15",
                f"fleet: {what} throughput : DBOS's ({m.workers} processes each)",
                f"{m.rate:.0f} / {d.rate:.0f} runs/s",
                m.rate / d.rate,
                limit,
                at_least=True,
                note=f"{m.n:,} runs ours, {d.n:,} DBOS's, in this bench run; the workers' CPU "
                f"a run {_cpu(m)}",
            )
    if "file" in r:
        f = r["file"]
        table.judge(
            "15",
            f"fleet: claims lost to another worker, a run (FileStore, {f.workers} processes)",
            f"{f.lost:,} of {f.n:,} runs",
            f.lost / f.n,
            0.1,
            unit="",
            note="each look offers its due runs from a random place, no more than its slots",
        )
    top = max((k for k in (1, 2, 4, 8) if f"scale-file-{k}" in r and f"scale-dbos-{k}" in r),
              default=None)  # fmt: skip
    if top is not None:
        mine, theirs = r[f"scale-file-{top}"], r[f"scale-dbos-{top}"]
        table.judge(
            "15",
            f"fleet: CPU a run, ours : DBOS's ({top} processes)",
            f"{_cpu(mine)} / {_cpu(theirs)}",
            mine.cpu_per_run / theirs.cpu_per_run,
            0.5,
            note="all workers' user + sys over the timed part, from the scaling rows",
        )
    for kind in ("start", "signal", "child"):
        key = f"pickup-file-{kind}"
        if key in r and "pickup-dbos-start" in r:
            m, d = r[key], r["pickup-dbos-start"]
            table.add(
                "15",
                f"fleet: pickup p50 / p99, FileStore ({kind}) beside DBOS (enqueue)",
                f"{ms(m.pickup(0.5))} / {ms(m.pickup(0.99))}",
                note=f"DBOS {ms(d.pickup(0.5))} / {ms(d.pickup(0.99))}",
            )
