"""Part 15's pickup: how long an idle worker takes to act on what happened on the same
machine -- a started run, a signal to a waiting run, a child's end to its waiting parent
-- p50 and p99, with DBOS's queue (SQLite) beside it.

One ``durable-steps worker`` process (the default ``--interval`` of 1 s), idle between
samples; each sample comes at a random moment of its cycle. On FileStore a save that
makes a run takeable wakes the worker (``workers/wakeups``): the target is p50 <= 20 ms,
p99 <= 100 ms, whatever the interval. On cosmos-local the worker polls (nothing tells
it): its p50/p99 are reported, bound by the interval. DBOS: one process dequeuing from
one queue (``polling_interval_sec=1.0``), a ``DBOSClient`` enqueuing; the time from the
enqueue to its step.
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import ROOT, Table, ms
from .fleet_runs import RESULTS, Measured, _client_when_ready, _processes, cosmos_env

FLOWS = (
    "import time\n"
    "import durable_steps as ds\n"
    "def began(state):\n"
    "    return {'began': time.time()}\n"
    "def signalled(state):\n"
    "    ds.wait_for_signal('go')\n"
    "    return {'began': time.time()}\n"
    "def kid(state):\n"
    "    ds.wait_for_signal('go')\n"
    "    return {'end': time.time()}\n"
    "def parent(state):\n"
    "    ds.start_child('kid', state['id'] + '.c')\n"
    "    end = ds.await_child(state['id'] + '.c')['end']\n"
    "    return {'began': time.time(), 'end': end}\n"
    "FLOWS = [ds.Workflow(n, [ds.Step('s', f)]) for n, f in\n"
    "         [('began', began), ('signalled', signalled), ('kid', kid), ('parent', parent)]]\n"
)
STARTED, SIGNALLED = ds.Workflow("began", []), ds.Workflow("signalled", [])


def _pause(rng: random.Random) -> None:
    time.sleep(rng.uniform(0.0, 1.0))  # at any point of the worker's cycle


def _waiting(store: ds.Store, run_id: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = store.run_info(run_id)
        if info is not None and info.status == "waiting":
            return
        time.sleep(0.005)
    raise RuntimeError(f"run {run_id} never waited")


def _result(store: ds.Store, run_id: str) -> dict[str, Any]:
    return ds.wait_for_result(store, run_id, timeout=120, interval=0.005)


def samples(env: dict[str, str], base: Path, n: int, *, signals: bool) -> dict[str, list[float]]:
    """Pickup latencies of n started runs (and, with ``signals``, of n signals and n
    children's ends) through one idle worker on the store of ``env``."""
    base.mkdir(parents=True)
    (base / "flows.py").write_text(FLOWS)
    script = str(Path(sys.executable).with_name("durable-steps"))
    command = [script, "worker", "flows:FLOWS", "--interval", "1"]
    rng = random.Random(15)
    out: dict[str, list[float]] = {"start": [], "signal": [], "child": []}
    with ds.store_from_env(env) as store:
        store.load("warm")
        with _processes([command], base, env) as lines:
            for i in itertools.count():  # warm: the worker has run two
                if lines[0] >= 2:
                    break
                STARTED.start(f"warm-{i}", store)
                _result(store, f"warm-{i}")
            for i in range(n):
                _pause(rng)
                t0 = time.time()
                STARTED.start(f"s{i}", store)
                out["start"].append(_result(store, f"s{i}")["began"] - t0)
            if not signals:
                return out
            for i in range(n):
                SIGNALLED.start(f"g{i}", store)
                _waiting(store, f"g{i}")
                _pause(rng)
                t0 = time.time()
                ds.send_signal(store, f"g{i}", "go")
                out["signal"].append(_result(store, f"g{i}")["began"] - t0)
            parent = ds.Workflow("parent", [])
            for i in range(n):
                parent.start(f"p{i}", store, input={"id": f"p{i}"})
                _waiting(store, f"p{i}")
                _waiting(store, f"p{i}.c")
                _pause(rng)
                ds.send_signal(store, f"p{i}.c", "go")
                state = _result(store, f"p{i}")
                out["child"].append(state["began"] - state["end"])
    return out


WHAT = {
    "start": "a started run to its step",
    "signal": "a signal to its waiting run's step",
    "child": "a child's end to its waiting parent's step",
}


def file_pickup(table: Table, base: Path, quick: bool) -> None:
    path = base / "fleet-pickup"
    env = {**os.environ, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path / "store")}
    n = 5 if quick else 40
    got = samples(env, path, n, signals=True)
    for kind, values in got.items():
        m = _kept(f"pickup-file-{kind}", values)
        p50, p99 = m.pickup(0.5), m.pickup(0.99)
        table.verdict(
            "15",
            f"pickup on FileStore: {WHAT[kind]} (1 idle worker)",
            _p50_p99(m),
            "p50 ≤ 20 ms, p99 ≤ 100 ms",
            p50 <= 0.020 and p99 <= 0.100,
            note=f"{n} samples at random moments; --interval 1 s (the wake-up, not the poll)",
        )


def cosmos_pickup(table: Table, endpoint: str, base: Path, quick: bool) -> None:
    env = cosmos_env(endpoint, "pickup")
    n = 5 if quick else 20
    m = _kept(
        "pickup-cosmos-start", samples(env, base / "fleet-pickup-cosmos", n, signals=False)["start"]
    )
    table.add(
        "15",
        "pickup on cosmos-local: a started run to its step (1 idle worker)",
        _p50_p99(m),
        note=f"{n} samples at random moments; the poll (--interval 1 s): no local wake-up",
    )


def _kept(name: str, values: list[float]) -> Measured:
    """Pickup latencies, kept for the fleet table."""
    RESULTS[name] = m = Measured(len(values), 1, 1.0, 0.0, 0, values)
    return m


def _p50_p99(m: Measured) -> str:
    return f"p50 {ms(m.pickup(0.5))}, p99 {ms(m.pickup(0.99))}"


def dbos_pickup(table: Table, base: Path, quick: bool) -> None:
    try:
        import dbos  # noqa: F401
    except ImportError:
        table.add("15", "pickup on DBOS", "-", note="dbos not installed: scripts/bench installs it")
        return
    path = base / "fleet-pickup-dbos"
    path.mkdir()
    command = [sys.executable, "-m", "benchmarks.fleet_runs", "dbos-worker", str(path)]
    n = 5 if quick else 20
    rng = random.Random(15)
    values: list[float] = []
    with _processes([command], ROOT, dict(os.environ)):
        client = _client_when_ready(f"sqlite:///{path / 'dbos.sqlite'}")
        try:
            options: Any = {"queue_name": "fleet", "workflow_name": "trivial"}
            for i in range(n):
                _pause(rng)
                t0 = time.time()
                out = client.enqueue({**options, "workflow_id": f"p{i}"}, t0).get_result()
                values.append(out["began"] - t0)
        finally:
            client.destroy()
    table.add(
        "15",
        "pickup on DBOS queues (SQLite): an enqueued run to its step (1 idle process)",
        _p50_p99(_kept("pickup-dbos-start", values)),
        note=f"{n} samples at random moments; polling_interval_sec 1.0",
    )
