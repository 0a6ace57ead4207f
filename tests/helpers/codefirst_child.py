"""A code-first agent loop in a process of its own, for tests that kill it mid-run.

    python tests/helpers/codefirst_child.py RUN_ID      (store from the environment)

The agent (``@durable.workflow``, in a queue) asks a scripted model (``@durable.step``)
for ``ROUNDS`` rounds of two tools, run in parallel (``asyncio.gather`` of decorated
async steps, keyed by the tool call's id), writes a stream entry per turn, then has a
child workflow summarise the answer and takes a message from its mailbox. Every step
appends its effect's name to $SIDE_EFFECTS before it returns (and returns that name in
its result, so a test can tell which effects are recorded). The process serves the
run as a worker does (``recover_async`` passes) until it completes, then prints its
result as JSON. ``CRASH_AT`` (in-process use): the effect at whose making a step raises
``Crash`` instead, the stand-in for a kill where the store cannot outlive a process.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from pydantic import BaseModel

import durable_steps as ds
from durable_steps import durable

ROUNDS = 3
EFFECTS = [
    *(f"model-{t}" for t in range(ROUNDS + 1)),
    *(f"tool-t{t}-{j}" for t in range(ROUNDS) for j in range(2)),
    "shout",
]
"""Every effect a completed run made, once each."""
CRASH_AT: list[str] = []


class Crash(Exception):
    """An in-process stand-in for a kill."""


class ToolCall(BaseModel):
    id: str
    q: str


class Reply(BaseModel):
    turn: int
    tool_calls: list[ToolCall]
    content: str | None
    effect: str


class Answer(BaseModel):
    text: str
    summary: str
    feedback: str
    tools: list[str]


def effect(name: str) -> str:
    path = os.environ["SIDE_EFFECTS"]
    with open(path, "a") as f:
        f.write(f"{name}\n")
        f.flush()
        os.fsync(f.fileno())
    if CRASH_AT and name == CRASH_AT[0]:
        raise Crash(f"crash at effect {name}")
    return name


@durable.step
async def model(question: str, turn: int) -> Reply:
    name = effect(f"model-{turn}")
    if turn < ROUNDS:
        calls = [ToolCall(id=f"t{turn}-{j}", q=f"{question} {turn}.{j}") for j in range(2)]
        return Reply(turn=turn, tool_calls=calls, content=None, effect=name)
    return Reply(turn=turn, tool_calls=[], content=f"answered in {turn} turns", effect=name)


@durable.step(key=lambda tc: tc.id)
async def tool(tc: ToolCall) -> str:
    # later tools of a round finish first: records land out of order
    await asyncio.sleep(0.003 * (2 - int(tc.id[-1])))
    return effect(f"tool-{tc.id}")


@durable.step
async def shout(text: str) -> str:
    return f"{effect('shout')}: {text.upper()}"


@durable.workflow(name="cf-summary")
async def summarize(text: str) -> str:
    return await shout(text)


@durable.workflow(name="cf-agent", queue=ds.Queue("cf-agents", concurrency=2))
async def agent(question: str) -> Answer:
    run_id = ds.current_step().run_id
    tools: list[str] = []
    turn = 0
    while True:
        reply = await model(question, turn)
        await ds.write_stream_async("turns", f"turn {turn}")
        if not reply.tool_calls:
            break
        tools += await asyncio.gather(*(tool(tc) for tc in reply.tool_calls))
        turn += 1
    child = await summarize.start_child_async(f"{run_id}-summary", reply.content or "")
    summary = await child.result_async()
    feedback = await ds.receive_async("feedback")
    return Answer(text=reply.content or "", summary=summary, feedback=feedback, tools=tools)


WORKFLOWS = [agent, summarize]


async def serve(store: ds.AsyncStore, run_id: str) -> Answer:
    """What a worker does for the run and its child, until the run completes."""
    handle = agent.handle_async(run_id, store)
    while await handle.status() != "completed":
        await ds.recover_async(store, WORKFLOWS)
        await asyncio.sleep(0.005)
    return await handle.result()


async def main(run_id: str) -> dict[str, Any]:
    store = ds.async_store_from_env()
    try:
        return (await serve(store, run_id)).model_dump()
    finally:
        await store.close()  # type: ignore[func-returns-value]


if __name__ == "__main__":
    import json

    print(json.dumps(asyncio.run(main(sys.argv[1]))))
