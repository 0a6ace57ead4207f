"""The keys of an OpenAI Agents run's calls inside a step: a model response by its place
in the conversation (the number of input items the SDK sends it), a tool call by a
digest of the model's call id -- both within the run's number in its step -- through
``Runner.run`` and ``Runner.run_streamed`` alike; records stay found on replay."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Runner

import durable_steps as ds
from durable_steps.integrations._common import digest

from . import openai_runs as runs
from .conftest import Crash

Effects = Any

# The tools scenario: 1 input item, then + 2 tool calls and their 2 outputs, then + 4 more.
MODEL_KEYS = ["1/model/1/1", "1/model/5/1", "1/model/9/1"]


async def _run(state: Any) -> dict[str, Any]:
    return {"out": (await Runner.run(runs.tools_agent(), "go")).final_output}


async def _streamed(state: Any) -> dict[str, Any]:
    result = Runner.run_streamed(runs.streamed_agent(), "go")
    async for _ in result.stream_events():
        pass
    return {"out": result.final_output}


@pytest.mark.parametrize("step", [_run, _streamed], ids=["run", "run_streamed"])
def test_model_responses_and_tool_calls_are_keyed_and_replay_by_their_keys(
    run_id: str, openai_effects: Effects, step: Any
) -> None:
    """Interrupted before its last model response, the step has recorded the first two
    responses under their places and the four tool calls under their call ids; run again,
    none of them runs again."""
    store = ds.AsyncMemoryStore()

    async def go() -> dict[str, Any]:
        return await ds.run_async(run_id, [ds.Step("agent", step)], store)

    openai_effects(at=6)  # the third model response
    with pytest.raises(Crash):
        asyncio.run(go())
    cp = store.sync.load(run_id)
    assert cp is not None
    keys = {r["key"]: r["name"] for r in cp.calls if "result" in r}
    assert [k for k in keys if "/model/" in k] == MODEL_KEYS[:2]
    assert all(keys[k] == "model.get_response" for k in MODEL_KEYS[:2])
    tools = {k: name for k, name in keys.items() if "/tool/" in k}
    assert sorted(tools) == sorted(f"1/tool/{digest(f'call-{n}')}/1" for n in range(1, 5))
    assert Counter(tools.values()) == Counter({"tool.add": 3, "tool.get_weather": 1})
    again = openai_effects()
    assert asyncio.run(go()) == {"out": runs.TOOLS_OUTPUT}
    # Only the response not recorded runs (streamed: with its text deltas).
    assert [e for e in again.seen if e != "model.delta"] == ["model.get_response"]
