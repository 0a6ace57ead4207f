"""``Runner.run_streamed`` inside a step: the caller gets the model's events live, the
run stream gets one chunk per text delta and per finished tool call, each response is
recorded as one call when complete (replayed as one ``response.completed`` event), and
a crash mid-stream leaves a ``StreamReset`` before the chunks of the response asked
again. The model streams like the Responses API (text deltas, items done, completed)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from openai.types.responses import ResponseTextDeltaEvent

import durable_steps as ds

from . import openai_runs as runs
from .conftest import Crash


def streamed_agent() -> Agent[Any]:
    return runs.streamed_agent()


DELTAS: list[str] = []


async def streaming_step(state: Any) -> dict[str, Any]:
    result = Runner.run_streamed(streamed_agent(), "go")
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            DELTAS.append(event.data.delta)
    return {"output": result.final_output, "agent": result.last_agent.name}


def chunks(store: ds.AsyncMemoryStore, run_id: str) -> list[Any]:
    return [c for _, c in ds.read_stream(store.sync, run_id, "model", follow=False)]


def test_a_streamed_run_is_live_written_and_recorded(run_id: str, openai_effects: Any) -> None:
    """The caller sees each text delta as it comes; the run stream has one chunk per
    delta and per tool call the model finished (parallel calls by their ids); every
    model response and tool call is recorded once; the result names the caller's agent."""
    store = ds.AsyncMemoryStore()
    DELTAS.clear()
    state = asyncio.run(ds.run_async(run_id, [ds.Step("agent", streaming_step)], store))
    assert state == {"output": runs.TOOLS_OUTPUT, "agent": "calc"}
    assert "".join(DELTAS).strip() == runs.TOOLS_OUTPUT
    written = chunks(store, run_id)
    calls = [c["tool_call"] for c in written if "tool_call" in c]
    assert [(c["tool"], c["id"]) for c in calls] == [
        ("add", "call-1"), ("get_weather", "call-2"), ("add", "call-3"), ("add", "call-4"),
    ]  # fmt: skip
    assert "".join(c["text"] for c in written if "text" in c).strip() == runs.TOOLS_OUTPUT
    seen = Counter(runs.EFFECTS.seen)
    assert seen["model.get_response"] == 3
    assert seen["tool.add"] == 3 and seen["tool.get_weather"] == 1


def test_a_crash_mid_stream_resets_the_stream_and_replays_what_was_recorded(
    run_id: str, openai_effects: Any
) -> None:
    """Crashed at the answer's third word: the two tool rounds were recorded and are not
    asked again (their responses replayed as one event each); the answer is asked again,
    its stream marked with a StreamReset before its chunks come again."""
    store = ds.AsyncMemoryStore()
    k = 7 + 2  # 3 model streams and 4 tool calls before the answer: its 3rd word
    openai_effects(at=k)
    with pytest.raises(Crash):
        asyncio.run(ds.run_async(run_id, [ds.Step("agent", streaming_step)], store))
    before = chunks(store, run_id)
    assert [c for c in before if "text" in c]  # the answer had begun to stream
    again = openai_effects()
    DELTAS.clear()
    state = asyncio.run(ds.run_async(run_id, [ds.Step("agent", streaming_step)], store))
    assert state == {"output": runs.TOOLS_OUTPUT, "agent": "calc"}
    assert Counter(again.seen)["model.get_response"] == 1  # the answer alone
    assert not any(e.startswith("tool.") for e in again.seen)
    assert "".join(DELTAS).strip() == runs.TOOLS_OUTPUT  # the answer, live again
    items = chunks(store, run_id)
    resets = [i for i, c in enumerate(items) if isinstance(c, ds.StreamReset)]
    assert len(resets) == 1
    after = items[resets[0] + 1 :]
    assert "".join(c["text"] for c in after if "text" in c).strip() == runs.TOOLS_OUTPUT


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX fork and SIGKILL")
def test_a_process_killed_mid_stream_resumes_in_another(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """SIGKILLed at the answer's third word (a real process, file store and cosmos-local):
    another process resumes the run, asks the model for the answer alone, runs no tool
    again, and the stream holds a StreamReset before the answer's chunks, whole."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.openai_runs", "async", "streamed", run_id],
        cwd=Path(__file__).parents[2],
        env={**os.environ, **env, "SIDE_EFFECTS": str(tmp_path), "KILL_AT": "9"},
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        killed = proc.stdout.readline()
        assert json.loads(killed or "null") == [True], proc.communicate()[1]
        before = (tmp_path / f"{run_id}.log").read_text().splitlines()
        assert before[-1] == "model.delta"
        out, err = proc.communicate("resume\n", timeout=300)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    state = json.loads(out.splitlines()[-1])[run_id]
    assert state["output"] == runs.TOOLS_OUTPUT
    assert state["deltas"] > 0  # the answer streamed live to the resumed caller
    again = Counter((tmp_path / f"{run_id}.log").read_text().splitlines()[len(before) :])
    assert again["model.get_response"] == 1
    assert not any(e.startswith("tool.") for e in again)
    with ds.store_from_env(env) as store:
        items = [c for _, c in ds.read_stream(store, run_id, "model", follow=False)]
    resets = [i for i, c in enumerate(items) if isinstance(c, ds.StreamReset)]
    assert len(resets) == 1
    answer = "".join(c["text"] for c in items[resets[0] + 1 :] if "text" in c)
    assert answer.strip() == runs.TOOLS_OUTPUT
