"""The chat service's agent: a workflow that ``durable-steps worker agent:CHAT`` serves.

One step: a Pydantic AI agent made durable with ``Durable()`` answers the question with
``run_stream``. Each text delta goes to the run's stream ``"model"`` as the model
produces it (``{"text": ...}``); the web app (``app.py``) serves that stream to the
browser. The model is a fake that streams a fixed answer one word at a time, every
``CHAT_TOKEN_DELAY`` seconds (default 0.2): slow enough to kill the worker mid-answer.
Swap ``FunctionModel(...)`` for ``"openai:gpt-5.2"`` (or any model) to use a real one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from durable_steps import Step, Workflow, close_stream_async
from durable_steps.integrations.pydantic_ai import Durable

STREAM = "model"


def answer_to(question: str) -> str:
    """What the fake model answers (the test compares the streamed text with it)."""
    return (
        f"You asked: {question} A durable run checkpoints every step and every model "
        "call, so a worker that dies mid-answer costs only the answer in flight: another "
        "worker resumes the run, and this page keeps reading at its offset."
    )


async def fake_model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    delay = float(os.environ.get("CHAT_TOKEN_DELAY", "0.2"))
    question = str(messages[-1].parts[-1].content)  # type: ignore[union-attr] # the user prompt
    for word in answer_to(question).split(" "):
        await asyncio.sleep(delay)  # the pace of a real model's tokens
        yield word + " "


def whole(messages: list[ModelMessage], info: AgentInfo) -> Any:
    raise NotImplementedError("this example only streams")


agent = Agent(
    FunctionModel(whole, stream_function=fake_model),
    name="chat",
    capabilities=[Durable(stream=STREAM)],
)


async def reply(state: Any) -> dict[str, Any]:
    async with agent.run_stream(state["question"]) as streamed:
        answer = await streamed.get_output()
    await close_stream_async(STREAM)  # readers stop here
    return {"answer": answer.strip()}


CHAT = Workflow("chat", [Step("reply", reply)])
