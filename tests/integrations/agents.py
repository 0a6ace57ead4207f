"""Pydantic AI agents for the integration's tests, and the child process that runs one
inside a step so that a test can kill it for real.

    python tests/integrations/agents.py DRIVER AGENT RUN_ID...   store from the environment

DRIVER  sync      ``agent.run_sync`` in a ``run()`` step
        async     ``await agent.run`` in a ``run_async()`` step (async store)
        workflow  a two-step ``Workflow`` (the agent is its second step), run with
                  ``Workflow.run``; ``recover`` (as DRIVER) resumes every run of it
AGENT   function  ``FunctionModel``: asks for two tools twice (one call is refused with
                  ``ModelRetry``), then answers: 3 model requests and 4 tool calls
        test      ``TestModel`` (its requests counted): calls both tools once, answers

The runs are made one after the other. Every model request and tool call that runs
appends a line to ``$SIDE_EFFECTS/RUN_ID.log`` (the durable run's id): its name, and
for tools the agent run's ``run_id``. With ``KILL_AT=k`` the process SIGKILLs itself at
its k-th side effect (from 0): before it runs (``KILL_WHEN=before``: k calls finished and
recorded) or after it ran, before its result is recorded (``after``). Prints each run's
result as JSON: ``{RUN_ID: state}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ModelResponse, ModelRetry, RunContext, TextPart, ToolCallPart
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import FunctionToolset

import durable_steps as ds
from durable_steps.integrations.pydantic_ai import Durable


class Effects:
    """Side effects, counted (and logged to a file per run in ``log``); ``trip`` runs at
    the k-th one."""

    def __init__(
        self,
        log: Path | None = None,
        at: int | None = None,
        when: str = "before",
        trip: Callable[[], None] | None = None,
    ) -> None:
        self.log, self.at, self.when, self.trip = log, at, when, trip
        self.seen: list[str] = []

    def __call__(self, name: str) -> None:
        n = len(self.seen)
        if n == self.at and self.when == "before" and self.trip:
            self.trip()
        self.seen.append(name)
        if self.log is not None:
            with (self.log / f"{ds.current_step().run_id}.log").open("a") as f:
                f.write(name + "\n")
                f.flush()
                os.fsync(f.fileno())
        if n == self.at and self.when == "after" and self.trip:
            self.trip()


EFFECTS = Effects()
"""Where this process's side effects go (set up by the child's main; replaced by tests)."""


def effect(name: str) -> None:
    EFFECTS(name)


# -- FunctionModel: 3 requests, 4 tool calls -----------------------------------------------


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    effect("model")
    answered = sum(isinstance(m, ModelResponse) for m in messages)
    if answered == 0:
        return ModelResponse(
            parts=[
                ToolCallPart("add", {"a": 1, "b": 2}),
                ToolCallPart("get_weather", {"city": "Paris"}),
            ]
        )
    if answered == 1:
        return ModelResponse(
            parts=[ToolCallPart("add", {"a": -1, "b": 2}), ToolCallPart("add", {"a": 40, "b": 2})]
        )
    seen = [
        part.content
        for m in messages
        for part in m.parts
        if part.part_kind in ("tool-return", "retry-prompt")
    ]
    return ModelResponse(parts=[TextPart(f"done: {json.dumps(seen, sort_keys=True)}")])


FUNCTION_EFFECTS = [
    "model",
    "tool.add",
    "tool.get_weather",
    "model",
    "tool.add",
    "tool.add",
    "model",
]
FUNCTION_CALLS = [
    "model.request",
    "tool.add",
    "tool.get_weather",
    "model.request",
    "tool.add",
    "tool.add",
    "model.request",
]
FUNCTION_OUTPUT = 'done: [3, {"city": "Paris", "temp_c": 21.5}, "a must be >= 0", 42]'


def function_agent(tool_name: str = "add") -> Agent[None, str]:
    weather = FunctionToolset[None](id="weather")

    @weather.tool
    def get_weather(ctx: RunContext[None], city: str) -> dict[str, Any]:  # a sync tool: a thread
        effect(f"tool.get_weather {ctx.run_id}")
        return {"city": city, "temp_c": 21.5}

    agent = Agent(FunctionModel(script), toolsets=[weather], capabilities=[Durable()])

    async def add(ctx: RunContext[None], a: int, b: int) -> int:
        effect(f"tool.add {ctx.run_id}")
        if a < 0:
            raise ModelRetry("a must be >= 0")
        return a + b

    agent.tool(add, name=tool_name)
    return agent


# -- TestModel: 2 requests, 2 tool calls ---------------------------------------------------


class CountedTestModel(TestModel):
    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        effect("model")
        return await super().request(messages, model_settings, model_request_parameters)


TEST_EFFECTS = ["model", "tool.lookup", "tool.scale", "model"]
TEST_OUTPUT = '{"lookup":{"topic":"a","pages":[1,2]},"scale":0}'


def test_agent() -> Agent[None, str]:
    agent = Agent(CountedTestModel(), capabilities=[Durable()])

    @agent.tool
    async def lookup(ctx: RunContext[None], topic: str) -> dict[str, Any]:
        effect(f"tool.lookup {ctx.run_id}")
        return {"topic": topic, "pages": [1, 2]}

    @agent.tool
    def scale(ctx: RunContext[None], n: int) -> int:
        effect(f"tool.scale {ctx.run_id}")
        return n * 10

    return agent


AGENTS: dict[str, Callable[[], Agent[None, str]]] = {"function": function_agent, "test": test_agent}


def effect_of(call: str) -> str | None:
    """The side effect a recorded call of these agents stands for (None: none)."""
    if call.startswith("model.request"):
        return "model"
    if call.startswith("tool.") and not call.endswith(".validate_args"):
        return call
    return None


def kept(calls: Any) -> Counter[str]:
    """The side effects of the calls a checkpoint has recorded: what must not run again."""
    return Counter(e for r in calls if "result" in r and (e := effect_of(r["name"])) is not None)


EXPECTED_EFFECTS = {"function": FUNCTION_EFFECTS, "test": TEST_EFFECTS}


# -- steps ----------------------------------------------------------------------------------


def result(r: Any) -> dict[str, Any]:
    requests = sum(isinstance(m, ModelResponse) for m in r.all_messages())
    return {"output": r.output, "run_id": r.run_id, "requests": requests}


def sync_step(agent: Agent[None, str]) -> ds.Step:
    return ds.Step("agent", lambda state: result(agent.run_sync(state.get("question", "go"))))


def async_step(agent: Agent[None, str]) -> ds.Step:
    async def fn(state: Any) -> dict[str, Any]:
        return result(await agent.run(state.get("question", "go")))

    return ds.Step("agent", fn)


def workflow(agent: Agent[None, str]) -> ds.Workflow:
    def prepare(state: Any) -> dict[str, Any]:
        effect("prepare")
        return {"question": f"go, {state['who']}"}

    return ds.Workflow("agent-flow", [ds.Step("prepare", prepare), sync_step(agent)])


def main() -> None:
    driver, kind, run_ids = sys.argv[1], sys.argv[2], sys.argv[3:]
    at = os.environ.get("KILL_AT")
    EFFECTS.log = Path(os.environ["SIDE_EFFECTS"])
    EFFECTS.at = int(at) if at else None
    EFFECTS.when = os.environ.get("KILL_WHEN", "before")
    EFFECTS.trip = lambda: os.kill(os.getpid(), signal.SIGKILL)
    agent = AGENTS[kind]()
    out: dict[str, Any] = {}
    if driver == "async":

        async def go() -> None:
            async with ds.async_store_from_env() as store:
                for run_id in run_ids:
                    out[run_id] = await ds.run_async(run_id, [async_step(agent)], store)

        asyncio.run(go())
    else:
        with ds.store_from_env() as store:
            for run_id in run_ids:
                if driver == "sync":
                    out[run_id] = ds.run(run_id, [sync_step(agent)], store)
                elif driver == "workflow":
                    out[run_id] = workflow(agent).run(run_id, store, input={"who": "ann"})
                elif driver == "recover":
                    done = ds.recover(store, [workflow(agent)])
                    assert {(r.run_id, r.outcome) for r in done} == {
                        (r, "completed") for r in run_ids
                    }, done
                    for r in run_ids:
                        cp = store.load(r)
                        assert cp is not None
                        out[r] = dict(cp.state)
                    break
                else:
                    raise SystemExit(f"unknown driver {driver}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
