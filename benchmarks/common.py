"""What every benchmark part measures with: the rows of the table, I/O counters, a
transparent store wrapper that meters each call, workers in fresh processes, and the
workload's text.

The harness uses only the public API of durable-steps. It never looks at a store's
files: bytes written come from the kernel (``/proc/self/io``), bytes on the wire from
a counting proxy (``benchmarks.cosmos``), and per-step times from the calls a run
makes to its store (``Metered``), so that a new store layout needs no change here.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import durable_steps as ds
from durable_steps.seam.rules import RunFilter

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
KB = 1024
STEP_TEXT = 5 * KB
"""The growing workload adds one 5 KB string per step (issue 13, item 6)."""


# -- the table ----------------------------------------------------------------------------


@dataclass
class Row:
    part: str
    what: str
    measured: str
    target: str = ""
    ratio: str = ""
    verdict: str = ""
    note: str = ""


@dataclass
class Table:
    rows: list[Row] = field(default_factory=list)
    log: Callable[[str], None] = print

    def add(self, part: str, what: str, measured: str, note: str = "") -> None:
        """A measurement without a target of its own (a floor, a peer, a breakdown)."""
        self._append(Row(part, what, measured, note=note))

    def judge(
        self,
        part: str,
        what: str,
        measured: str,
        ratio: float | None,
        limit: float,
        *,
        at_least: bool = False,
        unit: str = "x",
        note: str = "",
    ) -> None:
        """A measurement against its target: ``ratio`` must be <= ``limit`` (or >= it
        with ``at_least``). A ratio that could not be measured is "n/a", never "met"."""
        target = f"{'≥' if at_least else '≤'} {limit:g}{unit}"
        if ratio is None:
            self.verdict(part, what, measured, target, None, note=note)
            return
        met = ratio >= limit if at_least else ratio <= limit
        shown = f"{ratio:.2f}{unit}" if abs(ratio) < 100 else f"{ratio:,.0f}{unit}"
        self.verdict(part, what, measured, target, met, ratio=shown, note=note)

    def verdict(
        self,
        part: str,
        what: str,
        measured: str,
        target: str,
        met: bool | None,
        *,
        ratio: str = "",
        note: str = "",
    ) -> None:
        """A measurement against a target stated in words; None: could not be measured."""
        word = "n/a" if met is None else "met" if met else "MISSED"
        self._append(
            Row(part, what, measured, target, ratio or ("n/a" if met is None else ""), word, note)
        )

    def _append(self, row: Row) -> None:
        self.rows.append(row)
        bits = [row.measured, row.ratio and f"ratio {row.ratio}", row.target, row.verdict]
        self.log(f"  {row.part:<3} {row.what:<62} " + "  ".join(b for b in bits if b))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.2f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def size(n: float) -> str:
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            v = n / scale
            return (
                f"{v:,.0f} {unit}"
                if v >= 100
                else f"{v:.1f} {unit}"
                if v >= 10
                else f"{v:.2f} {unit}"
            )
    return f"{n:,.0f} B"


def median(values: list[float]) -> float:
    return statistics.median(values)


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


# -- what the kernel counted --------------------------------------------------------------


def io_counters() -> dict[str, int]:
    """This process's I/O so far (all its threads): ``wchar`` = bytes passed to write()
    and friends, ``write_bytes`` = bytes sent towards the storage device (page
    granular, counted when a page is dirtied), ``rchar`` = bytes returned by read()."""
    with open("/proc/self/io") as f:
        counters = dict(line.split(": ") for line in f.read().splitlines())
    return {k: int(v) for k, v in counters.items()}


def written(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    net = after["write_bytes"] - before["write_bytes"]
    net -= after["cancelled_write_bytes"] - before["cancelled_write_bytes"]
    return {"wchar": after["wchar"] - before["wchar"], "write_bytes": net}


def memory() -> dict[str, int]:
    """Resident memory now (``VmRSS``) and at its peak (``VmHWM``), in bytes."""
    with open("/proc/self/status") as f:
        fields = dict(line.partition(":")[::2] for line in f)
    return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM")}


@contextmanager
def peak_growth() -> Iterator[list[int]]:
    """Yields a list that receives how far resident memory rose above its level at
    the start, at its peak: the peak is reset first (``clear_refs``), so what the
    process did before (imports, set-up) does not hide what the block needs."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to VmRSS (Linux 4.0+)
    start = memory()["VmRSS"]
    out: list[int] = []
    try:
        yield out
    finally:
        out.append(memory()["VmHWM"] - start)


# -- a store whose every call is metered --------------------------------------------------

READS = frozenset({"load", "list_runs", "close", "delete"})


@dataclass
class Call:
    name: str
    start: float
    end: float
    delta: dict[str, int]

    @property
    def writes(self) -> bool:
        return self.name not in READS


class Metered(ds.Store):
    """Wraps a store: each call of the interface is timed and ``meter()`` (a dict of
    counters, e.g. the kernel's I/O counters or a proxy's byte counts) is read around
    it; nothing of the store's internals is assumed."""

    def __init__(self, store: ds.Store, meter: Callable[[], dict[str, int]] | None = None) -> None:
        self._store, self._meter = store, meter or dict
        self._lock = threading.Lock()
        self.calls: list[Call] = []
        self.kind = store.kind  # type: ignore[misc]
        self.max_state_bytes = store.max_state_bytes

    def _metered(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        before, t0 = self._meter(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            t1, after = time.perf_counter(), self._meter()
            delta = {k: after[k] - before.get(k, 0) for k in after}
            with self._lock:
                self.calls.append(Call(name, t0, t1, delta))

    def load(self, run_id: str) -> ds.Checkpoint | None:
        return self._metered("load", self._store.load, run_id)

    def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return self._metered("save", self._store.save, checkpoint)

    def load_head(self, run_id: str) -> ds.Checkpoint | None:
        return self._metered("load_head", self._store.load_head, run_id)

    def save_head(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return self._metered("save_head", self._store.save_head, checkpoint)

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return self._metered("delete", self._store.delete, run_id, etag=etag)

    def listing(self, filters: RunFilter) -> Iterator[ds.RunInfo]:
        return iter(self._metered("list_runs", lambda: list(self._store.listing(filters))))

    def run_info(self, run_id: str) -> ds.RunInfo | None:
        return self._metered("run_info", self._store.run_info, run_id)

    # per-run items (streams, events)
    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._metered("append_item", self._store.append_item, run_id, kind, key, value)

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._metered("put_item", self._store.put_item, run_id, kind, key, value)

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Any]:
        return self._metered(
            "read_items", self._store.read_items, run_id, kind, after=after, limit=limit
        )

    def close(self) -> None:
        self._store.close()


class StepClock:
    """Wraps step functions to record when each one started and returned."""

    def __init__(self) -> None:
        self.entered: list[float] = []
        self.returned: list[float] = []

    def __call__(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def timed(state: Any) -> Any:
            self.entered.append(time.perf_counter())
            try:
                return fn(state)
            finally:
                self.returned.append(time.perf_counter())

        return timed


def step_costs(clock: StepClock, calls: list[Call], started: float) -> list[float]:
    """Per step: the time from the previous checkpoint (the claim, for the first step)
    to this step's checkpoint -- the step's body, the runner's work on its update and
    its save. A step's checkpoint is the first write that starts after it returned."""
    writes = [c for c in calls if c.writes]
    before_first = [c.end for c in writes if c.end <= clock.entered[0]]
    previous = max(before_first, default=started)
    costs = []
    for returned in clock.returned:
        saved = min(c.end for c in writes if c.start >= returned)
        costs.append(saved - previous)
        previous = saved
    return costs


# -- workers in fresh processes -----------------------------------------------------------


def worker(module: str, *args: object, timeout: float = 600) -> Any:
    """Run ``python -m benchmarks.MODULE ARGS`` in a fresh process (its own imports,
    its own I/O counters and peak memory) and return the JSON it prints last."""
    paths = [str(ROOT)]
    paths += [
        str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"benchmarks.{module} {' '.join(map(str, args))} failed "
            f"({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def serve(handlers: dict[str, Callable[..., Any]]) -> None:
    """The entry point of a worker module: ``python -m benchmarks.X NAME ARGS...``."""
    name, *args = sys.argv[1:]
    print(json.dumps(handlers[name](*args)))


# -- the workload's data ------------------------------------------------------------------


def text(i: int, n: int = STEP_TEXT) -> str:
    """``n`` characters of ASCII, different for every ``i`` (no two steps alike, so
    nothing is deduplicated or compressed away; ASCII, so no escaping inflates it)."""
    return random.Random(i).randbytes(n // 2).hex()


def dbos_on_sqlite(name: str, directory: str | Path) -> Any:
    """The ``DBOS`` class, configured (not launched) for app ``name`` on a SQLite system
    database in ``directory`` (``dbos.sqlite``), logging errors only: the peer as every
    part that compares with DBOS runs it. Raises ImportError without the ``[bench]`` extra."""
    from dbos import DBOS

    DBOS(
        config={
            "name": name,
            "system_database_url": f"sqlite:///{Path(directory) / 'dbos.sqlite'}",
            "log_level": "ERROR",
        }
    )
    return DBOS
