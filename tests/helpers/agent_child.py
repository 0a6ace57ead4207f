"""An agent loop in a process of its own, for tests that kill it mid-loop.

    python tests/helpers/agent_child.py MODE RUN_ID      (store from the environment)

MODE: ``sync`` (``call`` under ``run``), ``async`` (``await call_async`` under
``run_async``), ``gather`` (``run_async``, each round's tool calls gathered).

The model is a script: for ``rounds(run_id)`` rounds (3 to 10, decided by the run id)
it asks for one or two tools, then it answers. Every model request and tool call
appends "INDEX NAME" (its index in the step's journal) to $SIDE_EFFECTS before it
returns, so a test can count what ran. Prints the final state as JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from typing import Any

import durable_steps as ds


def rounds(run_id: str) -> int:
    return 3 + int(hashlib.sha256(run_id.encode()).hexdigest(), 16) % 8


def effect() -> None:
    index, name = ds.current_step().call or (-1, "?")
    with open(os.environ["SIDE_EFFECTS"], "a") as f:
        f.write(f"{index} {name}\n")
        f.flush()
        os.fsync(f.fileno())


def model(run_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    effect()
    done = sum(1 for m in messages if m["role"] == "assistant")
    if done < rounds(run_id):
        asks = [{"q": f"{done}-{j}"} for j in range(1 + done % 2)]
        return {"role": "assistant", "tool_calls": asks, "content": None}
    return {"role": "assistant", "tool_calls": [], "content": f"done after {len(messages)}"}


def tool(tc: dict[str, Any]) -> str:
    time.sleep(0.003)
    effect()
    return f"result of {tc['q']}"


async def tool_async(tc: dict[str, Any]) -> str:
    # Finishes out of order: later-started calls of a round may be recorded first.
    await asyncio.sleep(0.002 * (3 - int(tc["q"][-1])))
    effect()
    return f"result of {tc['q']}"


def agent(state: Any) -> dict[str, Any]:
    run_id = ds.current_step().run_id
    messages = [{"role": "user", "content": state["question"]}]
    while True:
        reply = ds.call("llm", model, run_id, messages)
        if not reply["tool_calls"]:
            return {"answer": reply["content"], "messages": messages}
        messages.append(reply)
        for tc in reply["tool_calls"]:
            messages.append({"role": "tool", "content": ds.call("tool", tool, tc)})


async def agent_async(state: Any, gather: bool) -> dict[str, Any]:
    run_id = ds.current_step().run_id
    messages = [{"role": "user", "content": state["question"]}]
    while True:
        reply = await ds.call_async("llm", model, run_id, messages)
        if not reply["tool_calls"]:
            return {"answer": reply["content"], "messages": messages}
        messages.append(reply)
        if gather:
            calls = [ds.call_async("tool", tool_async, tc) for tc in reply["tool_calls"]]
            outs = await asyncio.gather(*calls)
        else:
            outs = [await ds.call_async("tool", tool_async, tc) for tc in reply["tool_calls"]]
        messages.extend({"role": "tool", "content": out} for out in outs)


def workflow(mode: str) -> ds.Workflow:
    if mode == "sync":
        return ds.Workflow("agent", [ds.Step("agent", agent)])

    async def step(state: Any) -> dict[str, Any]:
        return await agent_async(state, gather=mode == "gather")

    return ds.Workflow("agent", [ds.Step("agent", step)])


async def main_async(mode: str, run_id: str) -> None:
    async with ds.async_store_from_env() as store:
        state = await workflow(mode).run_async(run_id, store, input={"question": "why?"})
    print(json.dumps(state))


def main() -> None:
    mode, run_id = sys.argv[1], sys.argv[2]
    if mode == "sync":
        with ds.store_from_env() as store:
            state = workflow(mode).run(run_id, store, input={"question": "why?"})
        print(json.dumps(state))
    else:
        asyncio.run(main_async(mode, run_id))


if __name__ == "__main__":
    main()
