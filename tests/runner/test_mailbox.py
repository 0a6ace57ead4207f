"""The mailbox on every backend, through run() and run_async(): a chat loop that waits for
its messages holding no worker; order, idempotency keys, timeouts; messages that land
while the run works or while its step suspends; bad input and the pending bound.
(Killed processes and racing senders: test_mailbox_kills.py.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Workflow
from durable_steps.seam import mailbox

from ..conftest import Api, Clock
from ..helpers.waiting import wait_until


def send(api: Api, run_id: str, topic: str, payload: Any, **kw: Any) -> int:
    return api._call(ds.send_message, ds.send_message_async, run_id, topic, payload, **kw)  # type: ignore[no-any-return]


def chat(api: Api, seen: list[Any]) -> list[ds.Step]:
    """One step, one loop, one topic: each message is answered through a recorded call
    until "bye"."""

    async def talk(state: Any) -> dict[str, Any]:
        turns = []
        while True:
            text = await ds.receive_async("chat")
            seen.append(text)
            if text == "bye":
                return {"turns": turns}
            turns.append(await ds.call_async("reply", lambda t=text: f"re: {t}"))

    return [api.step("talk", talk)]


def test_a_chat_loop_waits_holding_no_worker_and_takes_each_message_once(
    api: Api, run_id: str
) -> None:
    """receive() with no message saves the run as waiting for its topic (no owner,
    RunWaiting with .topic); a send wakes it (running, no owner); the next run replays
    what was taken and takes the rest, in send order, each message once; consumed
    messages leave the head."""
    seen: list[Any] = []
    steps = chat(api, seen)
    assert api.create(Workflow(f"chat-{run_id}", steps), run_id) is True
    assert send(api, run_id, "chat", "hello") == 0
    with pytest.raises(ds.RunWaiting) as waiting:
        api.run(run_id, steps)
    assert (waiting.value.topic, waiting.value.signal) == ("chat", None)
    cp = api.store.load(run_id)
    assert (cp.status, cp.receiving, cp.owner) == ("waiting", "chat", None)
    assert mailbox.pending(cp.mailbox, "chat") == []
    with pytest.raises(ds.RunWaiting, match="waiting for a message on topic 'chat'"):
        api.run(run_id, steps)  # nothing came: nothing runs
    assert send(api, run_id, "chat", {"text": "how are you"}) == 1
    assert send(api, run_id, "chat", "bye") == 2
    head = api.store.load_head(run_id)
    assert (head.status, head.owner) == ("running", None)  # woken for the workers
    assert api.run(run_id, steps) == {"turns": ["re: hello", "re: {'text': 'how are you'}"]}
    # each step attempt replays what it took before: "hello" is seen again, never re-taken
    assert seen == ["hello", "hello", {"text": "how are you"}, "bye"]
    cp = api.store.load(run_id)
    assert (cp.status, cp.receiving) == ("completed", None)
    assert mailbox.waiting_messages(cp.mailbox) == 0


def test_idempotency_keys_deliver_once_and_topics_keep_their_own_order(
    api: Api, run_id: str
) -> None:
    """A repeated key is accepted, changes nothing and returns the first send's number;
    each topic numbers and delivers its messages in send order, independently;
    pending_messages lists those waiting, oldest first, until they are taken."""
    got: list[Any] = []

    async def take(state: Any) -> dict[str, Any]:
        for topic in ("a", "b", "a", "a"):
            got.append((topic, await ds.receive_async(topic)))
        return {}

    steps = [api.step("take", take)]
    api.create(Workflow(f"keys-{run_id}", steps), run_id)
    assert send(api, run_id, "a", "a0", idempotency_key="k1") == 0
    before = api.store.load_head(run_id).etag
    assert send(api, run_id, "a", "again", idempotency_key="k1") == 0
    assert api.store.load_head(run_id).etag == before  # nothing written
    assert send(api, run_id, "b", "b0", idempotency_key="k1") == 0  # keys are per topic
    assert send(api, run_id, "a", "a1") == 1
    assert send(api, run_id, "a", "a2", idempotency_key="k2") == 2
    waiting = api._call(ds.pending_messages, ds.pending_messages_async, run_id)
    assert [(m.topic, m.seq, m.payload) for m in waiting] == [
        ("a", 0, "a0"), ("b", 0, "b0"), ("a", 1, "a1"), ("a", 2, "a2")
    ]  # oldest first, every topic  # fmt: skip
    api.run(run_id, steps)
    assert got == [("a", "a0"), ("b", "b0"), ("a", "a1"), ("a", "a2")]
    assert api._call(ds.pending_messages, ds.pending_messages_async, run_id) == []


def test_a_message_sent_while_the_run_works_is_taken_over_by_its_saves(
    api: Api, run_id: str
) -> None:
    """Sends that land between the run's own saves (its recorded calls) are absorbed by
    them, never overwritten: the step then takes every message, in order."""
    sent = threading.Event()
    got: list[Any] = []

    async def work(state: Any) -> dict[str, Any]:
        await ds.call_async("first", lambda: 1)
        # the sends land meanwhile (waited for in a thread: the loop serves the sends)
        await ds.call_async("wait", asyncio.to_thread, sent.wait, 30)
        await ds.call_async("after", lambda: 2)  # its save meets them
        for _ in range(3):
            got.append(await ds.receive_async("in"))
        return {}

    result: list[Any] = []
    steps = [api.step("work", work)]
    owner = threading.Thread(target=lambda: result.append(api.run(run_id, steps)))
    owner.start()
    try:
        wait_until(lambda: api.store.load_head(run_id) is not None, "the run to start")
        for n in range(3):
            send(api, run_id, "in", n)
    finally:
        sent.set()
        owner.join()
    assert result == [{}]
    assert got == [0, 1, 2]


def test_a_message_sent_while_its_receive_suspends_wakes_the_step_at_once(
    api: Api, run_id: str
) -> None:
    """A message that lands after the step found none but before the run was saved as
    waiting: the run does not wait for what it has -- the step runs again at once."""
    attempts: list[int] = []

    async def take(state: Any) -> dict[str, Any]:
        attempts.append(ds.current_step().attempt)
        if len(attempts) == 1:  # a person answers fast: after the step looked, unrecorded
            await asyncio.to_thread(send, api, run_id, "in", "fast")
        return {"got": await ds.receive_async("in")}

    assert api.run(run_id, [api.step("take", take)]) == {"got": "fast"}
    assert attempts == [1, 2]


def test_a_receive_deadline_passes_to_the_default_and_replays_so(
    api: Api, run_id: str, clock: Clock
) -> None:
    """receive(timeout=, default=): the deadline is recorded at the first suspension;
    resumed after it with no message, the receive returns the default, and that outcome
    is recorded: a message that comes later goes to the next receive. Without a
    default, MessageTimeoutError (a SignalTimeoutError) is raised in the step."""
    got: list[Any] = []

    async def take(state: Any) -> dict[str, Any]:
        got.append(await ds.receive_async("in", timeout=60, default="nobody"))
        await ds.call_async("mark", lambda: 1)
        got.append(await ds.receive_async("in"))
        return {}

    steps = [api.step("take", take)]
    api.create(Workflow(f"deadline-{run_id}", steps), run_id)
    start = clock.now
    with pytest.raises(ds.RunWaiting) as waiting:
        api.run(run_id, steps)
    assert (waiting.value.topic, waiting.value.wake_at) == ("in", start + 60)
    clock.advance(61)
    with pytest.raises(ds.RunWaiting):  # the default taken and recorded, then waits again
        api.run(run_id, steps)
    send(api, run_id, "in", "late")
    api.run(run_id, steps)
    assert got == ["nobody", "nobody", "late"]

    async def strict(state: Any) -> None:
        try:
            await ds.receive_async("in", timeout=60)
        except ds.SignalTimeoutError as exc:  # MessageTimeoutError is one
            return {"timed out": type(exc).__name__}  # type: ignore[return-value]

    other = f"{run_id}-strict"
    with pytest.raises(ds.RunWaiting):
        api.run(other, [api.step("s", strict)])
    clock.advance(61)
    assert api.run(other, [api.step("s", strict)]) == {"timed out": "MessageTimeoutError"}


def test_bad_sends_are_refused_and_write_nothing(api: Api, run_id: str) -> None:
    """No such run: RunNotFoundError; a payload that is not JSON, a topic that is not a
    name, an empty key: refused before any I/O; a completed run: ConflictError naming
    its status; a cancelled one: RunCancelledError. The run is unchanged each time."""
    with pytest.raises(ds.RunNotFoundError, match="was not sent"):
        send(api, run_id, "t", 1)
    assert api.store.load(run_id) is None
    api.create(Workflow(f"bad-{run_id}", [ds.Step("a", lambda s: None)]), run_id)
    before = api.store.load(run_id)
    with pytest.raises(ds.InvalidStateError, match=r"message payload\['t'\]"):
        send(api, run_id, "t", {"n": 2**60})
    with pytest.raises(ds.InvalidStateError):
        send(api, run_id, "t", object())
    with pytest.raises(ds.InvalidStateError, match=r"\['t'\] is a set, which is not JSON") as e:
        send(api, run_id, "t", {1, 2})  # said of what the sender did: it sent a set
    assert "send a message payload of plain" in str(e.value) and "steps" not in str(e.value)
    for topic in ("", 5, None, "a\nb"):
        with pytest.raises(ValueError, match="mailbox topic"):
            send(api, run_id, topic, 1)
    with pytest.raises(ValueError, match="idempotency_key"):
        send(api, run_id, "t", 1, idempotency_key="")
    assert api.store.load(run_id) == before
    api.run(run_id, [ds.Step("a", lambda s: None)])
    done = api.store.load(run_id)
    with pytest.raises(ds.ConflictError, match="is completed"):
        send(api, run_id, "t", 1)
    assert api.store.load(run_id) == done
    other = f"{run_id}-cancelled"
    api.create(Workflow(f"bad-{run_id}", [ds.Step("a", lambda s: None)]), other)
    api.cancel(other)
    with pytest.raises(ds.RunCancelledError):
        send(api, other, "t", 1)


def test_the_waiting_messages_of_a_run_are_bounded(api: Api, run_id: str) -> None:
    """A send that would bring the run's unconsumed messages over MAX_PENDING_BYTES is
    refused with StateTooLargeError naming the limit; what was sent before stays."""
    api.create(Workflow(f"full-{run_id}", [ds.Step("a", lambda s: None)]), run_id)
    chunk = "x" * (mailbox.MAX_PENDING_BYTES // 3)
    for _ in range(2):
        send(api, run_id, "t", chunk)
    before = api.store.load(run_id)
    with pytest.raises(ds.StateTooLargeError, match="over the limit of 262,144") as full:
        send(api, run_id, "t", chunk + "more")
    assert full.value.limit == mailbox.MAX_PENDING_BYTES
    assert api.store.load(run_id) == before
    assert len(mailbox.pending(before.mailbox, "t")) == 2


def test_receives_gathered_in_tasks_each_take_another_message(api: Api, run_id: str) -> None:
    """Receives made at once by tasks of one step each take another message (none is
    taken twice), and on the step's next attempt each task replays its own."""
    rounds: list[list[Any]] = []

    async def take(state: Any) -> dict[str, Any]:
        ds.track_tasks()  # (under run, the step's own event loop: its tasks named)
        got = await asyncio.gather(*(ds.receive_async("in") for _ in range(3)))
        rounds.append(list(got))
        if len(rounds) == 1:
            raise RuntimeError("the step fails once after its receives were recorded")
        return {"got": got}

    steps = [api.step("take", take, retry=ds.Retry(attempts=2, backoff=0))]
    api.create(Workflow(f"gather-{run_id}", steps), run_id)
    for n in range(4):
        send(api, run_id, "in", n)
    assert api.run(run_id, steps) == {"got": rounds[0]}
    assert sorted(rounds[0]) == [0, 1, 2]
    assert rounds[1] == rounds[0]
    assert mailbox.pending(api.store.load(run_id).mailbox, "in")[0]["payload"] == 3
