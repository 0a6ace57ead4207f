"""Durable calls against real process death: an agent loop (a scripted model asking for
3 to 10 rounds of tools) in a child process, SIGKILLed after k of its model and tool
calls for many k, then resumed in a fresh process -- on the file store and on
CosmosStore (cosmos-local), under run, run_async, and with gathered calls."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers import agent_child
from ..helpers.waiting import wait_until

CHILD = agent_child.__file__


def spawn(env: dict[str, str], effects: Path, mode: str, run_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, mode, run_id],
        env={**os.environ, **env, "SIDE_EFFECTS": str(effects)},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def effects_of(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [(int(i), name) for i, name in (line.split() for line in lines if line.count(" ") == 1)]


def uninterrupted(mode: str, run_id: str) -> dict[str, Any]:
    """What the same run returns when nothing kills it (in memory, in this process)."""
    w = agent_child.workflow(mode)
    if mode == "sync":
        return w.run(run_id, ds.MemoryStore(), input={"question": "why?"})
    return asyncio.run(w.run_async(run_id, ds.AsyncMemoryStore(), input={"question": "why?"}))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async", "gather"])
def test_a_killed_agent_resumes_without_repeating_a_recorded_call(
    env: dict[str, str], tmp_path: Path, mode: str, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For six k: the agent is SIGKILLed once k of its calls have run; a fresh process
    resumes it. No call recorded before the kill runs again (at most the one in flight
    does), every call ran, and the final state equals an uninterrupted run's."""
    monkeypatch.setenv("SIDE_EFFECTS", str(tmp_path / "uninterrupted"))
    store = ds.store_from_env(env)
    rng = random.Random(run_id)
    for n in range(6):
        rid = f"{run_id}-{n}"
        expected = uninterrupted(mode, rid)
        total = 1 + sum(1 + 1 + r % 2 for r in range(agent_child.rounds(rid)))
        k = rng.randrange(1, total)
        effects = tmp_path / f"effects-{n}"
        child = spawn(env, effects, mode, rid)

        def killable(effects: Path = effects, k: int = k, child: Any = child) -> bool:
            return len(effects_of(effects)) >= k or child.poll() is not None

        wait_until(killable, f"{k} calls")
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        cp = store.load(rid)
        assert cp is not None and cp.status in ("running", "completed"), (k, cp)
        before = Counter(i for i, _ in effects_of(effects))
        # (the kill may come after the last call: then the run has completed)
        recorded = set(before) if cp.done else {r["i"] for r in cp.calls if "result" in r}
        resumed = spawn(env, effects, mode, rid)
        out, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        final = json.loads(out)
        assert final["answer"] == expected["answer"] and final["messages"] == expected["messages"]
        ran = Counter(i for i, _ in effects_of(effects))
        assert all(ran[i] == before[i] for i in recorded), (k, recorded, ran)  # not again
        assert set(ran) == set(range(total)), (k, ran)  # every call ran
        assert max(ran.values()) <= 2, (k, ran)  # only what was in flight ran twice
        assert store.load(rid).calls == ()  # the step completed: its records dropped
    store.close()


def test_memory_store_agent_interrupted_resumes_from_its_records(run_id: str) -> None:
    """The memory store cannot outlive a process: an exception after k calls stands in
    for the kill. The resumed run makes only the calls not recorded."""
    store = ds.MemoryStore()
    made: list[int] = []
    stop_at = [5]

    def model(messages: list[Any]) -> dict[str, Any]:
        made.append(ds.current_step().call[0])  # type: ignore[index]
        if len(made) == stop_at[0]:
            raise KeyboardInterrupt  # the process dies in the middle of the loop
        asks = len(messages) < 7
        return {"tool_calls": [len(messages)] if asks else [], "content": len(messages)}

    def tool(n: int) -> int:
        made.append(ds.current_step().call[0])  # type: ignore[index]
        return n * 10

    def agent(state: Any) -> dict[str, Any]:
        messages: list[Any] = ["q"]
        while True:
            reply = ds.call("llm", model, messages)
            if not reply["tool_calls"]:
                return {"answer": reply["content"]}
            messages.append(reply)
            messages.extend(ds.call("tool", tool, t) for t in reply["tool_calls"])

    steps = [ds.Step("agent", agent)]
    with pytest.raises(KeyboardInterrupt):
        ds.run(run_id, steps, store)
    assert made == [0, 1, 2, 3, 4]
    cp = store.load(run_id)
    assert cp is not None and [r["i"] for r in cp.calls] == [0, 1, 2, 3]
    stop_at[0] = 0
    assert ds.run(run_id, steps, store) == {"answer": 7}
    assert made == [0, 1, 2, 3, 4, 4, 5, 6]
