"""A Microsoft Agent Framework workflow for the tests of
``durable_steps.integrations.agent_framework``: four executors -- ``start``, an agent
executor ``writer`` (a fake chat client: no network), ``gate``, and ``reviewer``, which
asks a person (a request of Agent Framework's human in the loop) -- checkpointed on a
durable-steps store by ``DurableCheckpointStorage``.

Run as a process (``python -m tests.integrations.af_workflows MODE``) on the store that
``store_from_env`` opens, with ``SIDE_EFFECTS`` a directory and ``AF_WORKFLOW`` the
workflow's name:

- ``start``: runs the workflow from its input; with ``AF_BLOCK_AT_GATE`` set the gate
  writes ``gate`` in SIDE_EFFECTS and blocks (the test SIGKILLs the process there: the
  superstep after the agent's, whose checkpoint is saved);
- ``resume``: restores the latest checkpoint (``get_latest``) and runs to the person's
  request; prints ``{"requests": [ids]}``;
- ``answer``: restores the latest checkpoint with the person's answer; prints
  ``{"outputs": [...]}``.

Each model call appends a line to ``SIDE_EFFECTS/model.log``.
"""

# No `from __future__ import annotations`: Agent Framework 1.0 reads a handler's
# annotations as written and refuses them as strings.
import asyncio
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    AgentExecutor,
    AgentExecutorRequest,
    AgentExecutorResponse,
    BaseChatClient,
    ChatResponse,
    Executor,
    Message,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    handler,
    response_handler,
)

import durable_steps as ds
from durable_steps.integrations.agent_framework import DurableCheckpointStorage


@dataclass
class Review:
    """What the reviewer asks a person about (a type of ours in a checkpoint)."""

    draft: str


def effects() -> Path | None:
    where = os.environ.get("SIDE_EFFECTS")
    return Path(where) if where else None


class FakeChat(BaseChatClient):  # type: ignore[misc]
    """A chat client that drafts a line about the last message, and logs each call."""

    calls = 0

    async def _inner_get_response(self, *, messages: Any, **kwargs: Any) -> ChatResponse:
        FakeChat.calls += 1
        if (where := effects()) is not None:
            with (where / "model.log").open("a") as log:
                log.write("model\n")
        return ChatResponse(
            messages=[Message(role="assistant", contents=[f"draft: {messages[-1].text}"])]
        )


class Start(Executor):  # type: ignore[misc]
    @handler  # type: ignore[misc]
    async def start(self, topic: str, ctx: WorkflowContext[AgentExecutorRequest]) -> None:
        ctx.set_state("topic", topic)
        ask = Message(role="user", contents=[topic])
        await ctx.send_message(AgentExecutorRequest(messages=[ask], should_respond=True))


AT_GATE: list[Callable[[], None]] = []
"""What the gate does first: nothing, or what a test has it do (block, crash)."""


def block() -> None:
    if (where := effects()) is not None:
        (where / "gate").write_text("reached")
    threading.Event().wait()  # the test kills the process here


class Gate(Executor):  # type: ignore[misc]
    @handler  # type: ignore[misc]
    async def passed(self, reply: AgentExecutorResponse, ctx: WorkflowContext[str]) -> None:
        for act in AT_GATE:
            act()
        await ctx.send_message(reply.agent_response.text)


class Reviewer(Executor):  # type: ignore[misc]
    @handler  # type: ignore[misc]
    async def review(self, draft: str, ctx: WorkflowContext) -> None:
        await ctx.request_info(Review(draft), str)

    @response_handler  # type: ignore[misc]
    async def answered(self, asked: Review, answer: str, ctx: WorkflowContext[None, str]) -> None:
        await ctx.yield_output(f"{asked.draft} ({answer})")


def build(storage: DurableCheckpointStorage, name: str) -> Workflow:
    start, gate, reviewer = Start(id="start"), Gate(id="gate"), Reviewer(id="reviewer")
    writer = AgentExecutor(
        Agent(client=FakeChat(), name="writer", instructions="draft"), id="writer"
    )
    return (
        WorkflowBuilder(start_executor=start, checkpoint_storage=storage, name=name)
        .add_edge(start, writer)
        .add_edge(writer, gate)
        .add_edge(gate, reviewer)
        .build()
    )


# -- a fan-out (the kill matrix: kill_matrix.py) ----------------------------------------

FAN_OUT = 3
FAN_EFFECTS = [["start"], [f"worker.{j}" for j in range(FAN_OUT)], ["join"]]
"""The side effects of each superstep of ``fan_out``, in order."""


class FanStart(Executor):  # type: ignore[misc]
    def __init__(self, effect: Callable[[str], None], **kw: Any) -> None:
        super().__init__(**kw)
        self.effect = effect

    @handler  # type: ignore[misc]
    async def start(self, topic: str, ctx: WorkflowContext[str]) -> None:
        self.effect("start")
        await ctx.send_message(topic)


class FanWorker(Executor):  # type: ignore[misc]
    def __init__(self, effect: Callable[[str], None], **kw: Any) -> None:
        super().__init__(**kw)
        self.effect = effect

    @handler  # type: ignore[misc]
    async def work(self, topic: str, ctx: WorkflowContext[str]) -> None:
        self.effect(self.id)
        await asyncio.sleep(0)
        await ctx.send_message(f"{self.id}: {topic}")


class FanJoin(Executor):  # type: ignore[misc]
    def __init__(self, effect: Callable[[str], None], **kw: Any) -> None:
        super().__init__(**kw)
        self.effect = effect

    @handler  # type: ignore[misc]
    async def join(self, parts: list[str], ctx: WorkflowContext[None, str]) -> None:
        self.effect("join")
        await ctx.yield_output(" | ".join(sorted(parts)))


def fan_out(
    storage: DurableCheckpointStorage, name: str, effect: Callable[[str], None]
) -> Workflow:
    """``start`` fans out to ``FAN_OUT`` workers (one superstep, run at once), whose
    answers ``join`` gathers; every executor calls ``effect`` with its id first."""
    start, join = FanStart(effect, id="start"), FanJoin(effect, id="join")
    workers = [FanWorker(effect, id=f"worker.{j}") for j in range(FAN_OUT)]
    return (
        WorkflowBuilder(start_executor=start, checkpoint_storage=storage, name=name)
        .add_fan_out_edges(start, workers)
        .add_fan_in_edges(workers, join)
        .build()
    )


def storage_on(store: ds.Store | ds.AsyncStore) -> DurableCheckpointStorage:
    return DurableCheckpointStorage(store, types=[Review])


async def main(mode: str) -> dict[str, Any]:
    name = os.environ["AF_WORKFLOW"]
    with ds.store_from_env() as store:
        storage = storage_on(store)
        workflow = build(storage, name)
        if mode == "start":
            result = await workflow.run("cats")
            return {"requests": [e.request_id for e in result.get_request_info_events()]}
        latest = await storage.get_latest(workflow_name=name)
        assert latest is not None, "no checkpoint to resume from"
        if mode == "resume":
            result = await workflow.run(checkpoint_id=latest.checkpoint_id)
            return {"requests": [e.request_id for e in result.get_request_info_events()]}
        (request,) = latest.pending_request_info_events
        result = await workflow.run(checkpoint_id=latest.checkpoint_id, responses={request: "ok"})
        return {"outputs": result.get_outputs()}


if __name__ == "__main__":
    if os.environ.get("AF_BLOCK_AT_GATE"):
        AT_GATE.append(block)
    print(json.dumps(asyncio.run(main(sys.argv[1]))), flush=True)
