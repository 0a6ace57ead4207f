"""A Pydantic AI agent made durable with ``Durable()``, in-process on every backend: what
it records, what a resumed step replays, and what it refuses."""

from __future__ import annotations

import asyncio
import base64
import math
import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    CancellationToken,
    DeferredToolRequests,
    ModelResponse,
    RunContext,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.exceptions import UnexpectedModelBehavior, UserError
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool

import durable_steps as ds
from durable_steps.integrations.pydantic_ai import Durable

from ..conftest import Api
from . import agents
from .conftest import Crash

Effects = Callable[..., agents.Effects]


def step_for(api: Api, agent: Agent[None, str]) -> ds.Step:
    return agents.async_step(agent) if api.is_async else agents.sync_step(agent)


def in_order(cp: ds.Checkpoint | None) -> list[Any]:
    """A checkpoint's records in the order they were made (a journal keeps them in the
    order of their keys: a call's key, or its task and index)."""
    assert cp is not None
    return sorted(cp.calls, key=lambda c: c.get("at", float("inf")))


def names(cp: ds.Checkpoint | None) -> list[str]:
    return [c["name"] for c in in_order(cp)]


def interrupted(api: Api, run_id: str, agent: Agent[None, str]) -> ds.Checkpoint:
    with pytest.raises(Crash):
        api.run(run_id, [step_for(api, agent)])
    cp = api.store.load(run_id)
    assert cp is not None
    return cp  # type: ignore[no-any-return]


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_interrupted_agent_resumes_without_repeating_a_finished_call(
    api: Api, run_id: str, effects: Effects, when: str
) -> None:
    """Interrupted at each model request and tool call (before it runs, or after it ran and
    before it was recorded), then run again: exactly the calls not recorded run again
    (tools of one model response run concurrently, so a sibling of the interrupted call
    may have finished meanwhile), and the output is an uninterrupted run's (every
    backend, run and run_async)."""
    want = Counter(agents.FUNCTION_EFFECTS)
    for k in range(len(agents.FUNCTION_EFFECTS)):
        agent = agents.function_agent()
        effects(at=k, when=when)
        cp = interrupted(api, f"{run_id}-{k}", agent)
        kept = agents.kept(cp.calls)
        first = Counter(e.split()[0] for e in agents.EFFECTS.seen)
        assert kept <= first, f"interrupted at {k}"
        again = effects()
        state = api.run(f"{run_id}-{k}", [step_for(api, agent)])
        assert state["output"] == agents.FUNCTION_OUTPUT
        assert Counter(e.split()[0] for e in again.seen) == want - kept, f"interrupted at {k}"


def test_calls_are_named_by_kind_and_tool_and_hold_plain_json(
    api: Api, run_id: str, effects: Effects
) -> None:
    """One call per model request and per tool call, named model.request and tool.NAME; a
    tool's ModelRetry is recorded as data, and a tool's value as Pydantic AI encodes it."""
    effects(at=len(agents.FUNCTION_EFFECTS) - 1)  # before the last request
    cp = interrupted(api, run_id, agents.function_agent())
    assert names(cp) == agents.FUNCTION_CALLS[:-1]
    results = [c["result"] for c in in_order(cp)]
    assert (results[1]["kind"], results[1]["result"]) == ("tool_return", 3)
    assert results[2]["result"] == {"city": "Paris", "temp_c": 21.5}
    assert (results[4]["kind"], results[4]["message"]) == ("model_retry", "a must be >= 0")
    assert results[0]["parts"][0]["tool_name"] == "add"


def test_a_model_retry_replays_as_data(run_id: str, effects: Effects) -> None:
    """A tool that raised ModelRetry is not run again on resume: the model gets the same
    retry prompt from the journal."""
    store = ds.MemoryStore()
    agent = agents.function_agent()
    effects(at=5)  # the retried call (4) is recorded; the next tool call is not
    with pytest.raises(Crash):
        ds.run(run_id, [agents.sync_step(agent)], store)
    again = effects()
    state = ds.run(run_id, [agents.sync_step(agent)], store)
    assert [e.split()[0] for e in again.seen] == ["tool.add", "model"]
    assert "a must be >= 0" in state["output"]


def test_a_changed_tool_name_on_resume_is_a_step_mismatch(run_id: str, effects: Effects) -> None:
    """Resumed with a tool renamed: the run fails loudly, and the renamed tool never runs."""
    store = ds.MemoryStore()
    effects(at=3)
    with pytest.raises(Crash):
        ds.run(run_id, [agents.sync_step(agents.function_agent())], store)
    again = effects()
    # The recorded model response asks for "add", which the agent no longer has: either
    # the recorded tool call is asked for under its new name (StepMismatchError), or
    # Pydantic AI refuses the unknown tool -- loudly either way, and "plus" never runs.
    with pytest.raises((ds.StepMismatchError, UnexpectedModelBehavior)):
        ds.run(run_id, [agents.sync_step(agents.function_agent(tool_name="plus"))], store)
    assert [e for e in again.seen if e.startswith("tool.")] == []


def test_the_agent_run_keeps_its_run_id_when_the_step_runs_again(
    run_id: str, effects: Effects
) -> None:
    """The run's default run_id comes from the step, so a resumed run has the one it had."""
    store = ds.MemoryStore()
    first = effects(at=4)
    with pytest.raises(Crash):
        ds.run(run_id, [agents.sync_step(agents.function_agent())], store)
    again = effects()
    state = ds.run(run_id, [agents.sync_step(agents.function_agent())], store)
    tools = [e for e in [*first.seen, *again.seen] if " " in e]
    assert len(tools) == 4  # two tool calls before the crash, two after it
    assert {e.split()[1] for e in tools} == {state["run_id"]}
    other = ds.run(f"{run_id}-2", [agents.sync_step(agents.function_agent())], store)
    assert other["run_id"] != state["run_id"]


def test_two_agent_runs_in_one_step_are_told_apart(run_id: str, effects: Effects) -> None:
    """Each agent run of a step gets its own run_id, the same ones when the step reruns."""
    agent = agents.test_agent()

    seen: list[list[str]] = []

    def twice(state: Any) -> dict[str, Any]:
        first, second = agent.run_sync("a"), agent.run_sync("b")
        seen.append([first.run_id, second.run_id])
        if len(seen) == 1:
            raise Crash  # after both runs: the step runs again
        return {"ids": seen[-1]}

    store = ds.MemoryStore()
    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("twice", twice)], store)
    ids = ds.run(run_id, [ds.Step("twice", twice)], store)["ids"]
    assert len(set(ids)) == 2 and seen == [ids, ids]
    assert ds.run(f"{run_id}-again", [ds.Step("twice", twice)], store)["ids"] != ids


def test_the_test_model_agent_is_durable_too(run_id: str, effects: Effects) -> None:
    """TestModel (every tool once, then an answer): interrupted at each call and resumed,
    each call ran once and the output is an uninterrupted run's."""
    for k in range(len(agents.TEST_EFFECTS)):
        store, agent = ds.MemoryStore(), agents.test_agent()
        first = effects(at=k)
        with pytest.raises(Crash):
            ds.run(f"{run_id}-{k}", [agents.sync_step(agent)], store)
        again = effects()
        state = ds.run(f"{run_id}-{k}", [agents.sync_step(agent)], store)
        assert state["output"] == agents.TEST_OUTPUT
        ran = [e.split()[0] for e in [*first.seen, *again.seen]]
        assert ran == agents.TEST_EFFECTS


def test_outside_a_step_the_agent_runs_as_usual(effects: Effects) -> None:
    """Outside a step Durable does nothing: every call runs, nothing is recorded."""
    agent = agents.function_agent()
    # (asyncio.run first: it would orphan the loop run_sync leaves set, unclosed)
    assert asyncio.run(agent.run("go")).output == agents.FUNCTION_OUTPUT
    assert agent.run_sync("go").output == agents.FUNCTION_OUTPUT
    assert [e.split()[0] for e in agents.EFFECTS.seen] == agents.FUNCTION_EFFECTS * 2


def test_an_agent_run_in_a_coroutine_of_a_run_step_is_durable(
    run_id: str, effects: Effects
) -> None:
    """``asyncio.run(agent.run(...))`` inside a ``run`` step: durable as ``run_sync``."""
    store = ds.MemoryStore()
    agent = agents.function_agent()

    def step(state: Any) -> dict[str, Any]:
        return agents.result(asyncio.run(agent.run("go")))

    effects(at=3)
    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("agent", step)], store)
    assert names(store.load(run_id)) == agents.FUNCTION_CALLS[:3]
    again = effects()
    assert ds.run(run_id, [ds.Step("agent", step)], store)["output"] == agents.FUNCTION_OUTPUT
    assert [e.split()[0] for e in again.seen] == agents.FUNCTION_EFFECTS[3:]


def test_an_agent_run_inside_a_tool_is_part_of_that_tool_call(run_id: str) -> None:
    """An agent that another agent's tool runs is no durable unit of its own: the tool's
    call is (recorded with its result; replayed, it does not run the inner agent)."""
    inner_runs: list[str] = []
    inner = Agent(TestModel(custom_output_text="inner answer"), capabilities=[Durable()])
    outer = Agent(TestModel(), capabilities=[Durable()])

    @outer.tool_plain
    async def delegate() -> str:
        inner_runs.append("inner")
        return (await inner.run("help")).output

    store = ds.MemoryStore()
    stop = [False, True]  # crash the first time

    def step(state: Any) -> dict[str, Any]:
        out = outer.run_sync("go").output
        if stop.pop():
            raise Crash
        return {"output": out}

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("outer", step)], store)
    assert names(store.load(run_id)) == ["model.request", "tool.delegate", "model.request"]
    assert ds.run(run_id, [ds.Step("outer", step)], store)["output"] == (
        '{"delegate":"inner answer"}'
    )
    assert inner_runs == ["inner"]


def test_a_streamed_run_is_recorded_and_replayed(run_id: str) -> None:
    """``run_stream`` and ``iter`` inside a run_async step: the model's stream is read to
    its end inside the call (``model.request_stream``); on resume, replayed, not requested."""
    requests: list[str] = []

    async def stream(messages: Any, info: Any) -> Any:
        requests.append("stream")
        for chunk in ["dur", "able"]:
            yield chunk

    def whole(messages: Any, info: Any) -> ModelResponse:
        requests.append("whole")
        return ModelResponse(parts=[TextPart("durable")])

    agent = Agent(FunctionModel(whole, stream_function=stream), capabilities=[Durable()])
    stop = [False, True]  # crash the first time

    async def step(state: Any) -> dict[str, Any]:
        async with agent.run_stream("go") as streamed:
            text = [t async for t in streamed.stream_text(delta=True)]
        async with agent.iter("go") as run:
            async for _ in run:
                pass
        assert run.result is not None
        if stop.pop():
            raise Crash
        return {"text": text, "iter": run.result.output}

    async def main() -> dict[str, Any]:
        async with ds.AsyncMemoryStore() as store:
            with pytest.raises(Crash):
                await ds.run_async(run_id, [ds.Step("s", step)], store)
            cp = await store.load(run_id)
            assert names(cp) == ["model.request_stream", "model.request"]
            return await ds.run_async(run_id, [ds.Step("s", step)], store)

    assert asyncio.run(main()) == {"text": ["durable"], "iter": "durable"}
    assert requests == ["stream", "whole"]


def test_durable_event_stream_handler_sees_each_event_once(run_id: str) -> None:
    """``Durable(event_stream_handler=...)`` gets the run's events inside durable calls:
    a resumed step does not deliver the finished calls' events again."""
    events: list[str] = []

    async def handler(ctx: RunContext[None], stream: Any) -> None:
        async for event in stream:
            events.append(type(event).__name__)

    agent = Agent(TestModel(), capabilities=[Durable(event_stream_handler=handler)])

    @agent.tool_plain
    def double(n: int) -> int:
        return 2 * n

    stop = [False, True]  # crash the first time

    async def step(state: Any) -> dict[str, Any]:
        out = (await agent.run("go")).output
        if stop.pop():
            raise Crash
        return {"output": out}

    async def main() -> dict[str, Any]:
        async with ds.AsyncMemoryStore() as store:
            with pytest.raises(Crash):
                await ds.run_async(run_id, [ds.Step("s", step)], store)
            assert "event_stream_handler" in names(await store.load(run_id))
            delivered = len(events)
            out = await ds.run_async(run_id, [ds.Step("s", step)], store)
            assert len(events) == delivered
            return out

    assert asyncio.run(main()) == {"output": '{"double":0}'}
    assert "FunctionToolResultEvent" in events


def test_a_model_registered_with_durable_can_be_picked_per_run(run_id: str) -> None:
    """``run(model=...)`` inside a step: a model registered in ``Durable(models=...)`` is
    recorded under its key; any other Model instance is refused."""
    alt = TestModel(custom_output_text="alt")
    agent = Agent(TestModel(), capabilities=[Durable(models={"alt": alt})])
    store = ds.MemoryStore()
    stop = [False, True]  # crash the first time

    def picked(state: Any) -> dict[str, Any]:
        out = agent.run_sync("x", model=alt).output
        if stop.pop():
            raise Crash
        return {"o": out}

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", picked)], store)
    assert names(store.load(run_id)) == ["model.request:alt"]
    assert ds.run(run_id, [ds.Step("s", picked)], store) == {"o": "alt"}

    def other(state: Any) -> Any:
        return {"o": agent.run_sync("x", model=TestModel()).output}

    with pytest.raises(UserError, match="not registered"):
        ds.run(f"{run_id}-2", [ds.Step("s", other)], store)


def test_an_mcp_server_s_tools_are_durable(run_id: str, tmp_path: Path) -> None:
    """An MCPToolset (a real stdio MCP server): its tool list and each of its tool calls
    are calls of the step; a resumed step asks the server for neither again."""
    calls = tmp_path / "server-calls.log"
    server = StdioTransport(
        sys.executable, [str(Path(__file__).with_name("mcp_server.py")), str(calls)]
    )
    requests: list[str] = []

    def model(messages: list[Any], info: Any) -> ModelResponse:
        requests.append("model")
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"topic": "leases"})])
        return ModelResponse(parts=[TextPart(f"got {messages[-1].parts[0].content}")])

    agent = Agent(
        FunctionModel(model), toolsets=[MCPToolset(server, id="docs")], capabilities=[Durable()]
    )
    stop = [False, True]  # crash the first time

    def step(state: Any) -> dict[str, Any]:
        out = agent.run_sync("go").output
        if stop.pop():
            raise Crash
        return {"output": out}

    store = ds.MemoryStore()
    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", step)], store)
    assert sorted(names(store.load(run_id))) == [  # (records are kept by task, not by time)
        "model.request",
        "model.request",
        "tool.lookup",
        "toolset.docs.get_tools",
    ]
    assert ds.run(run_id, [ds.Step("s", step)], store) == {"output": "got page about leases"}
    assert calls.read_text().split() == ["lookup"]
    assert requests == ["model", "model"]


# -- refused -------------------------------------------------------------------------------


class Custom(AbstractToolset[None]):
    """A toolset class of the user's own: its calls are invisible to the seam."""

    @property
    def id(self) -> str:
        return "custom"

    async def get_tools(self, ctx: RunContext[None]) -> dict[str, ToolsetTool[None]]:
        return {}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: Any
    ) -> Any:
        return None


def test_a_custom_toolset_is_refused() -> None:
    """An agent with a toolset class Durable cannot see into: TypeError when it is built,
    and when one is passed to a run inside a step."""
    with pytest.raises(TypeError, match=r"Custom .* cannot make durable"):
        Agent(TestModel(), toolsets=[Custom()], capabilities=[Durable()])
    agent = Agent(TestModel(), capabilities=[Durable()])
    step = ds.Step("s", lambda s: {"o": agent.run_sync("x", toolsets=[Custom()]).output})
    with pytest.raises(TypeError, match="cannot make durable"):
        ds.run("custom", [step], ds.MemoryStore())
    assert agent.run_sync("x", toolsets=[Custom()]).output  # outside a step: as usual


def test_a_toolset_added_to_one_run_inside_a_step_is_refused(run_id: str) -> None:
    """``run(toolsets=[FunctionToolset])`` inside a step: its tools were not registered
    with Durable, so Pydantic AI refuses it (UserError) before any call."""
    extra = FunctionToolset[None](id="extra")

    @extra.tool_plain
    def ping() -> str:
        return "pong"

    agent = Agent(TestModel(), capabilities=[Durable()])
    store = ds.MemoryStore()
    step = ds.Step("s", lambda s: {"o": agent.run_sync("x", toolsets=[extra]).output})
    with pytest.raises(UserError, match="cannot be added at runtime with durable-steps"):
        ds.run(run_id, [step], store)
    assert names(store.load(run_id)) == []


def test_a_tool_asking_for_approval_is_recorded_as_data(run_id: str) -> None:
    """A tool raising ApprovalRequired ends the run with deferred tool requests; its call
    is recorded as data, and a resumed step replays it without running the tool."""
    asked: list[str] = []
    agent = Agent(TestModel(), output_type=[str, DeferredToolRequests], capabilities=[Durable()])

    @agent.tool_plain
    def refund(amount: int) -> str:
        asked.append("refund")
        raise ApprovalRequired(metadata={"reason": "money"})

    stop = [False, True]  # crash the first time

    def step(state: Any) -> dict[str, Any]:
        out = agent.run_sync("x").output
        assert isinstance(out, DeferredToolRequests)
        if stop.pop():
            raise Crash
        return {"approvals": [call.tool_name for call in out.approvals]}

    store = ds.MemoryStore()
    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", step)], store)
    cp = store.load(run_id)
    assert names(cp) == ["model.request", "tool.refund"]
    assert in_order(cp)[1]["result"]["kind"] == "approval_required"
    assert ds.run(run_id, [ds.Step("s", step)], store) == {"approvals": ["refund"]}
    assert asked == ["refund"]


def test_cancel_from_a_tool_inside_a_step_is_refused(run_id: str) -> None:
    """``ctx.cancel()`` in a tool would not happen again when its call is replayed:
    Pydantic AI refuses it inside a durable call (UserError)."""
    agent = Agent(TestModel(), capabilities=[Durable()])

    @agent.tool
    def stop(ctx: RunContext[None]) -> str:
        ctx.cancel()
        return "stopped"

    step = ds.Step("s", lambda s: {"o": agent.run_sync("x").output})
    with pytest.raises(UserError, match="not supported inside a durable call"):
        ds.run(run_id, [step], ds.MemoryStore())


def test_a_cancellation_token_inside_a_step_is_refused(run_id: str) -> None:
    """A CancellationToken cancels at a point the journal does not record: refused."""
    agent = Agent(TestModel(), capabilities=[Durable()])
    token = CancellationToken()
    step = ds.Step("s", lambda s: {"o": agent.run_sync("x", cancellation_token=token).output})
    with pytest.raises(UserError, match="cancellation_token"):
        ds.run(run_id, [step], ds.MemoryStore())


def test_a_tool_result_that_is_not_the_states_json_fails_the_step(run_id: str) -> None:
    """A tool returning an integer beyond 2**53 - 1 fails the step with InvalidStateError
    (nothing recorded for it); NaN is recorded as null, as Pydantic AI's JSON has it."""
    agent = Agent(TestModel(), capabilities=[Durable()])

    @agent.tool_plain
    def big() -> int:
        return 2**60

    store = ds.MemoryStore()
    step = ds.Step("s", lambda s: {"o": agent.run_sync("x").output})
    with pytest.raises(ds.InvalidStateError, match=r"tool\.big"):
        ds.run(run_id, [step], store)
    assert names(store.load(run_id)) == ["model.request"]

    nan_agent = Agent(TestModel(), capabilities=[Durable()])

    @nan_agent.tool_plain
    def nan() -> float:
        return math.nan

    step = ds.Step("s", lambda s: {"o": nan_agent.run_sync("x").output})
    assert ds.run(f"{run_id}-nan", [step], store) == {"o": '{"nan":null}'}


def test_run_sync_inside_a_run_async_step_fails_before_any_call(run_id: str) -> None:
    """Under run_async the step's loop is running: ``agent.run_sync`` cannot run there
    (Pydantic AI's RuntimeError); ``await agent.run`` is the way."""
    agent = Agent(TestModel(), capabilities=[Durable()])

    async def step(state: Any) -> dict[str, Any]:
        return {"o": agent.run_sync("x").output}

    async def main() -> None:
        async with ds.AsyncMemoryStore() as store:
            with pytest.raises(RuntimeError, match="already running"):
                await ds.run_async(run_id, [ds.Step("s", step)], store)
            assert names(await store.load(run_id)) == []

    asyncio.run(main())


def test_an_encrypting_store_keeps_the_agents_calls_encrypted_and_replays_them(
    tmp_path: Path, run_id: str, effects: Effects
) -> None:
    """On a FileStore with AES-256-GCM on, no recorded model response or tool result is
    on disk in clear; after a crash before the last model request the step replays every
    recorded call (only that request runs again) and ends as an uninterrupted run does;
    without the key, loading the run is a CodecError naming the key id."""
    keys = ds.Keyring("k1", {"k1": base64.b64encode(os.urandom(32)).decode()})
    path = tmp_path / "runs"
    effects(at=len(agents.FUNCTION_EFFECTS) - 1)
    with pytest.raises(Crash):
        ds.run(
            run_id,
            [agents.sync_step(agents.function_agent())],
            ds.FileStore(path, codec=ds.ValueCodec(keys=keys)),
        )
    on_disk = b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file())
    for clear in (b"Paris", b"temp_c", b"must be", b"tool-call"):
        assert clear not in on_disk, clear
    with pytest.raises(ds.CodecError, match="k1"):
        ds.FileStore(path).load(run_id)
    again = effects()
    store = ds.FileStore(path, codec=ds.ValueCodec(keys=keys))
    state = ds.run(run_id, [agents.sync_step(agents.function_agent())], store)
    assert state["output"] == agents.FUNCTION_OUTPUT
    assert again.seen == agents.FUNCTION_EFFECTS[-1:]
