"""Streamed model requests under ``Durable()``: live to the caller, written to a run stream.

Pydantic AI's durable seam runs a streamed model request (``model.request_stream``)
inside one durable unit -- for us one ``call_async`` -- that reads the model's stream to
its end and returns the final response; the caller of ``run_stream`` or ``iter`` then
gets that response as one piece. Here, on the first execution, the caller sees the
events while the model produces them, and they go to the run's stream too:

- Inside the call, the handler that consumes the model's stream
  (``Durable._model_stream_event_handler``, the hook Pydantic AI's Temporal
  integration uses to publish its live events) appends a chunk per text delta and per
  finished tool call to the run stream (``Durable(stream="model")``; ``None``: none)
  with ``write_stream_async`` -- a write inside a call, so the stream's resume rules
  hold: a recorded call is replayed without writing again, and a call killed in
  flight marks what it wrote with a ``StreamReset`` when it runs again -- and then
  hands the event to the caller's channel.
- The caller's side (``LiveModel.request_stream``, a ``DurableModel`` whose
  segments are Pydantic AI's) runs the call in a task of its own -- the call keyed by
  its place in the conversation, so it replays whatever number that task gets --
  waits for the first event or the call's end, and yields a ``LiveStream`` that
  yields the events as they come (applied to its parts, so ``get()`` is the response
  so far). When the call has returned, the recorded response is what ``get()`` gives.
- A caller that stops reading early (Pydantic AI then closes or cancels the stream):
  the call still runs to its end and records, as a save is let finish; a lost lease
  or a cancelled run ends it at its next append (``journal.check``). Any other
  exception into the stream (a crash) cancels the call: it records nothing.
- On replay the call returns its record without running: no event comes, nothing is
  written, and the caller gets the recorded response as Pydantic AI hands it over
  (one event per part), as without this module. A call that fails before its first
  event raises where it did before: when the stream is opened.

Chunks (JSON): ``{"text": "..."}`` per text delta (the part's first content
included), ``{"thinking": "..."}`` per thinking delta, ``{"tool_call": {"tool":
NAME, "id": ID, "args": JSON_TEXT}}`` per tool call the model finished (output
tools included). A stream is not closed by an agent run (several runs and requests
may write to it): close it in the step (``close_stream_async``) or let readers stop
when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from pydantic_ai import (
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    RunContext,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
)
from pydantic_ai.durable_exec._utils import DurableModel
from pydantic_ai.messages import ModelMessage, ModelResponseStreamEvent
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from durable_steps import write_stream_async

from .._common import Channel, settled

Handler = Callable[[RunContext[Any], AsyncIterable[Any]], Awaitable[None]]


_CHANNEL: ContextVar[Channel | None] = ContextVar("durable_steps_live_channel", default=None)
"""The caller's channel, in the context of the task that runs the streamed call."""


def chunk_of(event: object) -> dict[str, Any] | None:
    """What goes to the run stream for one model event (see the top), or nothing."""
    match event:
        case (
            PartStartEvent(part=TextPart(content=text))
            | PartDeltaEvent(delta=TextPartDelta(content_delta=text))
        ) if text:
            return {"text": text}
        case (
            PartStartEvent(part=ThinkingPart(content=text))
            | PartDeltaEvent(delta=ThinkingPartDelta(content_delta=text))
        ) if text:
            return {"thinking": text}
        case PartEndEvent(part=ToolCallPart() as part):
            return {
                "tool_call": {
                    "tool": part.tool_name,
                    "id": part.tool_call_id,
                    "args": part.args_as_json_str(),
                }
            }
    return None


def publishing(stream: str | None, handler: Handler | None) -> Handler | None:
    """The handler that consumes a streamed request's events inside its call: each is
    written to ``stream`` and handed to the caller, then to ``handler`` (the user's)."""
    if stream is None and handler is None:
        return None

    async def publish(ctx: RunContext[Any], events: AsyncIterable[Any]) -> None:
        channel = _CHANNEL.get()

        async def published() -> AsyncIterator[Any]:
            async for event in events:
                if stream is not None and (chunk := chunk_of(event)) is not None:
                    await write_stream_async(stream, chunk)
                if channel is not None:
                    channel.put(event)
                yield event

        passing = published()
        if handler is not None:
            await handler(ctx, passing)
        async for _ in passing:  # what the user's handler left: published all the same
            pass

    return publish


class LiveStream(CompletedStreamedResponse):
    """The caller's stream of a request whose call is running (see the top)."""

    def __init__(
        self,
        call: asyncio.Task[CompletedStreamedResponse],
        channel: Channel,
        *,
        model_request_parameters: ModelRequestParameters,
    ) -> None:
        super().__init__(
            ModelResponse(parts=[]),
            model_request_parameters=model_request_parameters,
            replay_events=[],
        )
        self._call, self._channel = call, channel
        self._done: CompletedStreamedResponse | None = None

    def __aiter__(self) -> AsyncIterator[ModelResponseStreamEvent]:
        if self._event_iterator is None:
            self._event_iterator = self._live()
        return self._event_iterator

    async def _live(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async for event in self._channel.drain():
            self._parts_manager.apply_event(event)
            yield event
        done = self._call.result()
        async for _ in done:  # the response as recorded; raises what ended a failed stream
            pass
        self._done = done
        self._finished = True

    def get(self) -> ModelResponse:
        return super().get() if self._done is None else self._done.get()

    @property
    def usage(self) -> RequestUsage:
        return super().usage if self._done is None else self._done.usage


class LiveModel(DurableModel):
    """Pydantic AI's ``DurableModel`` whose streamed requests reach the caller live."""

    @classmethod
    def of(cls, model: DurableModel) -> LiveModel:
        """``model`` itself, as a ``LiveModel``: its segments, whichever a release has."""
        live = cls.__new__(cls)
        vars(live).update(vars(model))
        return live

    def _with_serving_wrapper(self, wrap: Callable[[Model], Model]) -> Model:
        model = super()._with_serving_wrapper(wrap)
        return (
            model if model is self or not isinstance(model, DurableModel) else LiveModel.of(model)
        )

    @contextlib.asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[CompletedStreamedResponse]:
        async def recorded() -> CompletedStreamedResponse:
            opened = DurableModel.request_stream(
                self, messages, model_settings, model_request_parameters, run_context
            )
            async with opened as stream:
                return stream

        channel = Channel()
        token = _CHANNEL.set(channel)
        try:
            call = asyncio.ensure_future(recorded())
        finally:
            _CHANNEL.reset(token)
        call.add_done_callback(channel.end)
        async with settled(call):
            await channel.wait()
            if not channel.events:  # replayed, or failed before its first event
                yield call.result()
            else:
                yield LiveStream(call, channel, model_request_parameters=model_request_parameters)
            await asyncio.shield(call)  # a caller that stopped reading: the call still records
