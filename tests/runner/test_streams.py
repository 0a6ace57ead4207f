"""Output streams and published events on every backend, through run() and run_async():
chunks from step code and from calls, read back and followed live; what a replay and an
interrupted call do to a stream; events set, awaited and not set again on replay."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Retry, StreamReset
from durable_steps.seam.items import offset_key

from ..conftest import Api
from ..helpers.waiting import wait_until


def read(api: Api, run_id: str, name: str, **kw: Any) -> list[tuple[int, Any]]:
    """Everything ``read_stream`` (or ``read_stream_async``) yields, to its end."""
    if not api.is_async:
        return list(ds.read_stream(api.store, run_id, name, **kw))

    async def collect() -> list[tuple[int, Any]]:
        return [e async for e in ds.read_stream_async(api.store.aio, run_id, name, **kw)]

    return asyncio.run_coroutine_threadsafe(collect(), api.loop).result(60)


def event(api: Api, run_id: str, key: str, **kw: Any) -> Any:
    return api._call(ds.get_event, ds.get_event_async, run_id, key, **kw)


class Boom(Exception):
    pass


def test_chunks_from_step_code_and_calls_read_in_order(api: Api, run_id: str) -> None:
    """Chunks written by step code and by a call's function come back as dense offsets
    in write order; a reader re-attaching after an offset gets exactly the rest; the
    stream ends where it was closed."""

    async def tokens() -> str:
        for t in ("Hel", "lo"):
            await ds.write_stream_async("out", {"token": t})
        return "Hello"

    async def answer(state: Any) -> dict[str, Any]:
        await ds.write_stream_async("out", "start")
        text = await ds.call_async("llm", tokens)
        await ds.write_stream_async("out", "end")
        await ds.close_stream_async("out")
        return {"text": text}

    assert api.run(run_id, [api.step("answer", answer)]) == {"text": "Hello"}
    everything = read(api, run_id, "out")
    assert everything == [(0, "start"), (1, {"token": "Hel"}), (2, {"token": "lo"}), (3, "end")]
    assert read(api, run_id, "out", after=1) == everything[2:]
    assert read(api, run_id, "out", after=3) == []
    with pytest.raises(ds.StreamNotFoundError, match="no stream 'other'"):
        read(api, run_id, "other", follow=False)
    listed = api._call(ds.list_streams, ds.list_streams_async, run_id)
    assert listed == [ds.StreamInfo("out", 4, True)]  # the close marker is not an entry
    for known in (-1, 0, 2, 3, 9):  # where the search starts changes nothing
        got = api._call(ds.stream_info, ds.stream_info_async, run_id, "out", known=known)
        assert got == listed[0]
    with pytest.raises(ds.StreamNotFoundError, match=r"no stream 'other' \(its streams: 'out'\)"):
        api._call(ds.stream_info, ds.stream_info_async, run_id, "other")


def test_a_replayed_step_writes_nothing_twice(api: Api, run_id: str) -> None:
    """A step that fails after writing (and is retried in place) writes again only what
    it had not written: step code's chunks are skipped by their place in the journal,
    and a recorded call, replayed, does not run its function."""
    runs = {"llm": 0, "step": 0}

    async def tokens() -> str:
        runs["llm"] += 1
        await ds.write_stream_async("out", "from the call")
        return "r"

    async def flaky(state: Any) -> None:
        runs["step"] += 1
        await ds.write_stream_async("out", "before")
        await ds.call_async("llm", tokens)
        await ds.write_stream_async("out", "after")
        if runs["step"] == 1:
            raise Boom("once")
        await ds.write_stream_async("out", "last")

    api.run(run_id, [api.step("s", flaky, retry=Retry(attempts=2, backoff=0))])
    assert runs == {"llm": 1, "step": 2}
    assert read(api, run_id, "out") == [
        (0, "before"), (1, "from the call"), (2, "after"), (3, "last")
    ]  # fmt: skip


def test_an_interrupted_call_is_marked_and_superseded(api: Api, run_id: str) -> None:
    """A call that wrote chunks and then raised runs again (its retry): before its new
    chunks a StreamReset entry tells readers that the chunks from the first attempt's
    first offset were of an interrupted attempt; offsets stay dense and unique (the
    stream's length counts the marker)."""
    attempts = [0]

    async def tokens() -> str:
        attempts[0] += 1
        await ds.write_stream_async("out", f"a{attempts[0]}-1")
        if attempts[0] == 1:
            await ds.write_stream_async("out", "a1-2")
            raise Boom("model dropped the connection")
        return "done"

    async def answer(state: Any) -> None:
        await ds.write_stream_async("out", "intro")
        await ds.call_async("llm", tokens, retry=Retry(attempts=2, backoff=0))

    api.run(run_id, [api.step("s", answer)])
    entries = read(api, run_id, "out")
    assert [o for o, _ in entries] == list(range(5))
    assert entries[:3] == [(0, "intro"), (1, "a1-1"), (2, "a1-2")]
    _, reset = entries[3]
    assert isinstance(reset, StreamReset) and reset.since == 1
    assert entries[4] == (4, "a2-1")
    listed = api._call(ds.list_streams, ds.list_streams_async, run_id)
    assert listed == [ds.StreamInfo("out", 5, False)]


def test_a_reader_follows_live_until_the_run_ends(api: Api, run_id: str) -> None:
    """A reader started before the chunks gets each as it is written and stops when the
    run completes (no close needed)."""
    release = threading.Event()
    got: list[tuple[int, Any]] = []

    async def slow(state: Any) -> None:
        await ds.write_stream_async("out", 1)
        await asyncio.to_thread(release.wait, 60)
        await ds.write_stream_async("out", 2)

    def reader() -> None:
        got.extend(read(api, run_id, "out", wait=True, interval=0.01, max_interval=0.05))

    runner = threading.Thread(target=lambda: api.run(run_id, [api.step("s", slow)]))
    runner.start()
    wait_until(lambda: api.store.run_info(run_id), "the run to exist")
    following = threading.Thread(target=reader)
    following.start()
    wait_until(lambda: api.store.read_items(run_id, "stream:out"), "the first chunk")
    release.set()
    runner.join(60)
    following.join(60)
    assert got == [(0, 1), (1, 2)]


def test_a_streams_length_is_found_in_about_2_log2_n_one_item_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """stream_info finds a stream's length without reading its entries: single-item reads,
    about 2 log2(n) of them for n entries; a close marker makes it closed, not longer."""
    with ds.MemoryStore() as store:
        store.save(ds.Checkpoint("r", -1, {}))
        store.put_item("r", "streams", "s", {})  # the index entry write_stream puts first
        limits: list[int | None] = []
        real = store.read_items

        def counted(*args: Any, **kw: Any) -> Any:
            limits.append(kw.get("limit"))
            return real(*args, **kw)

        monkeypatch.setattr(store, "read_items", counted)
        written = 0
        for n in (1, 2, 3, 17, 1000):
            for offset in range(written, n):
                store.append_item("r", "stream:s", offset_key(offset), {"chunk": offset})
            written = n
            limits.clear()
            assert ds.stream_info(store, "r", "s") == ds.StreamInfo("s", n, False)
            assert set(limits) == {1} and len(limits) <= 2 * math.log2(n) + 3, (n, limits)
        store.append_item("r", "stream:s", offset_key(1000), {"closed": True})
        assert ds.stream_info(store, "r", "s", known=999) == ds.StreamInfo("s", 1000, True)


def test_a_closed_stream_refuses_more(api: Api, run_id: str) -> None:
    """Writing to a closed stream is a ValueError naming the stream; the run failed by it
    keeps what was written."""

    async def twice(state: Any) -> None:
        await ds.write_stream_async("out", 1)
        await ds.close_stream_async("out")
        await ds.write_stream_async("out", 2)

    with pytest.raises(ValueError, match="stream 'out' is closed"):
        api.run(run_id, [api.step("s", twice)])
    assert read(api, run_id, "out", follow=False) == [(0, 1)]


def test_events_are_published_awaited_and_kept(api: Api, run_id: str) -> None:
    """set_event publishes from step code and calls; get_event returns the value, and a
    replay does not move an event back; a key the ended run never set is TimeoutError."""
    runs = [0]

    async def progress() -> str:
        await ds.set_event_async("model", {"name": "m1"})
        return "ok"

    async def work(state: Any) -> None:
        runs[0] += 1
        await ds.set_event_async("progress", 1)
        await ds.call_async("llm", progress)
        await ds.set_event_async("progress", 2)
        if runs[0] == 1:
            raise Boom("once")

    with pytest.raises(Boom):
        api.run(run_id, [api.step("s", work)])
    first = {i.key: i.value for i in api.store.read_items(run_id, "events")}
    api.run(run_id, [api.step("s", work)])  # the failed run again: the step replays
    assert event(api, run_id, "progress", timeout=5) == 2
    assert event(api, run_id, "model", timeout=5) == {"name": "m1"}
    again = {i.key: i.value for i in api.store.read_items(run_id, "events")}
    assert again == first  # nothing set again (nor moved back to 1 on the way)
    assert api._call(ds.get_events, ds.get_events_async, run_id) == {
        "model": {"name": "m1"},
        "progress": 2,
    }
    with pytest.raises(TimeoutError, match="never set event 'nope'"):
        event(api, run_id, "nope", timeout=5)
    with pytest.raises(ds.RunNotFoundError):
        event(api, f"{run_id}-none", "x", timeout=5)


def test_get_event_waits_until_it_is_set(api: Api, run_id: str) -> None:
    """A reader waiting for an event gets it once the running step sets it."""
    release = threading.Event()

    async def later(state: Any) -> None:
        await asyncio.to_thread(release.wait, 60)
        await ds.set_event_async("answer", 42)
        await asyncio.to_thread(release.wait, 60)

    runner = threading.Thread(target=lambda: api.run(run_id, [api.step("s", later)]))
    runner.start()
    wait_until(lambda: api.store.run_info(run_id), "the run to exist")
    with pytest.raises(TimeoutError, match="did not set event"):
        event(api, run_id, "answer", timeout=0.1)
    release.set()
    assert event(api, run_id, "answer", timeout=60) == 42
    runner.join(60)


def test_an_unknown_run_or_stream_is_one_clear_error_with_or_without_follow(
    api: Api, run_id: str
) -> None:
    """No such run: RunNotFoundError whether the reader follows or not. A name the run
    never wrote: StreamNotFoundError naming the streams it has -- at once on a run that
    ended, and on a run waiting for a message (which would otherwise be followed for
    ever); with wait=True the live run's future stream is empty now and followed until
    it is written. stream_info of that name says the same."""
    for follow in (False, True):
        with pytest.raises(ds.RunNotFoundError, match="does not exist"):
            read(api, f"{run_id}-none", "out", follow=follow)

    async def chat(state: Any) -> dict[str, Any]:
        await ds.write_stream_async("answer", "hi")
        question = await ds.receive_async("q")
        await ds.write_stream_async("late", question)
        return {"q": question}

    with pytest.raises(ds.RunWaiting):
        api.run(run_id, [api.step("chat", chat)])
    for follow in (False, True):
        with pytest.raises(ds.StreamNotFoundError, match="its streams: 'answer'") as caught:
            read(api, run_id, "answr", follow=follow, timeout=30)
        assert (caught.value.stream, caught.value.streams) == ("answr", ["answer"])
        assert "is waiting" in str(caught.value) and "wait=True" in str(caught.value)
    with pytest.raises(ds.StreamNotFoundError, match="no stream 'answr'"):
        api._call(ds.stream_info, ds.stream_info_async, run_id, "answr")
    assert read(api, run_id, "late", follow=False, wait=True) == []
    got: list[tuple[int, Any]] = []
    follower = threading.Thread(
        target=lambda: got.extend(read(api, run_id, "late", wait=True, interval=0.01, timeout=60))
    )
    follower.start()
    api._call(ds.send_message, ds.send_message_async, run_id, "q", "why?")
    assert api.run(run_id, [api.step("chat", chat)]) == {"q": "why?"}
    follower.join(60)
    assert got == [(0, "why?")]
    for follow in (False, True):  # ended without writing it: unknown, wait or not
        with pytest.raises(ds.StreamNotFoundError, match="the run is completed"):
            read(api, run_id, "never", follow=follow, wait=True)


def test_writing_a_stream_outside_a_step_says_so() -> None:
    """write_stream / close_stream with no step running name what the caller did --
    writing a stream outside a step -- and where to read one, not current_step()."""
    for write in (lambda: ds.write_stream("out", 1), lambda: ds.close_stream("out")):
        with pytest.raises(RuntimeError, match=r"_stream\(\) was called outside a step") as e:
            write()
        assert "current_step" not in str(e.value) and "read_stream()" in str(e.value)
