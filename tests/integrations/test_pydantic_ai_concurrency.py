"""Durable Pydantic AI agents running things at once: the tool calls of one model response
run concurrently (as without durability), two agents gathered in one step each replay
their own calls after an interruption, and an agent run where nothing would record it
-- in a thread a step started -- is refused; an agent without Durable() in a step is
warned about once."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic_ai import Agent, ModelResponse, RunContext, TextPart, ToolCallPart
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

import durable_steps as ds
from durable_steps.integrations.pydantic_ai import Durable

from . import agents
from .conftest import Crash

WAIT = 30.0
"""How long a tool waits for its siblings: far more than they need when they run at once;
were they run one after another, the first would never see the others."""


def four_tools_agent(*, sync: bool) -> Agent[None, str]:
    """One model response asks for four tools; each waits until all four have started."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("meet", {"n": n}) for n in range(4)])
        return ModelResponse(parts=[TextPart("all met")])

    agent = Agent(FunctionModel(model), capabilities=[Durable()])
    if sync:  # run in threads by Pydantic AI
        gate = threading.Barrier(4, timeout=WAIT)

        @agent.tool_plain
        def meet(n: int) -> int:
            gate.wait()
            return n

    else:
        met = asyncio.Event()
        started: list[int] = []

        @agent.tool_plain
        async def meet(n: int) -> int:
            started.append(n)
            if len(started) == 4:
                met.set()
            await asyncio.wait_for(met.wait(), WAIT)
            return n

    return agent


@pytest.mark.parametrize("sync", [False, True], ids=["async-tools", "sync-tools"])
@pytest.mark.parametrize("driver", ["run", "run_async"])
def test_the_tools_of_one_model_response_run_at_once(run_id: str, sync: bool, driver: str) -> None:
    """Four tools asked for in one response all start before any of them returns (each
    waits for the others), under run (run_sync) and run_async; each is a durable call."""
    agent = four_tools_agent(sync=sync)
    if driver == "run":
        store: Any = ds.MemoryStore()
        step = ds.Step("s", lambda state: {"out": agent.run_sync("go").output})
        assert ds.run(run_id, [step], store) == {"out": "all met"}
    else:
        store = ds.AsyncMemoryStore()

        async def astep(state: Any) -> dict[str, Any]:
            return {"out": (await agent.run("go")).output}

        result = asyncio.run(ds.run_async(run_id, [ds.Step("s", astep)], store))
        assert result == {"out": "all met"}


def pair(tag: str, pause: dict[str, float]) -> Agent[None, str]:
    """An agent whose one tool call and answer name it: a result handed to the other agent
    would show in the answer."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        agents.effect(f"model.{tag}")
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("fetch", {"what": tag})])
        return ModelResponse(parts=[TextPart(f"{tag} saw {messages[-1].parts[0].content}")])

    agent = Agent(FunctionModel(model), capabilities=[Durable()], name=f"agent-{tag}")

    @agent.tool_plain
    async def fetch(what: str) -> str:
        await asyncio.sleep(pause[what])
        agents.effect(f"tool.{what}")
        return f"page of {what}"

    return agent


WANT = Counter(["model.a", "tool.a", "model.a", "model.b", "tool.b", "model.b"])


def test_two_agents_gathered_in_one_step_each_replay_their_own_calls(
    run_id: str, effects: Any
) -> None:
    """Two Durable agents gathered in a run_async step, interrupted at each of their
    calls, resumed with their speeds reversed: each answers from its own calls, and
    exactly the calls not recorded run again."""
    for k in range(sum(WANT.values())):
        pause = {"a": 0.02, "b": 0.0}
        a, b = pair("a", pause), pair("b", pause)
        store = ds.AsyncMemoryStore()

        async def step(state: Any, a: Any = a, b: Any = b) -> dict[str, Any]:
            ra, rb = await asyncio.gather(a.run("go"), b.run("go"))
            return {"a": ra.output, "b": rb.output, "ids": [ra.run_id, rb.run_id]}

        rid = f"{run_id}-{k}"
        effects(at=k)
        with pytest.raises((Crash, BaseExceptionGroup)):
            asyncio.run(ds.run_async(rid, [ds.Step("s", step)], store))
        cp = asyncio.run(store.load(rid))
        assert cp is not None
        again = effects()
        pause.update(a=0.0, b=0.02)
        state = asyncio.run(ds.run_async(rid, [ds.Step("s", step)], store))
        assert (state["a"], state["b"]) == ("a saw page of a", "b saw page of b"), k
        assert len(set(state["ids"])) == 2
        kept = Counter(_effect_of(r, state["ids"]) for r in cp.calls if "result" in r)
        assert Counter(again.seen) == WANT - kept, f"interrupted at {k}"


def _effect_of(record: Any, run_ids: list[str]) -> str:
    """The side effect of a recorded call: its key names the agent run that made it
    (agent a's run is the first of ``run_ids``)."""
    tag = "a" if record["key"].split("/")[0] == run_ids[0] else "b"
    return f"{record['name'].split('.')[0]}.{tag}"


def closing_its_loop(fn: Any) -> Any:
    """``fn`` for a pool thread: run_sync leaves an event loop set on the thread, closed
    here (else it is collected, unclosed, during another test)."""

    def run() -> Any:
        try:
            return fn()
        finally:
            loop = asyncio.get_event_loop_policy().get_event_loop()
            loop.close()
            asyncio.set_event_loop(None)

    return run


def test_an_agent_in_a_thread_the_step_started_is_refused(run_id: str, effects: Any) -> None:
    """A Durable agent run in a ThreadPoolExecutor inside a step would record nothing (the
    thread has no step context) and repeat every call after a crash: refused, loudly."""
    agent = agents.function_agent()

    def step(state: Any) -> dict[str, Any]:
        with ThreadPoolExecutor(1) as pool:
            job = closing_its_loop(lambda: agent.run_sync("go").output)
            return {"out": pool.submit(job).result()}

    with pytest.raises(RuntimeError, match="in a thread the step started"):
        ds.run(run_id, [ds.Step("s", step)], ds.MemoryStore())
    assert agents.EFFECTS.seen == []


def test_an_agent_in_a_thread_with_the_steps_context_is_refused(run_id: str, effects: Any) -> None:
    """With the step's context copied into the thread, its calls are refused instead: a
    thread's calls cannot be replayed in order."""
    agent = agents.function_agent()

    def step(state: Any) -> dict[str, Any]:
        ctx = contextvars.copy_context()
        with ThreadPoolExecutor(1) as pool:
            job = closing_its_loop(lambda: agent.run_sync("go").output)
            return {"out": pool.submit(ctx.run, job).result()}

    with pytest.raises(ds.StepMismatchError, match="from a thread the step started"):
        ds.run(run_id, [ds.Step("s", step)], ds.MemoryStore())
    assert agents.EFFECTS.seen == []


def test_an_agent_without_durable_in_a_step_is_warned_about_once(
    run_id: str, effects: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent without Durable() inside a step: one WARNING naming the agent, the step
    and the fix, not one per run; an agent with Durable() and one outside a step: none."""
    plain = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi")])), name="plain")
    durable = agents.function_agent()

    def step(state: Any) -> dict[str, Any]:
        return {"a": plain.run_sync("x").output, "b": plain.run_sync("y").output}

    with caplog.at_level(logging.WARNING, logger="durable_steps"):
        plain.run_sync("outside")  # not in a step: nothing to say
        ds.run(run_id, [ds.Step("s", step)], ds.MemoryStore())
        ds.run(f"{run_id}-d", [agents.sync_step(durable)], ds.MemoryStore())
    said = [r.getMessage() for r in caplog.records if "without Durable()" in r.getMessage()]
    assert len(said) == 1
    assert "'plain'" in said[0] and "step 's'" in said[0] and "Durable()" in said[0]


def test_tools_that_use_the_run_context_still_run_at_once(run_id: str) -> None:
    """A tool taking RunContext (its run id, its retry count) runs concurrently too, and
    its context names the agent run the step recorded."""
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("who", {"n": n}) for n in range(2)])
        return ModelResponse(parts=[TextPart("ok")])

    agent = Agent(FunctionModel(model), capabilities=[Durable()])
    both = asyncio.Event()

    @agent.tool
    async def who(ctx: RunContext[None], n: int) -> str:
        seen.append(ctx.run_id)
        if len(seen) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), WAIT)
        return ctx.run_id

    async def step(state: Any) -> dict[str, Any]:
        r = await agent.run("go")
        return {"id": r.run_id}

    out = asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], ds.AsyncMemoryStore()))
    assert seen == [out["id"], out["id"]]
