"""Part 3: the growing workload, exactly as issue 13 (item 6) defines it.

200 steps, each adding one 5 KB string (1 MB of new data per run), in two variants:

- ``keys``: step i returns ``{f"k{i}": text}``;
- ``list``: step i returns ``{"messages": [*state["messages"], text]}``, the way agents
  keep a conversation; the initial state ``{"messages": []}`` is the ``input`` of
  ``Workflow.run`` (the ``keys`` variant starts from ``{}``).

Each workload runs in a fresh process (``python -m benchmarks.growing``), with a
short warm-up run first, so imports and first-use costs stay out of the numbers and
``/proc/self/io`` counts only that run's writes. Bytes written are two kernel
counters: ``wchar`` (bytes handed to write()) and ``write_bytes`` (bytes sent
towards the disk, page granular, net of cancelled writes). The target is judged on
``write_bytes``: what the disk is asked to store.

The floor beside it: 200 appends of the 5 KB strings, each followed by fdatasync.
The peers (``benchmarks.peers``) run the same workload with their own durability.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import (
    STEP_TEXT,
    Metered,
    StepClock,
    Table,
    io_counters,
    median,
    ms,
    serve,
    size,
    step_costs,
    text,
    worker,
    written,
)

STEPS = 200
NEW_DATA = STEPS * STEP_TEXT
SHOWN = (1, 50, 200)  # the steps whose cost the table shows (1-based)
WINDOW = 5
"""A step's cost is the median over every run of the WINDOW steps nearest to it (1-5,
48-52, 196-200): one sample per run is at the mercy of one stall on a shared disk."""
VARIANTS = ("keys", "list")


def update(variant: str, i: int) -> Any:
    """Step i of a variant, as issue 13 writes it."""
    data = text(i)
    if variant == "keys":
        return lambda state: {f"k{i}": data}
    return lambda state: {"messages": [*state["messages"], data]}


def initial(variant: str) -> dict[str, Any]:
    return {} if variant == "keys" else {"messages": []}


def workflow(variant: str, clock: StepClock | None = None, steps: int = STEPS) -> ds.Workflow:
    wrap = clock or (lambda fn: fn)
    return ds.Workflow(
        f"grow-{variant}-{steps}",
        [ds.Step(f"s{i:03d}", wrap(update(variant, i))) for i in range(steps)],
    )


def run_ours(variant: str, store: Any, run_id: str) -> dict[str, Any]:
    """One run of the workload on ``store`` as a user runs it: its total and writes."""
    before, t0 = io_counters(), time.perf_counter()
    workflow(variant).run(run_id, store, input=initial(variant))
    return {"total": time.perf_counter() - t0, **written(before, io_counters())}


def step_times(variant: str, store: Any, run_id: str) -> dict[str, Any]:
    """One more run, behind ``Metered``, for the cost of each step. Kept apart from
    ``run_ours`` so that the totals and bytes come from runs without the wrapper."""
    clock, metered = StepClock(), Metered(store)
    t0 = time.perf_counter()
    workflow(variant, clock).run(run_id, metered, input=initial(variant))
    return {
        "metered_total": time.perf_counter() - t0,
        "steps": step_costs(clock, metered.calls, t0),
    }


def ours(variant: str, path: str, repeat: str) -> dict[str, Any]:
    """Worker: ``repeat`` plain runs and as many metered runs on a FileStore at ``path``."""
    with ds.FileStore(path) as store:
        workflow(variant, steps=3).run("warm-up", store, input=initial(variant))
        runs = []
        for r in range(int(repeat)):
            runs.append(run_ours(variant, store, f"{variant}-{r}"))
            runs[-1].update(step_times(variant, store, f"{variant}-{r}-metered"))
    return summary(runs)


def floor(path: str, repeat: str) -> dict[str, Any]:
    """Worker: the run's new data appended step by step, fdatasync after each."""
    runs = []
    for r in range(int(repeat)):
        fd = os.open(Path(path) / f"floor-{r}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        before, t0 = io_counters(), time.perf_counter()
        for i in range(STEPS):
            os.write(fd, text(i).encode())
            os.fdatasync(fd)
        runs.append({"total": time.perf_counter() - t0, **written(before, io_counters())})
        os.close(fd)
    return summary(runs)


def near(n: int) -> range:
    """The 0-based indexes of the WINDOW steps nearest to step n (1-based)."""
    first = min(max(n - 1 - WINDOW // 2, 0), STEPS - WINDOW)
    return range(first, first + WINDOW)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs: of the totals, of each step's cost, of the bytes."""
    keys = [k for k in ("total", "metered_total", "wchar", "write_bytes") if k in runs[0]]
    out: dict[str, Any] = {k: median([r[k] for r in runs]) for k in keys}
    if "steps" in runs[0]:
        out["steps"] = {n: median([r["steps"][i] for r in runs for i in near(n)]) for n in SHOWN}
    out["runs"] = len(runs)
    return out


def growing(table: Table, base: Path, quick: bool) -> None:
    repeat = 1 if quick else 5
    peer_repeat = 1 if quick else 3
    floor_run = worker("growing", "floor", mkdir(base / "grow-floor"), repeat)
    for variant in VARIANTS:
        result = worker("growing", "ours", variant, mkdir(base / f"grow-{variant}"), repeat)
        steps = result["steps"]
        skew = result["metered_total"] / result["total"]
        table.judge(
            "3",
            f"{variant}: FileStore, step 1 / 50 / 200",
            " / ".join(f"{steps[str(n)] * 1000:.2f}" for n in SHOWN) + " ms",
            steps[str(SHOWN[-1])] / steps[str(SHOWN[0])],
            1.5,
            note=f"ratio: step 200 : step 1; each the median of {WINDOW} steps x {repeat} run(s)"
            + (f"; metered runs took {skew:.1f}x the plain ones" if abs(skew - 1) > 0.25 else ""),
        )
        table.judge(
            "3",
            f"{variant}: FileStore, bytes written per run",
            size(result["write_bytes"]),
            result["write_bytes"] / NEW_DATA,
            3.0,
            note=f"vs {size(NEW_DATA)} of new data; write() {size(result['wchar'])}",
        )
        peers = {}
        for peer, label in (
            ("langgraph", "LangGraph SqliteSaver sync"),
            ("dbos", "DBOS on SQLite"),
        ):
            try:
                got = worker("peers", peer, variant, mkdir(base / f"{peer}-{variant}"), peer_repeat)
            except RuntimeError as exc:
                table.add("3", f"{variant}: {label}", "failed", note=str(exc).splitlines()[0][:60])
                continue
            if "missing" in got:
                table.add("3", f"{variant}: {label}", "n/a", note=got["missing"])
                continue
            peers[label] = got["total"]
            table.add(
                "3",
                f"{variant}: {label}, run total",
                ms(got["total"]),
                note=f"wrote {size(got['write_bytes'])}; {got['sqlite']}",
            )
        table.add(
            "3",
            f"{variant}: floor, 200 x append 5 KB + fdatasync",
            ms(floor_run["total"]),
            note=f"wrote {size(floor_run['write_bytes'])}",
        )
        fastest = min(peers, key=peers.__getitem__) if peers else None
        table.judge(
            "3",
            f"{variant}: FileStore, run total",
            ms(result["total"]),
            peers[fastest] / result["total"] if fastest else None,
            3.0,
            at_least=True,
            note=f"faster peer: {fastest}; median of {repeat}" if fastest else "no peer ran",
        )


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


if __name__ == "__main__":
    serve({"ours": ours, "floor": floor})
