"""Streamed model responses inside a step (``Runner.run_streamed``): live to the caller,
written to a run stream, recorded as one call when complete.

The SDK's streamed run asks the model for ``stream_response`` -- the Responses API's
events, ending with ``response.completed`` -- and builds the turn's ``ModelResponse``
from that last event. Inside a step, the durable model's ``stream_response`` is
``live_stream`` here, the way ``pydantic_ai/_live.py`` does it for Pydantic AI:

- The model's stream is read to its end inside one ``call_async("model.get_response")``
  -- the same call, keyed the same (``RunKeys.model``), recording the same
  ``ModelResponse``, as a response asked for without streaming -- run in a task of its
  own, created at the same place on every execution (so the step's journal numbers it
  the same on replay).
- Inside the call, each event is handed to the caller's channel as it comes, and a
  chunk is appended to the run stream (``write_stream_async``; the runner's ``stream=``,
  default ``"model"``; ``None``: none) per text delta (``{"text": ...}``) and per
  finished tool call (``{"tool_call": {"tool", "id", "args"}}``) -- a write inside a call,
  so the stream's resume rules hold: a recorded call is replayed without writing again,
  and a call killed in flight marks what it wrote with a ``StreamReset`` when it runs
  again.
- The caller's side yields the events as they come; the SDK builds the response from
  the real ``response.completed`` event, which is what the call records. On replay no
  event comes: the call returns its record, and the caller gets one
  ``response.completed`` event made from it (its output items, id and usage).
- A caller that stops reading early: the call still runs to its end and records. Any
  other exception into the stream (a crash) cancels the call: it records nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

from agents import ModelResponse
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

from durable_steps import call_async, write_stream_async

from .._common import Channel, settled
from ._recorded import RESPONSE

STREAM: ContextVar[str | None] = ContextVar("durable_steps_openai_stream", default="model")
"""The run stream a streamed run inside a step writes its chunks to (None: none): set
by ``DurableRunner.run_streamed`` from its ``stream``."""


def chunk_of(event: object) -> dict[str, Any] | None:
    """What goes to the run stream for one model event (see the top), or nothing."""
    if isinstance(event, ResponseTextDeltaEvent) and event.delta:
        return {"text": event.delta}
    if isinstance(event, ResponseOutputItemDoneEvent) and isinstance(
        event.item, ResponseFunctionToolCall
    ):
        item = event.item
        return {"tool_call": {"tool": item.name, "id": item.call_id, "args": item.arguments}}
    return None


def _usage(response: Response) -> Any:
    from agents.usage import Usage

    u = response.usage
    if u is None:
        return Usage(requests=1)
    return Usage(
        requests=1,
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        total_tokens=u.total_tokens or 0,
        input_tokens_details=u.input_tokens_details,
        output_tokens_details=u.output_tokens_details,
    )


def completed_event(recorded: ModelResponse) -> ResponseCompletedEvent:
    """The ``response.completed`` event the SDK builds ``recorded`` back from."""
    usage = recorded.usage
    response = Response.model_construct(
        id=recorded.response_id or "",
        created_at=time.time(),
        model="",
        object="response",
        output=list(recorded.output),
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        usage=ResponseUsage.model_construct(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            input_tokens_details=usage.input_tokens_details,
            output_tokens_details=usage.output_tokens_details,
        ),
    )
    return ResponseCompletedEvent.model_construct(
        type="response.completed", response=response, sequence_number=0
    )


async def live_stream(
    open_stream: Callable[[], AsyncIterator[Any]], key: str | None
) -> AsyncIterator[Any]:
    """The model's stream (``open_stream()``) as the caller sees it inside a step, its
    call keyed ``key`` (``RunKeys.model``)."""
    channel, stream = Channel(), STREAM.get()

    async def body() -> ModelResponse:
        completed: Response | None = None
        async for event in open_stream():
            if stream is not None and (chunk := chunk_of(event)) is not None:
                await write_stream_async(stream, chunk)
            channel.put(event)
            if isinstance(event, ResponseCompletedEvent):
                completed = event.response
        if completed is None:
            raise RuntimeError(
                "the model's stream ended without a response.completed event: there is no "
                "response to record; nothing was recorded"
            )
        return ModelResponse(
            output=list(completed.output), usage=_usage(completed), response_id=completed.id
        )

    async def recorded() -> ModelResponse:
        response: ModelResponse = await call_async(
            "model.get_response", body, key=key, returns=RESPONSE
        )
        return response

    call = asyncio.ensure_future(recorded())
    call.add_done_callback(channel.end)
    live = False
    async with settled(call):
        async for event in channel.drain():
            live = True
            yield event
        response = call.result()  # raises what failed the call
        if not live:  # replayed: the response as recorded, in the one event it ends with
            yield completed_event(response)
