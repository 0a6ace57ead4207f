"""The OpenAI Agents integration beyond one agent's loop: MCP servers, agents run at once
in one step, an agent used as a tool, a tripped guardrail, the SDK's structured tool
outputs -- and what it refuses inside a step, each before anything runs."""

from __future__ import annotations

import asyncio
import copy
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    CustomTool,
    GuardrailFunctionOutput,
    HostedMCPTool,
    InputGuardrailTripwireTriggered,
    LocalShellTool,
    ModelRetrySettings,
    ModelSettings,
    RunConfig,
    Runner,
    SQLiteSession,
    ToolOutputImage,
    ToolOutputText,
    function_tool,
    input_guardrail,
)
from agents.mcp import MCPServerStdio
from openai.types.responses import ResponseCustomToolCall
from openai.types.responses.response_output_item import McpApprovalRequest

import durable_steps as ds

from . import openai_runs as runs
from .conftest import Crash
from .openai_recorded import args_ok, no_paris  # the guardrails the recording has

Effects = Callable[..., runs.Effects]

MCP_SERVER = Path(__file__).with_name("mcp_server.py")


def crash_once(step: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``step``, with a Crash after it returned the first time: the step runs again and
    replays everything its first run recorded."""
    done: list[Any] = []

    def wrapped(state: Any) -> Any:
        done.append(step(state))
        if len(done) == 1:
            raise Crash
        return done[-1]

    return wrapped


def script(*turns: list[Any]) -> runs.Scripted:
    """A model answering the k-th time it is asked with ``turns[k]`` (k: the tool outputs it
    was sent so far, counted in turns of one call each)."""
    return runs.Scripted(lambda seen: turns[min(len(seen), len(turns) - 1)])


def test_mcp_server_tool_calls_are_durable(
    run_id: str, tmp_path: Path, openai_effects: Effects
) -> None:
    """An MCP server's tool (a real server over stdio): interrupted after its call was
    recorded, the step runs again, and the server's tool does not."""
    calls = tmp_path / "mcp.log"
    agent = Agent(
        name="docs",
        model=script([runs.call("lookup", {"topic": "leases"}, 1)], [runs.say("read it")]),
    )

    async def body(state: Any) -> dict[str, Any]:
        ds.track_tasks()  # before the MCP client's tasks: a coroutine of a run() step
        params = {"command": sys.executable, "args": [str(MCP_SERVER), str(calls)]}
        async with MCPServerStdio(params=params, cache_tools_list=True) as server:
            result = await Runner.run(agent.clone(mcp_servers=[server]), "go")
        return {"output": result.final_output, "inputs": result.to_input_list()}

    steps = [ds.Step("docs", crash_once(lambda state: asyncio.run(body(state))))]
    store = ds.MemoryStore()
    with pytest.raises(Crash):
        ds.run(run_id, steps, store)
    cp = store.load(run_id)
    assert cp is not None and Counter(c["name"] for c in cp.calls)["tool.lookup"] == 1
    state = ds.run(run_id, steps, store)
    assert calls.read_text() == "lookup\n"  # once, in the first run
    assert state["output"] == "read it"
    assert "page about leases" in str(state["inputs"])


def test_agents_run_at_once_in_one_step_replay_their_own_calls(
    run_id: str, openai_effects: Effects
) -> None:
    """Two agent runs gathered in a run_async step, interrupted while both are under way:
    each replays its own model responses and tool calls, whatever the timing."""
    store = ds.AsyncMemoryStore()

    async def both(state: Any) -> dict[str, Any]:
        a, b = await asyncio.gather(
            Runner.run(runs.tools_agent(), "go"), Runner.run(runs.tools_agent(), "go")
        )
        return {"a": a.final_output, "b": b.final_output}

    async def go() -> dict[str, Any]:
        return await ds.run_async(run_id, [ds.Step("both", both)], store)

    openai_effects(at=7)  # both started: calls of each recorded, not all
    with pytest.raises(Crash):
        asyncio.run(go())
    cp = store.sync.load(run_id)
    assert cp is not None
    kept = runs.kept(cp.calls)
    assert 0 < len(cp.calls) < 14
    again = openai_effects()
    assert asyncio.run(go()) == {"a": runs.TOOLS_OUTPUT, "b": runs.TOOLS_OUTPUT}
    assert Counter(again.seen) == Counter(runs.TOOLS_EFFECTS * 2) - kept


def test_an_agent_used_as_a_tool_is_one_call(run_id: str, openai_effects: Effects) -> None:
    """An agent used as a tool (``as_tool``) runs inside that tool's call: its own model
    responses are part of the call, recorded with it, not calls of their own."""
    inner = Agent(name="inner", model=script([runs.say("inner says hi")]))
    outer = Agent(
        name="outer",
        model=script([runs.call("ask_inner", {"input": "hi"}, 1)], [runs.say("relayed")]),
        tools=[inner.as_tool(tool_name="ask_inner", tool_description="Ask the inner agent.")],
    )
    store = ds.MemoryStore()
    step = ds.Step(
        "outer", crash_once(lambda state: {"out": Runner.run_sync(outer, "go").final_output})
    )
    with pytest.raises(Crash):
        ds.run(run_id, [step], store)
    cp = store.load(run_id)
    assert cp is not None
    assert Counter(c["name"] for c in cp.calls) == {"model.get_response": 2, "tool.ask_inner": 1}
    again = openai_effects()
    assert ds.run(run_id, [step], store) == {"out": "relayed"}
    assert again.seen == []


def test_a_tripped_guardrail_is_recorded_and_trips_again(
    run_id: str, openai_effects: Effects
) -> None:
    """An input guardrail that trips: the step fails with the SDK's exception, and when it
    runs again the guardrail is not run again -- its recorded result trips the run, with
    its output_info as JSON."""
    checks: list[str] = []

    @input_guardrail
    def no_go(ctx: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
        checks.append(str(given))
        return GuardrailFunctionOutput(output_info={"why": "no"}, tripwire_triggered=True)

    agent = Agent(name="gated", model=script([runs.say("never")]), input_guardrails=[no_go])
    store = ds.MemoryStore()
    step = ds.Step("gated", lambda state: {"out": Runner.run_sync(agent, "go").final_output})
    for _ in range(2):
        with pytest.raises(InputGuardrailTripwireTriggered) as tripped:
            ds.run(run_id, [step], store)
        assert tripped.value.guardrail_result.output.output_info == {"why": "no"}
    assert checks == ["go"]


def test_tool_guardrails_and_a_run_configs_model_are_durable(
    run_id: str, openai_effects: Effects
) -> None:
    """A tool's input and output guardrails (one rejects the tool's output, and the model
    is told) and a model given as ``RunConfig(model=...)``: replayed, none runs again, and
    the model sees what it saw."""

    weather = copy.copy(runs.get_weather)
    weather.tool_input_guardrails, weather.tool_output_guardrails = [args_ok], [no_paris]
    agent = Agent(name="weather", tools=[weather])
    model = script([runs.call("get_weather", {"city": "Paris"}, 1)], [runs.say("told")])
    seen: list[Any] = []

    def step(state: Any) -> dict[str, Any]:
        result = Runner.run_sync(agent, "go", run_config=RunConfig(model=model))
        seen.append(result.to_input_list())
        return {"out": result.final_output}

    store, durable = ds.MemoryStore(), ds.Step("weather", crash_once(step))
    with pytest.raises(Crash):
        ds.run(run_id, [durable], store)
    first = list(runs.EFFECTS.seen)
    cp = store.load(run_id)
    assert cp is not None and Counter(c["name"] for c in cp.calls) == Counter(first)
    assert first.count("model.get_response") == 2 and len(first) == 5
    again = openai_effects()
    assert ds.run(run_id, [durable], store) == {"out": "told"}
    assert again.seen == []
    assert seen[0] == seen[1] and "no Paris here" in str(seen[0])


def test_a_custom_tool_and_a_hosted_mcp_approval_are_durable(
    run_id: str, openai_effects: Effects
) -> None:
    """A custom tool (raw string input) and the callback that approves a hosted MCP
    server's tool call: each a call, recorded, neither run again when the step is."""

    def shout(context: Any, text: str) -> str:
        runs.effect("tool.shout")
        return text.upper()

    def approve(request: Any) -> dict[str, Any]:
        runs.effect("approval.docs")
        return {"approve": False, "reason": f"not {request.data.name}"}

    hosted = HostedMCPTool(
        tool_config={"type": "mcp", "server_label": "docs", "server_url": "https://x"},
        on_approval_request=approve,
    )
    ask = McpApprovalRequest(
        type="mcp_approval_request", id="ap-1", name="delete", arguments="{}", server_label="docs"
    )
    custom = ResponseCustomToolCall(
        type="custom_tool_call", call_id="cu-1", name="shout", input="hi"
    )
    model = runs.Scripted(
        lambda seen: [runs.say("done")] if seen else [custom, ask]  # seen: the custom tool's output
    )
    agent = Agent(
        name="mixed",
        model=model,
        tools=[CustomTool(name="shout", description="Shout.", on_invoke_tool=shout), hosted],
    )
    seen: list[Any] = []

    def step(state: Any) -> dict[str, Any]:
        result = Runner.run_sync(agent, "go")
        seen.append(result.to_input_list())
        return {"out": result.final_output}

    store, durable = ds.MemoryStore(), ds.Step("mixed", crash_once(step))
    with pytest.raises(Crash):
        ds.run(run_id, [durable], store)
    first = sorted(runs.EFFECTS.seen)
    assert first == ["approval.docs", "model.get_response", "model.get_response", "tool.shout"]
    cp = store.load(run_id)
    assert cp is not None and sorted(c["name"] for c in cp.calls) == first
    again = openai_effects()
    assert ds.run(run_id, [durable], store) == {"out": "done"}
    assert again.seen == []
    assert seen[0] == seen[1] and "not delete" in str(seen[0]) and "HI" in str(seen[0])


def test_structured_tool_outputs_come_back_as_the_sdks_types(
    run_id: str, openai_effects: Effects
) -> None:
    """A tool returning the SDK's structured outputs (a list of them) and one returning a
    tuple: replayed, the first is rebuilt as the same types, the second is what the model
    was sent (its str), so the model's next input is the same either way."""
    got: list[Any] = []

    @function_tool
    def picture() -> list[Any]:
        """A picture and its caption."""
        return [ToolOutputText(text="a cat"), ToolOutputImage(image_url="https://x/cat.png")]

    @function_tool
    def pair() -> tuple[int, int]:
        """Two numbers."""
        return (1, 2)

    agent = Agent(
        name="pics",
        model=script([runs.call("picture", {}, 1), runs.call("pair", {}, 2)], [runs.say("seen")]),
        tools=[picture, pair],
    )

    def step(state: Any) -> dict[str, Any]:
        result = Runner.run_sync(agent, "go")
        outputs = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
        got.append(([type(o) for o in outputs], result.to_input_list()))
        return {}

    outside = Runner.run_sync(agent, "go").to_input_list()  # what the model is sent anyway
    store, durable = ds.MemoryStore(), ds.Step("pics", crash_once(step))
    with pytest.raises(Crash):
        ds.run(run_id, [durable], store)
    again = openai_effects()
    ds.run(run_id, [durable], store)
    assert again.seen == []
    (live_types, live), (replayed_types, replayed) = got
    assert live == replayed == outside
    assert live_types == replayed_types and list in live_types


REFUSED: dict[str, tuple[type[Exception], str, Callable[[], Any]]] = {
    "session": (
        TypeError,
        "session",
        lambda: Runner.run_sync(runs.tools_agent(), "go", session=SQLiteSession("s")),
    ),
    "local tool": (
        TypeError,
        "LocalShellTool",
        lambda: Runner.run_sync(
            runs.tools_agent().clone(tools=[LocalShellTool(executor=lambda request: "ok")]), "go"
        ),
    ),
    "model retries": (
        TypeError,
        r"ModelSettings\.retry",
        lambda: Runner.run_sync(
            runs.tools_agent().clone(
                model_settings=ModelSettings(retry=ModelRetrySettings(max_retries=2))
            ),
            "go",
        ),
    ),
}


@pytest.mark.parametrize("what", REFUSED)
def test_what_cannot_be_made_durable_is_refused_in_a_step(
    run_id: str, openai_effects: Effects, what: str
) -> None:
    """Each is refused inside a step, with what to do, before the model is asked or a
    tool runs; the same runs outside a step."""
    error, says, attempt = REFUSED[what]
    with pytest.raises(error, match=says):
        ds.run(run_id, [ds.Step("agent", lambda state: {"x": attempt()})], ds.MemoryStore())
    assert runs.EFFECTS.seen == []


def test_a_run_resumed_from_a_run_state_is_refused_in_a_step(
    run_id: str, openai_effects: Effects
) -> None:
    """A RunState (what a run interrupted for approvals continues from) holds its own agent
    and pending tool calls: refused inside a step, before anything runs."""
    paused = Runner.run_sync(runs.tools_agent(), "go").to_state()
    seen = len(runs.EFFECTS.seen)

    def step(state: Any) -> dict[str, Any]:
        return {"x": Runner.run_sync(runs.tools_agent(), paused).final_output}

    with pytest.raises(TypeError, match="RunState"):
        ds.run(run_id, [ds.Step("agent", step)], ds.MemoryStore())
    assert len(runs.EFFECTS.seen) == seen


def test_an_agent_run_in_a_thread_the_step_started_is_refused(
    run_id: str, openai_effects: Effects
) -> None:
    """An agent run in a thread the step started has no step to record into: it is
    refused at once, before its model runs, by each of the runner's entry points."""
    entries = {
        "run": lambda: asyncio.run(Runner.run(runs.tools_agent(), "go")),
        "run_sync": lambda: Runner.run_sync(runs.tools_agent(), "go"),
        "run_streamed": lambda: Runner.run_streamed(runs.tools_agent(), "go"),
    }

    def step(state: Any) -> dict[str, Any]:
        errors: dict[str, str] = {}

        def attempt(name: str, entry: Any) -> None:
            try:
                entry()
            except RuntimeError as exc:
                errors[name] = str(exc)

        for name, entry in entries.items():
            thread = threading.Thread(target=attempt, args=(name, entry))
            thread.start()
            thread.join()
        return {"errors": errors}

    state = ds.run(run_id, [ds.Step("agent", step)], ds.MemoryStore())
    assert set(state["errors"]) == set(entries)
    assert all("outside any step's context" in e for e in state["errors"].values())
    assert runs.EFFECTS.seen == []  # no tool ran
