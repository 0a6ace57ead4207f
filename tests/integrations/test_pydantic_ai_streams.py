"""Streamed model requests under ``Durable()``: the caller gets the model's events while
the model produces them, the run stream gets a chunk per text delta and tool call, and
a replay returns the recorded response without asking the model or writing again. (A
worker SIGKILLed mid-answer: tests/project/test_chat_service.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRequestNode, RunContext
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

import durable_steps as ds
from durable_steps.integrations.pydantic_ai import Durable

from .conftest import Crash

TOKENS = ["Dur", "able ", "tok", "ens."]
WAIT = 30.0
"""Seconds a lockstep test waits for the other side before it fails."""


def never(messages: Any, info: Any) -> Any:
    raise AssertionError("a streamed run asks for no whole response")


class Lockstep:
    """A model that yields its next token only once the caller received the one before:
    a caller that gets the stream only at its end makes it time out."""

    def __init__(self) -> None:
        self.got = asyncio.Event()
        self.requests = 0

    async def stream(self, messages: Any, info: Any) -> Any:
        self.requests += 1
        for token in TOKENS:
            self.got.clear()
            yield token
            await asyncio.wait_for(self.got.wait(), WAIT)


async def entries(store: ds.AsyncStore, run_id: str) -> list[tuple[int, Any]]:
    return [e async for e in ds.read_stream_async(store, run_id, "model", follow=False)]


def test_run_stream_delivers_each_delta_live_and_to_the_run_stream(run_id: str) -> None:
    """``run_stream`` under ``Durable()``: each text delta reaches the caller before the
    model produces the next (the model waits for it), is in the run stream as
    ``{"text": ...}``, and the response is one recorded call; a resumed step gets the
    recorded text without asking the model, and writes nothing again."""
    model = Lockstep()
    agent = Agent(FunctionModel(never, stream_function=model.stream), capabilities=[Durable()])
    stop = [False, True]  # crash the first time, after the call was recorded
    seen: list[list[str]] = []

    async def step(state: Any) -> dict[str, Any]:
        got: list[str] = []
        async with agent.run_stream("go") as streamed:
            async for delta in streamed.stream_text(delta=True, debounce_by=None):
                got.append(delta)
                model.got.set()
            output = await streamed.get_output()
        seen.append(got)
        if stop.pop():
            raise Crash
        return {"output": output}

    async def main() -> None:
        async with ds.AsyncMemoryStore() as store:
            with pytest.raises(Crash):
                await ds.run_async(run_id, [ds.Step("s", step)], store)
            cp = await store.load(run_id)
            assert cp is not None
            assert [c["name"] for c in cp.calls] == ["model.request_stream"]
            written = await entries(store, run_id)
            assert written == [(i, {"text": t}) for i, t in enumerate(TOKENS)]
            state = await ds.run_async(run_id, [ds.Step("s", step)], store)
            assert state["output"] == "".join(TOKENS)
            assert await entries(store, run_id) == written  # not written again

    asyncio.run(main())
    assert seen[0] == TOKENS  # live: one delta per token, each before the next was made
    assert "".join(seen[1]) == "".join(TOKENS)  # replayed: the recorded text
    assert model.requests == 1


def test_iter_streams_tool_calls_and_text_of_each_request(run_id: str) -> None:
    """``agent.iter`` with ``node.stream``: a tool call is one ``{"tool_call": ...}`` chunk
    when the model finished it, the text of the next request follows; the caller's
    events come as the model makes them; ``Durable(stream="answer")`` names the stream."""

    async def stream(messages: Any, info: Any) -> Any:
        if len(messages) == 1:
            yield {0: DeltaToolCall("lookup", '{"topic": ', tool_call_id="c1")}
            yield {0: DeltaToolCall(None, '"kb"}')}
        else:
            for token in ["It ", "is ", "KB-1."]:
                yield token

    agent = Agent(
        FunctionModel(never, stream_function=stream), capabilities=[Durable(stream="answer")]
    )

    @agent.tool_plain
    def lookup(topic: str) -> str:
        return "KB-1"

    async def step(state: Any) -> dict[str, Any]:
        kinds: list[str] = []
        async with agent.iter("go") as run:
            async for node in run:
                if isinstance(node, ModelRequestNode):
                    async with node.stream(run.ctx) as events:
                        kinds += [type(e).__name__ async for e in events]
        assert run.result is not None
        return {"output": run.result.output, "kinds": kinds}

    async def main() -> dict[str, Any]:
        async with ds.AsyncMemoryStore() as store:
            state = await ds.run_async(run_id, [ds.Step("s", step)], store)
            got = [e async for e in ds.read_stream_async(store, run_id, "answer", follow=False)]
            assert [c for _, c in got] == [
                {"tool_call": {"tool": "lookup", "id": "c1", "args": '{"topic":"kb"}'}},
                {"text": "It "},
                {"text": "is "},
                {"text": "KB-1."},
            ]
            return state

    state = asyncio.run(main())
    assert state["output"] == "It is KB-1."
    assert state["kinds"].count("PartDeltaEvent") >= 3  # the deltas, not one replayed part


def test_stream_none_writes_no_run_stream_and_the_handler_sees_each_event_once(
    run_id: str,
) -> None:
    """``Durable(stream=None, event_stream_handler=h)``: no run stream is written; the
    handler gets the live events inside the call, once (not again on replay)."""
    handled: list[str] = []

    async def handler(ctx: RunContext[None], events: Any) -> None:
        async for event in events:
            handled.append(type(event).__name__)
            break  # stops early: the rest still reaches the caller and the record

    async def stream(messages: Any, info: Any) -> Any:
        for token in TOKENS:
            yield token

    agent = Agent(
        FunctionModel(never, stream_function=stream),
        capabilities=[Durable(stream=None, event_stream_handler=handler)],
    )
    stop = [False, True]

    async def step(state: Any) -> dict[str, Any]:
        async with agent.run_stream("go") as streamed:
            output = await streamed.get_output()
        if stop.pop():
            raise Crash
        return {"output": output}

    async def main() -> None:
        async with ds.AsyncMemoryStore() as store:
            with pytest.raises(Crash):
                await ds.run_async(run_id, [ds.Step("s", step)], store)
            state = await ds.run_async(run_id, [ds.Step("s", step)], store)
            assert state["output"] == "".join(TOKENS)
            assert await ds.list_streams_async(store, run_id) == []  # no stream at all
            with pytest.raises(ds.StreamNotFoundError, match=r"its streams: none\)"):
                await entries(store, run_id)

    asyncio.run(main())
    assert handled == ["PartStartEvent"]


def test_a_caller_that_stops_reading_early_still_gets_the_call_recorded(run_id: str) -> None:
    """A caller that leaves ``run_stream`` after its first delta: the call runs to its end
    and is recorded (the whole answer in the run stream), so the resumed step asks the
    model nothing; the run is not cancelled by the stream's close."""
    asked: list[int] = []

    async def stream(messages: Any, info: Any) -> Any:
        asked.append(1)
        for token in TOKENS:
            yield token

    agent = Agent(FunctionModel(never, stream_function=stream), capabilities=[Durable()])
    stop = [False, True]

    async def step(state: Any) -> dict[str, Any]:
        first = None
        async with agent.run_stream("go") as streamed:
            async for first in streamed.stream_text(delta=True, debounce_by=None):  # noqa: B007 - kept
                break
        if stop.pop():
            raise Crash
        return {"first": first}

    async def main() -> dict[str, Any]:
        async with ds.AsyncMemoryStore() as store:
            with pytest.raises(Crash):
                await ds.run_async(run_id, [ds.Step("s", step)], store)
            assert [c for _, c in await entries(store, run_id)] == [{"text": t} for t in TOKENS]
            return await ds.run_async(run_id, [ds.Step("s", step)], store)

    assert asyncio.run(main()) == {"first": "".join(TOKENS)}  # the replay: the record, whole
    assert asked == [1]


def test_run_stream_sync_in_a_run_step_streams_live_too(run_id: str) -> None:
    """``agent.run_stream_sync`` in a step run by ``run()``: the deltas one by one, the
    run stream written, the model asked once across a crash."""
    asked: list[int] = []

    async def stream(messages: Any, info: Any) -> Any:
        asked.append(1)
        for token in TOKENS:
            yield token

    agent = Agent(FunctionModel(never, stream_function=stream), capabilities=[Durable()])
    stop = [False, True]

    def step(state: Any) -> dict[str, Any]:
        deltas = list(agent.run_stream_sync("go").stream_text(delta=True, debounce_by=None))
        if stop.pop():
            raise Crash
        return {"deltas": deltas}

    with ds.MemoryStore() as store:
        with pytest.raises(Crash):
            ds.run(run_id, [ds.Step("s", step)], store)
        first = list(ds.read_stream(store, run_id, "model", follow=False))
        assert [c for _, c in first] == [{"text": t} for t in TOKENS]
        state = ds.run(run_id, [ds.Step("s", step)], store)
        assert list(ds.read_stream(store, run_id, "model", follow=False)) == first
    assert "".join(state["deltas"]) == "".join(TOKENS)
    assert asked == [1]
