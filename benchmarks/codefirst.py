"""Part 17: a decorated step's cost per call, against ``call`` and against DBOS.

``@durable.step`` is the engine's ``call`` plus what the decorator adds: the look for a
running step, the key of the arguments (canonical JSON, hashed), the occurrence count
and the typed result. One step makes ``CALLS`` pairs of calls to a function that
returns a small JSON value (so the call's own machinery and its save show, not the
value), on FileStore: one ``ds.call`` and one call of a decorated function in turn
(which goes first alternates), each timed -- so the two meet the same disk and the same
load, call by call. Target: a
decorated call costs at most 1.1x a ``call`` (the medians of each kind). The same loop
as a DBOS workflow of ``@DBOS.step`` calls on SQLite, in a fresh process -- target: the
decorated step at least 5x faster per call.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import durable_steps as ds
from durable_steps import durable

from .common import Table, dbos_on_sqlite, median, serve, worker

CALLS = 200
INSTALL = "not installed: pip install -e '.[bench]' (scripts/bench does)"


def _tool(n: int) -> dict[str, int]:
    return {"n": n}


@durable.step(name="tool")
def tool(n: int) -> dict[str, int]:
    return {"n": n}


PLAIN: list[float] = []
DECORATED: list[float] = []


def both(state: Any) -> dict[str, Any]:
    """One call of each kind in turn, each timed: the same step, state and disk moment;
    which goes first alternates, so neither always meets the disk right after the other."""
    for n in range(state["calls"]):
        if n % 2:
            DECORATED.append(_timed(tool, n))
            PLAIN.append(_timed(ds.call, "plain", _tool, n))
        else:
            PLAIN.append(_timed(ds.call, "plain", _tool, n))
            DECORATED.append(_timed(tool, n))
    return {"done": True}


def _timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


BOTH = ds.Workflow("bench-codefirst", [ds.Step("both", both)])


def ours(path: str, repeat: str) -> dict[str, Any]:
    """Per-call seconds of ``call`` and of a decorated step, alternated call by call
    (``python -m benchmarks.codefirst ours DIR N``)."""
    with ds.FileStore(Path(path) / "store") as store:
        BOTH.run("warm-up", store, input={"calls": 5})
        PLAIN.clear()
        DECORATED.clear()
        for _ in range(int(repeat)):
            BOTH.run(f"b-{secrets.token_hex(4)}", store, input={"calls": CALLS})
    return {"call": median(PLAIN), "step": median(DECORATED)}


def dbos(path: str, repeat: str) -> dict[str, Any]:
    """The same loop as a DBOS workflow of ``@DBOS.step`` calls on SQLite."""
    try:
        from dbos import DBOS, SetWorkflowID
    except ImportError:
        return {"missing": INSTALL}

    dbos_on_sqlite("bench-codefirst", path)

    @DBOS.step()
    def dbos_tool(n: int) -> dict[str, int]:
        return {"n": n}

    @DBOS.workflow()
    def loop(calls: int) -> int:
        for n in range(calls):
            dbos_tool(n)
        return calls

    DBOS.launch()
    per_call = []
    try:
        with SetWorkflowID("warm-up"):
            loop(5)
        for r in range(int(repeat)):
            t0 = time.perf_counter()
            with SetWorkflowID(f"loop-{r}"):
                loop(CALLS)
            per_call.append((time.perf_counter() - t0) / CALLS)
    finally:
        DBOS.destroy()
    return {"step": median(per_call)}


def codefirst(table: Table, base: Path, quick: bool) -> None:
    repeat = 3 if quick else 9
    (base / "codefirst").mkdir()
    got = worker("codefirst", "ours", base / "codefirst", repeat)
    call, step = got["call"], got["step"]
    table.judge(
        "17",
        f"a @durable.step call : a call() on FileStore ({CALLS} per step)",
        f"{step * 1e6:.0f} µs : {call * 1e6:.0f} µs",
        step / call,
        1.1,
        note="medians per call, the two alternated call by call in one step",
    )
    (base / "codefirst-dbos").mkdir()
    peer = worker("codefirst", "dbos", base / "codefirst-dbos", repeat)
    if "missing" in peer:
        table.add("17", "@DBOS.step (SQLite), per call", "-", note=peer["missing"])
        return
    theirs = peer["step"]
    table.add("17", "@DBOS.step (SQLite), per call", f"{theirs * 1e6:.0f} µs")
    table.judge(
        "17",
        "a @durable.step call faster than a @DBOS.step call",
        f"{theirs / step:.2f}x",
        theirs / step,
        5.0,
        at_least=True,
        note="each in its own fresh process, same loop",
    )


if __name__ == "__main__":
    serve({"ours": ours, "dbos": dbos})
