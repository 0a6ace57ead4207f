"""The peers on the growing workload (part 3), each in a fresh process.

- LangGraph: a ``StateGraph`` of 200 nodes in a chain, node i being step i of the
  variant (the same function durable-steps runs), compiled with ``SqliteSaver`` and
  invoked with ``durability="sync"``: after every node LangGraph writes the node's
  pending writes and then a new checkpoint (all channel values) to SQLite, and
  waits for each commit. The ``keys`` variant declares the 200 keys as channels;
  the ``list`` variant has one ``messages`` channel that each node replaces.
- DBOS: a ``@DBOS.workflow`` that calls a ``@DBOS.step`` 200 times, merging each
  step's returned update into its state; DBOS records each step's output (the
  update: 5 KB for ``keys``, the whole list for ``list``) as a row in its SQLite
  system database, one transaction per step, and the workflow's input and output.

Each worker reports medians over its runs, after one short warm-up run, and the
SQLite settings it actually ran with (journal mode, synchronous).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, TypedDict

from .common import dbos_on_sqlite, io_counters, serve, written
from .growing import STEPS, initial, summary, update

INSTALL = "not installed: pip install -e '.[bench]' (scripts/bench does)"


def langgraph(variant: str, path: str, repeat: str) -> dict[str, Any]:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        return {"missing": INSTALL}

    class Messages(TypedDict):
        messages: list[str]

    # The keys variant's channels are its 200 keys, declared as LangGraph requires.
    keys = TypedDict("Keys", {f"k{i}": str for i in range(STEPS)}, total=False)  # type: ignore[misc]
    schema = keys if variant == "keys" else Messages

    def graph(steps: int) -> Any:
        g = StateGraph(schema)
        names = [f"s{i:03d}" for i in range(steps)]
        for i, name in enumerate(names):
            g.add_node(name, update(variant, i))
        for a, b in zip([START, *names], [*names, END], strict=True):
            g.add_edge(a, b)
        return g.compile(checkpointer=SqliteSaver(conn))

    conn = sqlite3.connect(Path(path) / "langgraph.sqlite", check_same_thread=False)
    warm, app = graph(3), graph(STEPS)

    def invoke(app: Any, thread: str) -> None:
        config = {"configurable": {"thread_id": thread}, "recursion_limit": STEPS + 10}
        app.invoke(initial(variant), config, durability="sync")

    invoke(warm, "warm-up")
    runs = []
    for r in range(int(repeat)):
        before, t0 = io_counters(), time.perf_counter()
        invoke(app, f"{variant}-{r}")
        runs.append({"total": time.perf_counter() - t0, **written(before, io_counters())})
    out = summary(runs)
    out["sqlite"] = settings(conn)
    conn.close()
    return out


def dbos(variant: str, path: str, repeat: str) -> dict[str, Any]:
    try:
        from dbos import DBOS, SetWorkflowID
    except ImportError:
        return {"missing": INSTALL}

    database = Path(path) / "dbos.sqlite"
    dbos_on_sqlite("bench", path)
    updates = [update(variant, i) for i in range(STEPS)]

    @DBOS.step()
    def step(i: int, state: dict[str, Any]) -> Any:
        return updates[i](state)

    @DBOS.workflow()
    def grow(start: dict[str, Any], steps: int) -> dict[str, Any]:
        state = dict(start)
        for i in range(steps):
            state.update(step(i, state))
        return state

    DBOS.launch()
    try:
        with SetWorkflowID("warm-up"):
            grow(initial(variant), 3)
        runs = []
        for r in range(int(repeat)):
            before, t0 = io_counters(), time.perf_counter()
            with SetWorkflowID(f"{variant}-{r}"):
                grow(initial(variant), STEPS)
            runs.append({"total": time.perf_counter() - t0, **written(before, io_counters())})
    finally:
        DBOS.destroy()
    out = summary(runs)
    with sqlite3.connect(database) as conn:  # journal mode is a property of the file
        out["sqlite"] = settings(conn)
    return out


def settings(conn: sqlite3.Connection) -> str:
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
        conn.execute("PRAGMA synchronous").fetchone()[0]
    ]
    return f"journal_mode={mode}, synchronous={sync}"


if __name__ == "__main__":
    serve({"langgraph": langgraph, "dbos": dbos})
