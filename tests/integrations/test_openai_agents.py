"""OpenAI Agents SDK runs inside steps, in-process on every backend: what they record,
what a resumed step replays, and what is refused."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from agents import Runner
from agents.exceptions import ModelBehaviorError

import durable_steps as ds

from ..conftest import Api
from ..helpers.clitools import CLEAN, SCRIPT
from . import openai_runs as runs
from .conftest import Crash

Effects = Callable[..., runs.Effects]


def step_for(api: Api, scenario: str) -> ds.Step:
    return runs.async_step(scenario) if api.is_async else runs.sync_step(scenario)


def interrupted(api: Api, run_id: str, step: ds.Step) -> ds.Checkpoint:
    with pytest.raises(Crash):
        api.run(run_id, [step])
    cp = api.store.load(run_id)
    assert cp is not None
    return cp  # type: ignore[no-any-return]


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_interrupted_agent_resumes_without_repeating_a_finished_call(
    api: Api, run_id: str, openai_effects: Effects, when: str
) -> None:
    """Interrupted at each model response and tool call (before it runs, or after it ran
    and before it was recorded), then run again: exactly the calls not recorded run again
    (the tools of one response run at once, so a sibling of the interrupted call may have
    finished meanwhile), every call settled before it was recorded, and the output is an
    uninterrupted run's (every backend, run and run_async)."""
    want = Counter(runs.TOOLS_EFFECTS)
    for k in range(len(runs.TOOLS_EFFECTS)):
        openai_effects(at=k, when=when)
        cp = interrupted(api, f"{run_id}-{k}", step_for(api, "tools"))
        kept = runs.kept(cp.calls)
        assert runs.settled(runs.EFFECTS.seen[:k]) <= kept <= Counter(runs.EFFECTS.seen), k
        again = openai_effects()
        state = api.run(f"{run_id}-{k}", [step_for(api, "tools")])
        assert state["output"] == runs.TOOLS_OUTPUT
        assert Counter(again.seen) == want - kept, f"interrupted at {k}"


def test_handoffs_and_guardrails_replay_without_running_again(
    api: Api, run_id: str, openai_effects: Effects
) -> None:
    """An input guardrail (run beside the first model response), a handoff with an
    on_handoff callback, a model by name from the run's provider, an output guardrail:
    interrupted at each, then run again, none that was recorded runs again."""
    want = Counter(runs.HANDOFF_EFFECTS)
    for k in range(len(runs.HANDOFF_EFFECTS)):
        openai_effects(at=k)
        cp = interrupted(api, f"{run_id}-{k}", step_for(api, "handoff"))
        kept = runs.kept(cp.calls)
        assert runs.settled(runs.EFFECTS.seen[:k]) <= kept <= Counter(runs.EFFECTS.seen), k
        again = openai_effects()
        state = api.run(f"{run_id}-{k}", [step_for(api, "handoff")])
        assert state == {"output": runs.HANDOFF_OUTPUT, "agent": "weather"}
        assert Counter(again.seen) == want - kept, f"interrupted at {k}"


def test_calls_are_named_by_kind_and_hold_plain_json(run_id: str, openai_effects: Effects) -> None:
    """One call per model response, tool call, handoff and guardrail, named by kind and
    name; a model response is recorded as its fields, each output item as its own JSON."""
    store = ds.MemoryStore()
    openai_effects(at=len(runs.TOOLS_EFFECTS) - 1)  # before the last model response
    with pytest.raises(Crash):
        ds.run(run_id, [runs.sync_step("tools")], store)
    cp = store.load(run_id)
    assert cp is not None
    assert Counter(c["name"] for c in cp.calls) == Counter(runs.TOOLS_EFFECTS[:-1])
    responses = [c["result"] for c in cp.calls if c["name"] == "model.get_response"]
    (first,) = [r for r in responses if r["output"][0]["call_id"] == "call-1"]
    assert first["output"][0] == {
        "type": "function_call",
        "name": "add",
        "arguments": '{"a": 1, "b": 2}',
        "call_id": "call-1",
        "id": "fc-1",
        "status": "completed",
    }
    assert first["usage"]["input_tokens"] == 7 and first["response_id"] == "r"
    tools = sorted(str(c["result"]) for c in cp.calls if c["name"].startswith("tool."))
    assert tools == sorted(
        str(v)
        for v in [
            {"value": 3},
            {"value": {"city": "Paris", "temp_c": 21.5}},
            {"value": "error: a must be >= 0"},  # the tool's error, as the model saw it
            {"value": 42},
        ]
    )


def test_a_replayed_model_response_is_the_one_the_model_gave(
    run_id: str, openai_effects: Effects
) -> None:
    """A step's responses, live and replayed, equal those of a run outside any step: the
    SDK's own types, the same fields set (so what the model is sent next is the same)."""
    outside = Runner.run_sync(runs.tools_agent(), "go").raw_responses
    store, seen = ds.MemoryStore(), []

    def step(state: Any) -> dict[str, Any]:
        seen.append(Runner.run_sync(runs.tools_agent(), "go").raw_responses)
        if len(seen) == 1:
            raise Crash  # after the whole run: the step runs again, every call recorded
        return {}

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("agent", step)], store)
    again = openai_effects()
    ds.run(run_id, [ds.Step("agent", step)], store)
    assert again.seen == []
    assert len(outside) == 3 and seen[0] == seen[1] == outside
    for responses in seen:
        for a, b in zip(outside, responses, strict=True):
            assert [type(i) for i in a.output] == [type(i) for i in b.output]
            assert [i.model_fields_set for i in a.output] == [i.model_fields_set for i in b.output]
            assert a.to_input_items() == b.to_input_items()


def test_a_renamed_tool_on_resume_is_a_step_mismatch(run_id: str, openai_effects: Effects) -> None:
    """Resumed with a tool renamed: the run fails loudly, and the renamed tool never runs."""
    store = ds.MemoryStore()
    openai_effects(at=4)  # the first turn's calls recorded
    with pytest.raises(Crash):
        ds.run(run_id, [runs.sync_step("tools")], store)
    again = openai_effects()

    def renamed(state: Any) -> dict[str, Any]:
        agent = runs.tools_agent()
        agent.tools = [runs.get_weather, runs.add_renamed()]
        return runs.result(Runner.run_sync(agent, "go"))

    # The recorded model response asks for "add", which the agent no longer has: either the
    # recorded tool call is asked for under its new name (StepMismatchError), or the SDK
    # refuses the unknown tool -- loudly either way, and "plus" never runs.
    with pytest.raises((ds.StepMismatchError, ModelBehaviorError)):
        ds.run(run_id, [ds.Step("agent", renamed)], store)
    assert [e for e in again.seen if e.startswith("tool.")] == []


def test_outside_a_step_the_agent_runs_as_usual(openai_effects: Effects) -> None:
    """Outside a step the runner changes nothing: every call runs, the result names the
    agent it was given, and run_streamed streams."""
    agent = runs.tools_agent()

    async def streamed() -> str:
        result = Runner.run_streamed(agent, "go")
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    # (asyncio.run first: it would orphan the loop run_sync leaves set, unclosed)
    assert asyncio.run(Runner.run(agent, "go")).final_output == runs.TOOLS_OUTPUT
    with pytest.raises(NotImplementedError, match="does not stream"):
        asyncio.run(streamed())  # reached the model: not refused
    result = Runner.run_sync(agent, "go")
    assert result.final_output == runs.TOOLS_OUTPUT
    assert result.last_agent is agent
    assert Counter(runs.EFFECTS.seen) == Counter(runs.TOOLS_EFFECTS * 2)


def test_the_result_names_the_callers_agents(run_id: str, openai_effects: Effects) -> None:
    """Inside a step the SDK runs durable copies of the agents; the result names the
    caller's own (last_agent, and the agent of each item)."""
    triage = runs.handoff_agent()
    weather = triage.handoffs[0]._agent_ref()  # type: ignore[union-attr]
    seen: list[Any] = []

    def step(state: Any) -> dict[str, Any]:
        result = Runner.run_sync(triage, "go", run_config=runs.handoff_config())
        seen.append(result)
        return {}

    ds.run(run_id, [ds.Step("agent", step)], ds.MemoryStore())
    (result,) = seen
    assert result.last_agent is weather
    assert {id(item.agent) for item in result.new_items} == {id(triage), id(weather)}


def test_runs_show_lists_an_agents_calls_in_time_order_with_readable_labels(
    run_id: str, openai_effects: Effects, tmp_path: Any
) -> None:
    """An agent interrupted before its last model response: `runs show` lists the
    recorded model responses and tool calls in the order they were made -- a response,
    the tools it asked for, the next response -- numbered 0, 1, 2, ... with each tool's
    task as a small number, never as journal scopes such as '0/0' or '0.9.1.2/0'."""
    path = tmp_path / "store"
    openai_effects(at=len(runs.TOOLS_EFFECTS) - 1)
    with ds.FileStore(path) as store, pytest.raises(Crash):
        ds.run(run_id, [runs.sync_step("tools")], store)
    env = {**CLEAN, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path), "COLUMNS": "200"}
    shown = subprocess.run(
        [SCRIPT, "runs", "show", run_id, "--no-state"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "recorded calls of step" in line)
    calls = [line.split() for line in lines[start + 1 : start + 7]]
    assert [c[0] for c in calls] == ["0", "1", "2", "3", "4", "5"], shown.stdout
    names = [c[1] for c in calls]
    assert names[0] == names[3] == "model.get_response", shown.stdout
    assert sorted(names[1:3]) == ["tool.add", "tool.get_weather"] and names[4:] == ["tool.add"] * 2
    listed = "\n".join(lines[start + 1 : start + 7])
    assert not re.search(r"\d/\d|key", listed), shown.stdout  # no scopes, no machine keys
    keys = [c.get("key") for c in json.loads(subprocess.run(
        [SCRIPT, "runs", "show", run_id, "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout)["calls"]]  # fmt: skip
    assert all(keys), keys  # for scripts, each call's key as recorded
