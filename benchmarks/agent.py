"""Part 8: the agent loop, and handing runs to workers.

The loop (DESIGN, "Performance"): one step making ``CALLS`` durable calls, each
returning 2 KB -- what an agent's model and tool calls record. The cost of a call is
the time from the start of one call's function to the start of the next: the call's
record saved (``call``), and the loop's own work. Judged at calls 1, 250 and 500
(each the median of the 5 calls around it, over the runs): against a trivial step on
FileStore measured in the same rounds (target ≤ 2x), flat (call 500 ≤ 1.5x call 1),
and against the same loop as a DBOS workflow whose calls are ``@DBOS.step``s on
SQLite, in a fresh process (target: ours ≥ 3x faster per call).

Pickup: ``durable-steps worker --interval 0.5`` in its own process; a run started
with ``Workflow.start``; the time until its step runs in the worker (the step
records when) -- target: within the interval. And a run whose step sleeps 0.5 s:
the time from its recorded wake time until the step runs again -- target: within
one interval of the wake time.
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import ROOT, StepClock, Table, dbos_on_sqlite, median, ms, serve, text, worker
from .floors import TRIVIAL_STEPS, timed_run

CALLS = 500
RESULT = 2048
AT = (1, 250, 500)
INTERVAL = 0.5
INSTALL = "not installed: pip install -e '.[bench]' (scripts/bench does)"


def per_call(starts: list[float]) -> dict[int, float]:
    """The cost of calls 1, 250 and 500 (1-based): the median of the 5 around each."""
    costs = [b - a for a, b in itertools.pairwise(starts)]
    out = {}
    for n in AT:
        i = min(max(n - 3, 0), len(costs) - 5)
        out[n] = median(costs[i : i + 5])
    return out


def ours(path: str, repeat: str) -> dict[str, Any]:
    """The loop on FileStore, with trivial steps in the same rounds (``python -m
    benchmarks.agent ours DIR N``)."""
    starts: list[float] = []
    results = [text(n, RESULT) for n in range(CALLS + 1)]

    def result(n: int) -> str:
        starts.append(time.perf_counter())
        return results[n]

    def agent(state: Any) -> dict[str, Any]:
        for n in range(CALLS + 1):  # the last one only marks when call 500 ended
            ds.call("tool", result, n)
        return {"calls": CALLS}

    clock = StepClock()
    trivial = [
        ds.Step(f"s{i:02d}", clock(lambda state, i=i: {"note": text(i, 1024)}))
        for i in range(TRIVIAL_STEPS)
    ]
    runs: list[dict[int, float]] = []
    steps: list[float] = []
    with ds.FileStore(Path(path) / "store") as store:
        ds.run("warm-up", [ds.Step("agent", agent)], store)
        for _ in range(int(repeat)):
            starts.clear()
            ds.run(f"a-{secrets.token_hex(4)}", [ds.Step("agent", agent)], store)
            runs.append(per_call(starts))
            steps.append(median(timed_run(clock, trivial, store)[0]))
    return {
        "calls": {n: median([r[n] for r in runs]) for n in AT},
        "trivial": median(steps),
    }


def dbos(path: str, repeat: str) -> dict[str, Any]:
    """The same loop as a DBOS workflow of ``@DBOS.step`` calls on SQLite."""
    try:
        from dbos import DBOS, SetWorkflowID
    except ImportError:
        return {"missing": INSTALL}

    dbos_on_sqlite("bench-agent", path)
    starts: list[float] = []
    results = [text(n, RESULT) for n in range(CALLS + 1)]

    @DBOS.step()
    def tool(n: int) -> str:
        starts.append(time.perf_counter())
        return results[n]

    @DBOS.workflow()
    def agent(calls: int) -> int:
        for n in range(calls + 1):
            tool(n)
        return calls

    DBOS.launch()
    runs = []
    try:
        with SetWorkflowID("warm-up"):
            agent(5)
        for r in range(int(repeat)):
            starts.clear()
            with SetWorkflowID(f"agent-{r}"):
                agent(CALLS)
            runs.append(per_call(starts))
    finally:
        DBOS.destroy()
    return {"calls": {n: median([r[n] for r in runs]) for n in AT}}


def loop(table: Table, base: Path, quick: bool) -> None:
    repeat = 2 if quick else 5
    (base / "agent").mkdir()
    got = worker("agent", "ours", base / "agent", repeat)
    calls = {int(n): v for n, v in got["calls"].items()}
    trivial = got["trivial"]
    shown = " / ".join(ms(calls[n]) for n in AT)
    table.judge(
        "8",
        f"agent loop on FileStore: a call at 1 / 250 / 500 of {CALLS} (2 KB each)",
        shown,
        max(calls.values()) / trivial,
        2.0,
        note=f"ratio: the dearest of the three : a trivial step in the same rounds ({ms(trivial)})",
    )
    table.judge(
        "8",
        "agent loop on FileStore: call 500 : call 1",
        f"{calls[500] / calls[1]:.2f}x",
        calls[500] / calls[1],
        1.5,
        note="flat: a call costs its result, not the calls before it",
    )
    (base / "agent-dbos").mkdir()
    peer = worker("agent", "dbos", base / "agent-dbos", repeat)
    if "missing" in peer:
        table.add("8", "agent loop on DBOS (SQLite), per call", "-", note=peer["missing"])
        return
    theirs = {int(n): v for n, v in peer["calls"].items()}
    table.add(
        "8",
        "agent loop on DBOS @DBOS.step (SQLite), call 1 / 250 / 500",
        " / ".join(ms(theirs[n]) for n in AT),
    )
    ratio = median(list(theirs.values())) / median(list(calls.values()))
    table.judge(
        "8",
        "agent loop: durable-steps faster per call than DBOS",
        f"{ratio:.2f}x",
        ratio,
        3.0,
        at_least=True,
        note="medians of the three points, each side",
    )


def pickup(table: Table, base: Path, quick: bool) -> None:
    """The worker in its own process picks up a started run, and a due timer."""
    flows = base / "pickup"
    flows.mkdir()
    (flows / "flows.py").write_text(
        "import time\n"
        "import durable_steps as ds\n"
        "def nap(state):\n"
        "    if state.get('nap'):\n"
        "        ds.sleep(state['nap'])\n"
        "    return {'at': time.time()}\n"
        "NAP = ds.Workflow('nap', [ds.Step('nap', nap)])\n"
    )
    env = {**os.environ, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(flows / "store")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    script = str(Path(sys.executable).with_name("durable-steps"))
    proc = subprocess.Popen(
        [script, "worker", "flows:NAP", "--interval", str(INTERVAL)],
        cwd=flows,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started: list[float] = []
    timers: list[float] = []
    try:
        with ds.FileStore(flows / "store") as store:
            nap = ds.Workflow("nap", [])
            rng = random.Random(8)
            for n in range(3 if quick else 10):
                time.sleep(rng.uniform(0, INTERVAL))  # at any point of the worker's cycle
                t0 = time.time()
                nap.start(f"p{n}", store, input={})
                state = ds.wait_for_result(store, f"p{n}", timeout=60, interval=0.01)
                started.append(state["at"] - t0)  # when its step ran, in the worker
            for n in range(2 if quick else 5):
                nap.start(f"t{n}", store, input={"nap": 0.5})
                wake = _asleep_until(store, f"t{n}")
                state = ds.wait_for_result(store, f"t{n}", timeout=60, interval=0.01)
                timers.append(state["at"] - wake)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    worst = max(started)
    table.judge(
        "8",
        f"worker picks up a started run (--interval {INTERVAL})",
        f"{ms(median(started))} median, {ms(worst)} worst",
        worst / INTERVAL,
        1.0,
        note=f"ratio: the worst of {len(started)}, started at random moments, : the interval",
    )
    table.judge(
        "8",
        "worker resumes a due timer (sleep 0.5 s)",
        f"{ms(median(timers))} median, {ms(max(timers))} worst after its wake time",
        max(timers) / INTERVAL,
        1.0,
        note="ratio: the worst : the interval (the worker wakes for a timer it knows)",
    )


def _asleep_until(store: Any, run_id: str) -> float:
    """The wake time of a run once the worker has put it to sleep."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = store.run_info(run_id)
        if info is not None and info.status == "waiting" and info.wake_at is not None:
            return float(info.wake_at)
        time.sleep(0.005)
    raise RuntimeError(f"run {run_id} never went to sleep")


if __name__ == "__main__":
    serve({"ours": ours, "dbos": dbos})
