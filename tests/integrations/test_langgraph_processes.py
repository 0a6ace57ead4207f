"""LangGraph graphs checkpointed by ``DurableSaver`` in a real process SIGKILLed inside a
node and between supersteps, resumed by another process, on the file store and on
CosmosStore (cosmos-local): each tool's and node's side effect happens once per
finished node -- a tool that finished before the kill is not run again (its write was
kept with the checkpoint), a model answer that was checkpointed is not asked again.
One process holds the three graphs (tests/integrations/lg_graphs.py), one kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ..helpers.waiting import wait_until

pytest.importorskip("langgraph")

import durable_steps as ds
from durable_steps.integrations.langgraph import DurableSaver

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL"),
]

ROOT = Path(__file__).parents[2]


def child(mode: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.lg_graphs", mode],
        cwd=ROOT,
        env={**os.environ, **env},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def log(path: Path, thread: str) -> list[str]:
    file = path / f"{thread}.log"
    return file.read_text().splitlines() if file.exists() else []


def test_graphs_killed_inside_a_node_and_between_supersteps_resume_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The agent killed while its second parallel tool runs resumes with the first
    tool's result kept (run once) and runs the second again; the agent killed right
    after its first superstep's checkpoint does not ask the model again; the review
    killed inside ``publish`` after the person's answer resumes in ``publish`` without
    asking the person again. Each finished node's side effect once."""
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    shared = {**env, "SIDE_EFFECTS": str(tmp_path), "LG_THREADS": prefix}
    node, between, review = (f"{prefix}-{k}" for k in ("node", "between", "review"))
    store = ds.store_from_env(env)  # the test reads what the processes write
    saver = DurableSaver(store)

    def weather_kept() -> bool:
        found = saver.get_tuple({"configurable": {"thread_id": node, "checkpoint_ns": ""}})
        return found is not None and any(
            getattr(w[2][0] if isinstance(w[2], list) else w[2], "tool_call_id", None)
            == "call_weather"
            for w in found.pending_writes or ()
        )

    first = child("crash", shared)
    try:
        wait_until(
            lambda: (
                first.poll() is not None
                or (
                    "blocked:stock" in log(tmp_path, node)
                    and "blocked:between" in log(tmp_path, between)
                    and "blocked:publish" in log(tmp_path, review)
                    and weather_kept()
                )
            ),
            "the three graphs at their kill points",
        )
        assert first.poll() is None, first.communicate()[1]
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.communicate()
    assert first.returncode == -signal.SIGKILL

    second = child("resume", shared)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    store.close()

    answer = "answer: MSFT: 512; Oslo: 3 C"
    assert result["node"][-1] == answer
    assert result["between"][-1] == answer
    assert result["review"]["published"] == "a post about cats (ok)"

    def count(lines: list[str], line: str) -> int:
        return sum(1 for x in lines if x == line)

    killed_in_node = log(tmp_path, node)
    assert count(killed_in_node, "model") == 2  # the question, then the results
    assert count(killed_in_node, "weather:start") == 1  # finished before the kill: kept
    assert count(killed_in_node, "weather:done") == 1
    assert count(killed_in_node, "stock:start") == 2  # killed in it: run again
    assert count(killed_in_node, "stock:done") == 1

    killed_between = log(tmp_path, between)
    assert count(killed_between, "model") == 2  # the first answer was checkpointed
    for tool in ("weather", "stock"):
        assert count(killed_between, f"{tool}:start") == 1
        assert count(killed_between, f"{tool}:done") == 1

    reviewed = log(tmp_path, review)
    assert count(reviewed, "draft") == 1
    assert count(reviewed, "review:ok") == 1  # the person's answer, once
    assert count(reviewed, "publish:start") == 2
    assert count(reviewed, "publish:done") == 1
