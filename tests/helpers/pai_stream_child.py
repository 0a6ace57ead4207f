"""A streamed Pydantic AI agent with parallel tools in a process of its own, killed for
real at every point of its run.

    python tests/helpers/pai_stream_child.py kill MODE RUN_ID:TOOLS:K ...
    python tests/helpers/pai_stream_child.py resume MODE RUN_ID:TOOLS ...

(store from the environment; side effects in ``$SIDE_EFFECTS/RUN_ID.log``).

MODE: ``run_stream`` (``agent.run_stream`` in a ``run_async`` step), ``run_stream_sync``
(in a ``run`` step), ``iter`` (``agent.iter`` with ``node.stream()`` on every model
request and call-tools node, ``run_async``). The model (streamed) asks for ``TOOLS``
lookups at once (``lookup(a)``, ``lookup(b)``, ...), then for ``send_email(ann)``, then
answers ``ANSWER`` in tokens. Side effects, one line each: ``model N`` as a request
starts (N: messages before it), ``lookup X``, ``email ann``, ``token J`` as the answer's
J-th token is handed over, and ``end`` when the agent has finished, before the step
returns.

``kill``: the imports made once, a process forked per ``RUN_ID:TOOLS:K`` (all at once)
runs the run and SIGKILLs itself right after its K-th side effect (from 0) -- the last,
``end``: after the agent finished, before the step completed; each fork must die by
SIGKILL. ``resume``: runs each to its end (a fork each, all at once) and prints
``{RUN_ID: output}`` as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, CallToolsNode, ModelRequestNode
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

import durable_steps as ds
from durable_steps.integrations.pydantic_ai import Durable

ANSWER = ["Rome ", "is ", "warmer."]
KILL: dict[str, int] = {}
"""The kill point of the run this process runs (``kill``), by run id."""


def effect(line: str) -> None:
    run_id = ds.current_step().run_id
    log = Path(os.environ["SIDE_EFFECTS"]) / f"{run_id}.log"
    with log.open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    seen = len(log.read_text().splitlines())
    if KILL.get(run_id) == seen - 1:
        os.kill(os.getpid(), signal.SIGKILL)


def agent_for(tools: int) -> Agent[None, str]:
    async def stream(messages: Any, info: Any) -> Any:
        effect(f"model {len(messages)}")
        if len(messages) == 1:
            for j in range(tools):
                city = "abc"[j]
                yield {j: DeltaToolCall("lookup", json.dumps({"city": city}), tool_call_id=f"c{j}")}
        elif not any("send_email" in str(m) for m in messages):
            yield {0: DeltaToolCall("send_email", '{"to": "ann"}', tool_call_id="e0")}
        else:
            for j, token in enumerate(ANSWER):
                yield token
                await asyncio.sleep(0.01)  # handed over and written before the next
                effect(f"token {j}")

    model = FunctionModel(lambda m, i: None, stream_function=stream)
    agent = Agent(model, capabilities=[Durable()])

    @agent.tool_plain
    async def lookup(city: str) -> str:
        await asyncio.sleep(0.01 * ("abc".index(city) % 2))  # they finish out of order
        effect(f"lookup {city}")
        return f"{city}: 20C"

    @agent.tool_plain
    async def send_email(to: str) -> str:
        effect(f"email {to}")
        return "sent"

    return agent


async def answer(agent: Agent[None, str], mode: str) -> str:
    if mode == "run_stream":
        async with agent.run_stream("Is Rome warmer?") as streamed:
            return await streamed.get_output()
    async with agent.iter("Is Rome warmer?") as run:
        async for node in run:
            if isinstance(node, ModelRequestNode | CallToolsNode):
                async with node.stream(run.ctx) as events:
                    async for _ in events:
                        pass
    assert run.result is not None
    return run.result.output


def workflow(mode: str, tools: int) -> ds.Workflow:
    agent = agent_for(tools)
    if mode == "run_stream_sync":

        def step(state: Any) -> dict[str, Any]:
            output = agent.run_stream_sync("Is Rome warmer?").get_output()
            effect("end")
            return {"output": output}

        return ds.Workflow("weather", [ds.Step("agent", step)])

    async def astep(state: Any) -> dict[str, Any]:
        output = await answer(agent, mode)
        effect("end")
        return {"output": output}

    return ds.Workflow("weather", [ds.Step("agent", astep)])


def run_one(mode: str, tools: int, run_id: str) -> str:
    flow = workflow(mode, tools)
    if mode == "run_stream_sync":
        with ds.store_from_env() as store:
            return flow.run(run_id, store)["output"]  # type: ignore[no-any-return]

    async def main() -> str:
        async with ds.async_store_from_env() as store:
            return (await flow.run_async(run_id, store))["output"]  # type: ignore[no-any-return]

    return asyncio.run(main())


def main() -> None:
    what, mode, *runs = sys.argv[1:]
    out = Path(os.environ["SIDE_EFFECTS"])
    forks = {}
    for spec in runs:
        run_id, tools, *k = spec.split(":")
        pid = os.fork()
        if pid == 0:
            if k:
                KILL[run_id] = int(k[0])
            try:
                (out / f"{run_id}.out").write_text(run_one(mode, int(tools), run_id))
                os._exit(0)
            finally:
                os._exit(3)
        forks[pid] = spec
    for pid, spec in forks.items():
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        if (what == "kill") != killed:
            sys.exit(f"{spec}: {what} ended with status {status}")
    if what == "resume":
        ids = [spec.split(":")[0] for spec in runs]
        print(json.dumps({run_id: (out / f"{run_id}.out").read_text() for run_id in ids}))


if __name__ == "__main__":
    main()
