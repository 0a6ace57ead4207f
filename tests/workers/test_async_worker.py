"""The asyncio worker (issue 31 items 1, 2): async workflows as tasks on the worker's
event loop beside sync ones in threads, and a stop that takes effect at a run's next
call -- real worker processes on file and cosmos-local, and the loop in-process on a
MemoryStore."""

from __future__ import annotations

import signal
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.workers.loop import serve

from ..helpers.waiting import wait_until
from ..helpers.worker_process import stderr_of, worker, workers_die_with_their_test  # noqa: F401

FLOWS = textwrap.dedent(
    """
    import asyncio, os, threading, time
    import durable_steps as ds

    def note(line):
        with open(os.environ["EFFECTS"], "a") as f:
            f.write(line + "\\n")

    def released():
        return os.path.exists(os.environ["RELEASE"])

    async def model(run_id, i):
        note(f"{run_id}:call:{i}:{threading.get_ident()}")
        while i == int(os.environ.get("HOLD_AT", "-1")) and not released():
            await asyncio.sleep(0.01)  # a model call in flight: the loop runs the others
        return i

    def tool(run_id, i):
        note(f"{run_id}:call:{i}:{threading.get_ident()}")
        while i == int(os.environ.get("HOLD_AT", "-1")) and not released():
            time.sleep(0.01)
        return i

    async def agent(state):
        run_id = ds.current_step().run_id
        got = [await ds.call_async("llm", model, run_id, i) for i in range(15)]
        return {"got": got}

    def plain(state):
        run_id = ds.current_step().run_id
        return {"got": [ds.call("tool", tool, run_id, i) for i in range(15)]}

    AGENT = ds.Workflow("agent", [ds.Step("agent", agent)])
    PLAIN = ds.Workflow("plain", [ds.Step("plain", plain)])
    WORKFLOWS = [AGENT, PLAIN]
    ASK = ds.Workflow(
        "ask", [ds.Step("ask", lambda s: {"ok": ds.wait_for_signal("ok")})], timeout=1.0
    )
    """
)


@pytest.fixture
def env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    (tmp_path / "flows.py").write_text(FLOWS)
    effects, release = tmp_path / "effects", tmp_path / "release"
    return {"EFFECTS": str(effects), "RELEASE": str(release), **env}


def effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "effects"
    return path.read_text().split() if path.exists() else []


def test_one_worker_runs_async_runs_on_its_loop_and_sync_runs_beside_them(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """`worker flows:WORKFLOWS` serves both kinds: twenty async runs are in their model
    call at once, all on one thread (the worker's event loop), while a sync run runs in
    a thread of its own; released, every run completes with its calls made once."""
    store = ds.store_from_env(env)
    agents = [f"{run_id}-a{i}" for i in range(20)]
    for rid in agents:
        ds.Workflow("agent", []).start(rid, store)  # by name, as `runs start` does
    ds.Workflow("plain", []).start(f"{run_id}-p", store)
    proc = worker(env, tmp_path, "flows:WORKFLOWS", "--concurrency", "30", HOLD_AT="0")

    def in_call() -> set[str]:
        return {line.split(":")[0] for line in effects(tmp_path)}

    wait_until(lambda: len(in_call()) == 21, "every run in its first call at once")
    threads = {line.split(":")[3] for line in effects(tmp_path) if line.split(":")[0] in agents}
    assert len(threads) == 1  # the event loop's thread: no thread per async run
    (sync_thread,) = {
        line.split(":")[3] for line in effects(tmp_path) if line.startswith(f"{run_id}-p:")
    }
    assert sync_thread not in threads
    (tmp_path / "release").touch()
    for rid in [*agents, f"{run_id}-p"]:
        wait_until(lambda rid=rid: store.load(rid).status == "completed", f"run {rid}")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert store.load(agents[0]).state == {"got": list(range(15))}
    calls = [line.rsplit(":", 1)[0] for line in effects(tmp_path)]
    assert len(calls) == len(set(calls)) == 21 * 15  # no call made twice
    assert out.count("completed") == 21


@pytest.mark.parametrize("workflow", ["agent", "plain"])
def test_sigterm_stops_a_run_at_its_next_call_and_keeps_what_it_recorded(
    env: dict[str, str], tmp_path: Path, run_id: str, workflow: str
) -> None:
    """SIGTERM while a step of fifteen calls is in its third: that call finishes and is
    recorded, the fourth never starts, the lease is released and the worker exits 0 --
    within one call, not at the step's end. The next worker replays the three recorded
    calls and makes the other twelve, each once."""
    store = ds.store_from_env(env)
    ds.Workflow(workflow, []).start(run_id, store)
    proc = worker(env, tmp_path, "flows:WORKFLOWS", "--interval", "0.2", HOLD_AT="2")
    wait_until(lambda: len(effects(tmp_path)) == 3, "the third call")
    proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "SIGTERM: stopping" in stderr_of(tmp_path), "the worker to see it")
    (tmp_path / "release").touch()
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert f"run {run_id}: released at its next call (stopping)" in out
    assert [line.split(":")[2] for line in effects(tmp_path)] == ["0", "1", "2"]
    cp = store.load(run_id)
    assert (cp.status, cp.step, cp.owner, cp.lease_expires) == ("running", -1, None, None)
    assert [r["result"] for r in cp.calls] == [0, 1, 2]  # what was recorded stays
    again = worker(env, tmp_path, "flows:WORKFLOWS", "--once")
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, stderr_of(tmp_path)
    assert f"run {run_id} ({workflow}): completed" in out
    assert [int(line.split(":")[2]) for line in effects(tmp_path)] == list(range(15))
    assert store.load(run_id).state == {"got": list(range(15))}


def test_the_loop_serves_both_kinds_and_stops_at_the_next_call_on_a_memory_store(
    run_id: str,
) -> None:
    """In one process on a MemoryStore: an async and a sync run in the same loop; the
    stop event stops each at its next call, their leases released, their records kept."""
    gate, entered = threading.Event(), threading.Semaphore(0)
    made: list[str] = []

    async def slow_async(i: int) -> int:
        made.append(f"a{i}")
        entered.release()
        while not gate.is_set():
            await __import__("asyncio").sleep(0.01)
        return i

    def slow_sync(i: int) -> int:
        made.append(f"s{i}")
        entered.release()
        gate.wait(60)
        return i

    async def agent(state: Any) -> dict[str, Any]:
        return {"got": [await ds.call_async("llm", slow_async, i) for i in range(5)]}

    def plain(state: Any) -> dict[str, Any]:
        return {"got": [ds.call("tool", slow_sync, i) for i in range(5)]}

    workflows = [
        ds.Workflow("agent", [ds.Step("a", agent)]),
        ds.Workflow("plain", [ds.Step("p", plain)]),
    ]
    store = ds.MemoryStore()
    for w in workflows:
        w.start(f"{run_id}-{w.name}", store)
    stop, lines = threading.Event(), []
    options: dict[str, Any] = {"once": False, "concurrency": 4, "interval": 0.2}
    options |= {"lease": 60.0, "owner": None, "echo": lines.append, "stop": stop}
    serving = threading.Thread(target=serve, args=(store, workflows), kwargs=options)
    serving.start()
    try:
        for _ in range(2):
            assert entered.acquire(timeout=60)  # both in their first call
        stop.set()
    finally:
        gate.set()
        serving.join(60)
    assert sorted(made) == ["a0", "s0"]
    for w in workflows:
        cp = store.load(f"{run_id}-{w.name}")
        assert (cp.owner, len(cp.calls), cp.status) == (None, 1, "running")
    assert sorted(lines) == sorted(
        f"run {run_id}-{n}: released at its next call (stopping)" for n in ("agent", "plain")
    )


def test_the_worker_cancels_a_waiting_run_at_its_deadline(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """A run of a workflow with timeout=1 s, started by name (no deadline yet): the
    worker's claim fixes its deadline, the run waits for a signal that never comes, and
    the worker's look finds it past its deadline and cancels it (reason deadline)."""
    store = ds.store_from_env(env)
    ds.Workflow("ask", []).start(run_id, store)
    proc = worker(env, tmp_path, "flows:ASK", "--interval", "0.2")
    wait_until(lambda: store.load(run_id).status == "cancelled", "the deadline")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    cp = store.load(run_id)
    assert (cp.cancel_reason, cp.owner) == ("deadline", None)
    assert out.splitlines()[0].startswith(f"run {run_id} (ask): waiting")
    assert out.splitlines()[-1].startswith(f"run {run_id} (ask): cancelled")
