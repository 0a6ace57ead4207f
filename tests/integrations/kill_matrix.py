"""The kill matrix's child: every integration and mode run in processes SIGKILLed at each
side effect, all forked from one process that imported the frameworks once.

    python -m tests.integrations.kill_matrix        (from the repo; store from the environment)

(``-m``: run as a file, this directory would come first on ``sys.path`` and ``import
agents`` would find the Pydantic AI tests' ``agents.py``, not the OpenAI Agents SDK.)

It reads batches on stdin, one JSON line each: ``[{"case", "run_id", "at", "when"}, ...]``,
runs each kill in a process forked for it (a few at a time; the resumes shared out
among a few processes, each resuming its share on one store), and answers one JSON line:
``[{"run_id", "killed", "out"}, ...]`` -- ``killed``: the process died of SIGKILL, ``out``:
the run's final state when it finished. ``at`` (None: run to the end) is the side effect
(from 0) before which the process kills itself; ``when="stream"`` kills it instead in the
middle of the last model response's stream, once two of its tokens were streamed. So one
interpreter start and one import of each framework serve the whole matrix; each case is
still a real process, really killed.

Cases (every model request, tool call, handoff and guardrail appends its name to
``$SIDE_EFFECTS/RUN_ID.log`` through ``agents.EFFECTS`` or ``openai_runs.EFFECTS``):

- ``pai:MODE:N``: a Pydantic AI agent whose model asks for N lookups at once, then
  ``send_email``, then answers ``FINAL`` in tokens; MODE ``run`` (``await agent.run``),
  ``run_stream`` (its text deltas read), ``iter`` (``node.stream()`` on every model
  request and call-tools node);
- ``openai:tools`` (parallel tool calls) and ``openai:handoff`` (a handoff with
  guardrails): ``openai_runs``' scenarios;
- ``gather:N``: N sub-agents, plain ``call_async`` model/tool/model calls, gathered;
- ``af:fanout``: an Agent Framework workflow whose start fans out to three executors
  (one superstep, run at once) and joins them (``af_workflows.fan_out``), checkpointed
  by ``DurableCheckpointStorage``: a kill resumes from the latest checkpoint.

All run on the async store of the environment (the agents under ``run_async``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

import durable_steps as ds
from durable_steps.integrations.pydantic_ai import Durable

from . import af_workflows as af
from . import agents as pai
from . import openai_runs

FINAL = "Rome is warmer."
TOKENS = ["Rome ", "is ", "warm", "er."]
TOPICS = ["rome", "oslo", "lima"]
MID_STREAM = [False]
"""Set in a process to be killed in the middle of the last model response's stream."""
PARALLEL = 3
"""Cases run at once (each a process)."""


def effect(name: str) -> None:
    pai.EFFECTS(name)


# -- Pydantic AI: N parallel lookups, an email, the answer --------------------------------


def answered(messages: Any) -> int:
    return sum(isinstance(m, ModelResponse) for m in messages)


def pai_agent(n: int) -> Agent[None, str]:
    def whole(messages: Any, info: AgentInfo) -> ModelResponse:
        effect("model")
        turn = answered(messages)
        if turn == 0:
            return ModelResponse(
                parts=[
                    ToolCallPart("lookup", {"topic": t}, tool_call_id=f"lookup-{t}")
                    for t in TOPICS[:n]
                ]
            )
        if turn == 1:
            return ModelResponse(parts=[ToolCallPart("send_email", {"to": "ann"}, "email-ann")])
        return ModelResponse(parts=[TextPart(FINAL)])

    async def stream(messages: Any, info: AgentInfo) -> Any:
        effect("model")
        turn = answered(messages)
        if turn == 0:
            for j, t in enumerate(TOPICS[:n]):
                yield {
                    j: DeltaToolCall("lookup", json.dumps({"topic": t}), tool_call_id=f"lookup-{t}")
                }
        elif turn == 1:
            yield {0: DeltaToolCall("send_email", '{"to": "ann"}', tool_call_id="email-ann")}
        else:
            for i, token in enumerate(TOKENS):
                if i == 2 and MID_STREAM[0]:
                    os.kill(os.getpid(), signal.SIGKILL)
                yield token

    agent = Agent(FunctionModel(whole, stream_function=stream), capabilities=[Durable()])

    @agent.tool_plain
    async def lookup(topic: str) -> str:
        effect("tool.lookup")
        return f"{topic}: 21 C"

    @agent.tool_plain
    def send_email(to: str) -> str:  # a sync tool: run in a thread
        effect("tool.send_email")
        return f"sent to {to}"

    return agent


def pai_effects(n: int) -> list[str]:
    return ["model", *["tool.lookup"] * n, "model", "tool.send_email", "model"]


async def pai_run(mode: str, n: int) -> dict[str, Any]:
    agent = pai_agent(n)
    if mode == "run":
        return {"output": (await agent.run("go")).output}
    if mode == "run_stream":
        deltas: list[str] = []
        async with agent.run_stream("go") as streamed:
            async for delta in streamed.stream_text(delta=True, debounce_by=None):
                deltas.append(delta)
            return {"output": await streamed.get_output(), "deltas": "".join(deltas)}
    async with agent.iter("go") as run:
        async for node in run:
            if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                async with node.stream(run.ctx) as events:
                    async for _ in events:
                        pass
    assert run.result is not None
    return {"output": run.result.output}


# -- gathered sub-agents: plain call_async ------------------------------------------------


def gather_effects(n: int) -> list[str]:
    return [name for j in range(n) for name in (f"model.{j}", f"tool.{j}", f"model.{j}")]


async def gathered(n: int) -> dict[str, Any]:
    async def said(text: str) -> str:
        effect(ds.current_step().call[1])  # type: ignore[index] # inside a call
        await asyncio.sleep(0)
        return text

    async def sub(j: int) -> str:
        asked = await ds.call_async(f"model.{j}", said, f"look {j} up")
        found = await ds.call_async(f"tool.{j}", said, f"{asked}: found")
        return await ds.call_async(f"model.{j}", said, f"{found}, answered")

    return {"output": list(await asyncio.gather(*(sub(j) for j in range(n))))}


# -- an Agent Framework workflow: a fan-out of executors ----------------------------------


AF_OUTPUT = [" | ".join(f"worker.{j}: go" for j in range(af.FAN_OUT))]
_af_seen: list[str] = []


def af_effect(run_id: str, log: Path) -> Any:
    """An executor's side effect, logged as the others are (no step here: Agent Framework
    runs the workflow, our store keeps its checkpoints), the process killed at the k-th."""

    def effect(name: str) -> None:
        if len(_af_seen) == pai.EFFECTS.at and pai.EFFECTS.trip is not None:
            pai.EFFECTS.trip()
        _af_seen.append(name)
        with (log / f"{run_id}.log").open("a") as f:
            f.write(name + "\n")
            f.flush()
            os.fsync(f.fileno())

    return effect


async def af_run(store: ds.AsyncStore, run_id: str, log: Path) -> dict[str, Any]:
    """The fan-out, its chain named by the run id: from its latest checkpoint if it has
    one (a resume), else from its input."""
    storage = af.storage_on(store)
    workflow = af.fan_out(storage, run_id, af_effect(run_id, log))
    latest = await storage.get_latest(workflow_name=run_id)
    if latest is None:
        result = await workflow.run("go")
    else:
        result = await workflow.run(checkpoint_id=latest.checkpoint_id)
    return {"output": result.get_outputs()}


async def af_kept(store: ds.Store, run_id: str) -> Counter[str]:
    """The side effects of the supersteps the latest checkpoint has behind it."""
    latest = await af.storage_on(store).get_latest(workflow_name=run_id)
    done = 0 if latest is None else latest.iteration_count
    return Counter(e for step in af.FAN_EFFECTS[:done] for e in step)


# -- the cases ----------------------------------------------------------------------------


def expected(case: str) -> list[str]:
    kind, *rest = case.split(":")
    if kind == "pai":
        return pai_effects(int(rest[1]))
    if kind == "gather":
        return gather_effects(int(rest[0]))
    if kind == "af":
        return [e for step in af.FAN_EFFECTS for e in step]
    return openai_runs.EXPECTED[rest[0]]


def output(case: str) -> Any:
    kind, *rest = case.split(":")
    if kind == "pai":
        return FINAL
    if kind == "gather":
        return [f"look {j} up: found, answered" for j in range(int(rest[0]))]
    if kind == "af":
        return AF_OUTPUT
    return openai_runs.OUTPUT[rest[0]]


def kept(case: str, calls: Any) -> Counter[str]:
    """The side effects of the calls a checkpoint recorded: what must not run again."""
    if case.startswith("pai:"):
        return pai.kept(calls)
    return openai_runs.kept(calls)  # (each side effect named as its call)


def step(case: str) -> ds.Step:
    kind, *rest = case.split(":")
    if kind == "openai":
        return openai_runs.async_step(rest[0])

    async def fn(state: Any) -> dict[str, Any]:
        if kind == "pai":
            return await pai_run(rest[0], int(rest[1]))
        return await gathered(int(rest[0]))

    return ds.Step("agent", fn)


async def run_cases(items: list[dict[str, Any]], log: Path) -> None:
    """Run ``items`` one after the other on one store, each state in ``RUN_ID.out``."""
    async with ds.async_store_from_env() as store:
        for item in items:
            began = time.perf_counter()
            if item["case"].startswith("af:"):
                out = await af_run(store, item["run_id"], log)
            else:
                out = await ds.run_async(item["run_id"], [step(item["case"])], store)
            out["seconds"] = time.perf_counter() - began
            (log / f"{item['run_id']}.out").write_text(json.dumps(out))


# -- the process --------------------------------------------------------------------------


def forked(items: list[dict[str, Any]], log: Path) -> int:
    """The pid of a process that runs ``items`` (a kill's one, or resumes), each state
    in ``RUN_ID.out``."""
    pid = os.fork()
    if pid:
        return pid
    code = 3
    try:
        at, when = items[0].get("at"), items[0].get("when", "before")
        trip = lambda: os.kill(os.getpid(), signal.SIGKILL)  # noqa: E731
        for effects in (pai.EFFECTS, openai_runs.EFFECTS):
            effects.log, effects.trip = log, trip
            effects.at, effects.when = (None, "before") if when == "stream" else (at, when)
        MID_STREAM[0] = when == "stream"
        asyncio.run(run_cases(items, log))
        code = 0
    except BaseException:
        (log / f"{items[-1]['run_id']}.err").write_text(traceback.format_exc())
    finally:
        os._exit(code)


def batch(items: list[dict[str, Any]], log: Path) -> list[dict[str, Any]]:
    """Each kill in a process of its own; the resumes in ``PARALLEL`` processes, each
    resuming its share one after the other on one store (a store opened per run would
    cost more than the run on Cosmos DB)."""
    kills = [[i] for i in items if i.get("at") is not None or i.get("when") == "stream"]
    rest = [i for i in items if i.get("at") is None and i.get("when") != "stream"]
    groups = kills + [rest[j::PARALLEL] for j in range(PARALLEL) if rest[j::PARALLEL]]
    running: dict[int, list[dict[str, Any]]] = {}
    done: dict[str, dict[str, Any]] = {}
    while groups or running:
        while groups and len(running) < PARALLEL:
            group = groups.pop(0)
            running[forked(group, log)] = group
        pid, status = os.wait()
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        for item in running.pop(pid):
            run_id = item["run_id"]
            out, err = log / f"{run_id}.out", log / f"{run_id}.err"
            done[run_id] = {
                "run_id": run_id,
                "killed": killed,
                "out": json.loads(out.read_text()) if out.exists() else None,
                "error": err.read_text() if err.exists() else None,
            }
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)
    return [done[i["run_id"]] for i in items]


def main() -> None:
    log = Path(os.environ["SIDE_EFFECTS"])
    openai_runs.set_tracing_disabled(True)
    # Forked with no thread but this one (no store opened here): nothing held to inherit.
    assert threading.active_count() == 1, threading.enumerate()
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        print(json.dumps(batch(json.loads(line), log)), flush=True)


if __name__ == "__main__":
    main()
