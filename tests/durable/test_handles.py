"""Run handles: what a caller does to a run -- await, cancel, signal, send, read its
stream and events, its history, fork, resume, upgrade -- through one object, blocking
or async, for code-first and step-list runs alike."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel

import durable_steps as ds
from durable_steps import durable

RAN: list[str] = []
FAIL = [True]
"""Whether a message that says "fail" fails the run (a bug fixed before its resume)."""


@durable.step
def note(what: str) -> str:
    RAN.append(what)
    return what.upper()


@durable.workflow(name="talker")
def talker(name: str) -> dict[str, Any]:
    greeting = note(f"hello {name}")
    ds.write_stream("out", greeting)
    ds.set_event("phase", "asked")
    approved = ds.wait_for_signal("approve")
    message = ds.receive("inbox")
    if message.get("fail") and FAIL[0]:
        raise ValueError("told to fail")
    return {"greeting": greeting, "approved": approved, "message": message}


@durable.step
async def anote(what: str) -> str:
    RAN.append(what)
    return what.upper()


@durable.workflow(name="async-talker")
async def async_talker(name: str) -> dict[str, Any]:
    greeting = await anote(f"hello {name}")
    await ds.write_stream_async("out", greeting)
    await ds.set_event_async("phase", "asked")
    approved = ds.wait_for_signal("approve")
    message = await ds.receive_async("inbox")
    return {"greeting": greeting, "approved": approved, "message": message}


def rid() -> str:
    return f"h-{uuid.uuid4().hex[:12]}"


def test_a_handle_talks_to_a_running_run() -> None:
    """Through its handle a run is streamed, signalled, sent a message, awaited, read
    back, failed and resumed, forked and cancelled."""
    RAN.clear()
    FAIL[0] = True
    store = ds.MemoryStore()
    handle = talker.start(rid(), store, "ann")
    ds.recover(store, [talker])
    assert handle.status() == "waiting"
    assert list(handle.stream("out", follow=False)) == [(0, "HELLO ANN")]
    assert handle.events() == {"phase": "asked"}
    handle.signal("approve", True)
    assert handle.send("inbox", {"fail": True}, idempotency_key="m1") == 0
    assert handle.send("inbox", {"fail": True}, idempotency_key="m1") == 0  # once
    ds.recover(store, [talker])
    assert handle.status() == "failed"
    with pytest.raises(ds.RunFailedError, match="told to fail"):
        handle.result(timeout=5)
    FAIL[0] = False  # the bug fixed
    handle.resume()  # the failed step runs again: its recorded calls replay
    assert handle.status() == "running"
    ds.recover(store, [talker])
    assert handle.result(timeout=5) == {
        "greeting": "HELLO ANN",
        "approved": True,
        "message": {"fail": True},
    }
    assert RAN == ["hello ann"]  # the recorded call never ran again
    assert [r.name for r in handle.history()] == ["talker"]
    other = talker.start(rid(), store, "cy")
    assert other.cancel(reason="enough") is True
    with pytest.raises(ds.RunCancelledError):
        other.result(timeout=5)
    with pytest.raises(ds.RunNotFoundError):
        ds.handle_for(store, "no-such-run").status()


class Totals(BaseModel):
    count: int
    names: list[str]


def count(state: Mapping[str, Any]) -> dict[str, Any]:
    return {"count": len(state["names"])}


def double(state: Mapping[str, Any]) -> dict[str, Any]:
    return {"count": state["count"] * 2}


COUNTER = ds.Workflow("counter", [ds.Step("count", count), ds.Step("double", double)])


def test_handle_for_a_step_list_run_types_its_final_state() -> None:
    """``handle_for(store, run_id, T)`` is the final state of any run validated as T;
    ``upgrade`` moves a run to another version of its workflow; ``fork`` makes a new
    run from one after a step, whose handle types its result alike."""
    store = ds.MemoryStore()
    run_id = rid()
    COUNTER.start(run_id, store, input={"names": ["a", "b"]})
    handle = ds.handle_for(store, run_id, Totals)
    v2 = ds.Workflow("counter", COUNTER.steps, version="2")
    assert handle.upgrade(v2) is True
    ds.recover(store, [v2])
    assert handle.result(timeout=5) == Totals(count=4, names=["a", "b"])
    assert ds.handle_for(store, run_id).result() == {"count": 4, "names": ["a", "b"]}
    forked = handle.fork(rid(), at_step=0, update={"count": 5})
    ds.recover(store, [v2])
    assert forked.result(timeout=5) == Totals(count=10, names=["a", "b"])
    with pytest.raises(ds.InvalidStateError, match="its final state is not a valid list"):
        ds.handle_for(store, run_id, list[int]).result()  # type: ignore[arg-type]


def test_the_async_handle_does_the_same_awaited() -> None:
    """``AsyncRunHandle``: the same methods on an async store, awaited."""
    RAN.clear()
    store = ds.AsyncMemoryStore()

    async def go() -> dict[str, Any]:
        handle = await async_talker.start_async(rid(), store, "bo")
        assert isinstance(handle, ds.AsyncRunHandle)
        await ds.recover_async(store, [async_talker])
        assert await handle.status() == "waiting"
        assert [c async for c in handle.stream("out", follow=False)] == [(0, "HELLO BO")]
        assert await handle.events() == {"phase": "asked"}
        await handle.signal("approve", "yes")
        await handle.send("inbox", {"n": 1})
        await ds.recover_async(store, [async_talker])
        assert [r.name for r in await handle.history()] == ["async-talker"]
        with pytest.raises(ds.ConflictError):
            await handle.resume()  # completed: final
        other = await async_talker.start_async(rid(), store, "cy")
        assert await other.cancel() is True
        await other.resume()
        assert await other.status() == "running"
        return await handle.result(timeout=5)

    assert asyncio.run(go()) == {"greeting": "HELLO BO", "approved": "yes", "message": {"n": 1}}
