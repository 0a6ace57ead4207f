"""A signal, a cancellation and ``Workflow.start`` of an existing run read and write the
run's head alone, counted on the wire by the test proxy (real SDK, cosmos-local, sync
and async stores): on a 1.5 MB state they receive and send about a head's bytes (a
point read and a PATCH), where they used to read the whole state (head plus the
segments' query: 1.5 MB received)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.checkpoint import NOT_READ

from ...conftest import Cosmos, SyncFacade
from ...helpers.proxy import Proxy

# aiohttp (under the async SDK) warns about request bodies over 1 MiB sent as raw bytes.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Sending a large body directly with raw bytes:ResourceWarning"
)
STATE = {"blob": "x" * 1_500_000}
HEAD = 8_000
"""Bytes either way that a head-only change stays under: a head's read and write, with
their HTTP headers (about 1 KB each), whatever the state's size."""
WAIT = ds.Workflow("waits", [ds.Step("w", lambda s: ds.wait_for_signal("go"))])
START = (
    lambda s, r, **kw: WAIT.start(r, s, **kw),
    lambda s, r, **kw: WAIT.start_async(r, s, **kw),
)
RUN = (lambda s, r: WAIT.run(r, s), lambda s, r: WAIT.run_async(r, s))


def public(store: Any, loop: asyncio.AbstractEventLoop) -> Callable[..., Any]:
    """Call a public function on ``store``: its sync form, or its async form on the loop."""

    def call(sync: Callable[..., Any], aio: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if not isinstance(store, SyncFacade):
            return sync(store, *args, **kw)
        return asyncio.run_coroutine_threadsafe(aio(store.aio, *args, **kw), loop).result(60)

    return call


def wire(proxy: Proxy) -> tuple[list[str], int, int]:
    calls = proxy.store_calls()
    return [e.method for e in calls], sum(e.sent for e in calls), sum(e.received for e in calls)


@pytest.fixture
def waiting(
    through: tuple[Any, Proxy, Cosmos], run_id: str, loop: asyncio.AbstractEventLoop
) -> tuple[Callable[..., Any], Proxy, Any]:
    """A started run with a 1.5 MB state that waits for signal "go"."""
    store, proxy, _ = through
    call = public(store, loop)
    assert call(*START, run_id, input=STATE)
    with pytest.raises(ds.RunWaiting):
        call(*RUN, run_id)
    proxy.clear()
    return call, proxy, store


def test_a_signal_reads_and_writes_the_head_only(
    waiting: tuple[Callable[..., Any], Proxy, Any], run_id: str
) -> None:
    """send_signal on a 1.5 MB state: one point read of the head and one write of it; a
    few KB each way, no query of the segments."""
    call, proxy, store = waiting
    cp = call(ds.send_signal, ds.send_signal_async, run_id, "go", {"ok": True})
    methods, sent, received = wire(proxy)
    assert methods in (["GET", "PATCH"], ["GET", "PUT"]), methods
    assert received < HEAD and sent < HEAD, (sent, received)
    assert cp.status == "running" and cp.state is NOT_READ
    loaded = store.load(run_id)
    assert loaded.state == STATE and dict(loaded.signals) == {"go": {"ok": True}}


def test_a_cancellation_reads_and_writes_the_head_only(
    waiting: tuple[Callable[..., Any], Proxy, Any], run_id: str
) -> None:
    """cancel_run on a 1.5 MB state: a head read and a head write, a few KB."""
    call, proxy, store = waiting
    assert call(ds.cancel_run, ds.cancel_run_async, run_id, reason="enough")
    methods, sent, received = wire(proxy)
    assert methods in (["GET", "PATCH"], ["GET", "PUT"]), methods
    assert received < HEAD and sent < HEAD, (sent, received)
    loaded = store.load(run_id)
    assert loaded.state == STATE and loaded.status == "cancelled"


def test_start_of_an_existing_run_reads_its_head_only(
    waiting: tuple[Callable[..., Any], Proxy, Any], run_id: str
) -> None:
    """Workflow.start of a run that exists (a retried request) reads its head to tell
    that it is this workflow's, and writes nothing."""
    call, proxy, _ = waiting
    assert not call(*START, run_id, input=STATE)
    methods, _, received = wire(proxy)
    assert methods == ["GET"] and received < HEAD, (methods, received)
