"""``Runner.run_streamed`` inside a step: the caller gets the model's events live, the
run stream gets one chunk per text delta and per finished tool call, each response is
recorded as one call when complete (replayed as one ``response.completed`` event), and
a crash mid-stream leaves a ``StreamReset`` before the chunks of the response asked
again. The model streams like the Responses API (text deltas, items done, completed)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

import durable_steps as ds

from . import openai_runs as runs
from .conftest import Crash


class Streamed(runs.Scripted):
    """The tests' scripted model, streaming: each word of a message a text delta (each a
    side effect, so a test can crash mid-stream), each item done, then completed."""

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        runs.effect("model.stream_response")
        given = kwargs["input"] if "input" in kwargs else args[1]
        output = self.script(runs.outputs(given))
        for i, item in enumerate(output):
            if isinstance(item, ResponseOutputMessage):
                for word in item.content[0].text.split(" "):  # type: ignore[union-attr]
                    runs.effect("delta")
                    yield ResponseTextDeltaEvent.model_construct(
                        type="response.output_text.delta", delta=word + " ", item_id=item.id,
                        output_index=i, content_index=0, sequence_number=i, logprobs=[],
                    )  # fmt: skip
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=item, output_index=i, sequence_number=i
            )
        usage = ResponseUsage.model_construct(
            input_tokens=7, output_tokens=3, total_tokens=10,
            input_tokens_details={"cached_tokens": 0},
            output_tokens_details={"reasoning_tokens": 0},
        )  # fmt: skip
        response = Response.model_construct(
            id="r", created_at=0.0, model="scripted", object="response", output=output,
            parallel_tool_calls=True, tool_choice="auto", tools=[], usage=usage,
        )  # fmt: skip
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(output)
        )


def streamed_agent() -> Agent[Any]:
    return Agent(name="calc", model=Streamed(runs.tools_script), tools=[runs.add, runs.get_weather])


DELTAS: list[str] = []


async def streaming_step(state: Any) -> dict[str, Any]:
    result = Runner.run_streamed(streamed_agent(), "go")
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            DELTAS.append(event.data.delta)
    return {"output": result.final_output, "agent": result.last_agent.name}


def chunks(store: ds.AsyncMemoryStore, run_id: str) -> list[Any]:
    return [c for _, c in ds.read_stream(store.sync, run_id, "model", follow=False)]


def test_a_streamed_run_is_live_written_and_recorded(run_id: str, openai_effects: Any) -> None:
    """The caller sees each text delta as it comes; the run stream has one chunk per
    delta and per tool call the model finished (parallel calls by their ids); every
    model response and tool call is recorded once; the result names the caller's agent."""
    store = ds.AsyncMemoryStore()
    DELTAS.clear()
    state = asyncio.run(ds.run_async(run_id, [ds.Step("agent", streaming_step)], store))
    assert state == {"output": runs.TOOLS_OUTPUT, "agent": "calc"}
    assert "".join(DELTAS).strip() == runs.TOOLS_OUTPUT
    written = chunks(store, run_id)
    calls = [c["tool_call"] for c in written if "tool_call" in c]
    assert [(c["tool"], c["id"]) for c in calls] == [
        ("add", "call-1"), ("get_weather", "call-2"), ("add", "call-3"), ("add", "call-4"),
    ]  # fmt: skip
    assert "".join(c["text"] for c in written if "text" in c).strip() == runs.TOOLS_OUTPUT
    seen = Counter(runs.EFFECTS.seen)
    assert seen["model.stream_response"] == 3
    assert seen["tool.add"] == 3 and seen["tool.get_weather"] == 1


def test_a_crash_mid_stream_resets_the_stream_and_replays_what_was_recorded(
    run_id: str, openai_effects: Any
) -> None:
    """Crashed at the answer's third word: the two tool rounds were recorded and are not
    asked again (their responses replayed as one event each); the answer is asked again,
    its stream marked with a StreamReset before its chunks come again."""
    store = ds.AsyncMemoryStore()
    k = 7 + 2  # 3 model streams and 4 tool calls before the answer: its 3rd word
    openai_effects(at=k)
    with pytest.raises(Crash):
        asyncio.run(ds.run_async(run_id, [ds.Step("agent", streaming_step)], store))
    before = chunks(store, run_id)
    assert [c for c in before if "text" in c]  # the answer had begun to stream
    again = openai_effects()
    DELTAS.clear()
    state = asyncio.run(ds.run_async(run_id, [ds.Step("agent", streaming_step)], store))
    assert state == {"output": runs.TOOLS_OUTPUT, "agent": "calc"}
    assert Counter(again.seen)["model.stream_response"] == 1  # the answer alone
    assert not any(e.startswith("tool.") for e in again.seen)
    assert "".join(DELTAS).strip() == runs.TOOLS_OUTPUT  # the answer, live again
    items = chunks(store, run_id)
    resets = [i for i, c in enumerate(items) if isinstance(c, ds.StreamReset)]
    assert len(resets) == 1
    after = items[resets[0] + 1 :]
    assert "".join(c["text"] for c in after if "text" in c).strip() == runs.TOOLS_OUTPUT
