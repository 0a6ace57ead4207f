"""A mailbox, the sending side: messages sent to a run from outside, and those waiting.

``send_message(store, run_id, topic, payload, idempotency_key=None)`` (and
``send_message_async``) adds a message to a run's mailbox and returns its number in
its topic; ``pending_messages`` lists those not yet received. A send is
``changes.update_run``: one head read and one conditional head write, which makes a
run waiting on that topic ``running`` again. The guarantees (exactly once, in send
order, no worker held while waiting, idempotency keys) and how the receiving side
keeps them are at the top of ``runner.mailbox``.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import replace
from typing import Any, NamedTuple

from ..runner.changes import update_run
from ..runner.errors import cancelled, not_found
from ..runner.requests import LoadHead, Request, execute
from ..runner.store_io import blocking_io, execute_on
from ..seam import mailbox
from ..seam.checkpoint import Checkpoint, MailboxRecord
from ..seam.errors import ConflictError
from ..seam.rules import check_run_id
from ..seam.state import freeze, thaw
from ..seam.store import AsyncStore, Store


def send_message(
    store: Store,
    run_id: str,
    topic: str,
    payload: Any,
    *,
    idempotency_key: str | None = None,
) -> int:
    """Send ``payload`` (JSON) to run ``run_id`` on ``topic``; returns its number in
    the topic (a repeated ``idempotency_key``: the first send's number, nothing sent).
    Durable once it returns. ``RunNotFoundError``: no such run; ``ConflictError``: the
    run completed; ``RunCancelledError``: it was cancelled; ``StateTooLargeError``: its
    waiting messages would exceed ``MAX_PENDING_BYTES``. Nothing is written then."""
    return execute(_send(run_id, topic, payload, idempotency_key), blocking_io(store))


async def send_message_async(
    store: AsyncStore,
    run_id: str,
    topic: str,
    payload: Any,
    *,
    idempotency_key: str | None = None,
) -> int:
    """``send_message`` for async stores."""
    return await execute_on(_send(run_id, topic, payload, idempotency_key), store)


def _send(
    run_id: str, topic: str, payload: Any, idempotency_key: str | None
) -> Generator[Request, Any, int]:
    check_run_id(run_id)
    mailbox.check_topic(topic)
    key = None if idempotency_key is None else mailbox.key_of(topic, idempotency_key)
    payload = thaw(freeze(payload, f"[{topic!r}]", run_id, 1, "message payload"))
    numbered: list[int] = []

    def deliver(cp: Checkpoint) -> Checkpoint | None:
        if cp.status == "cancelled":
            raise cancelled(run_id, cp.cancel_reason)
        if cp.status == "completed":
            raise ConflictError(
                f"run {run_id!r} is completed: it takes no more messages, and this one on "
                f"{topic!r} was not sent. Start a new run to go on (a completed run is final)",
                run_id=run_id,
            )
        box, seq = mailbox.added(cp.mailbox, run_id, topic, payload, time.time(), key)
        numbered[:] = [seq]
        if box is None:
            return None  # that key was sent before: delivered once
        wakes = cp.status == "waiting" and cp.receiving == topic
        return _changed(cp, box, wakes)

    yield from update_run(
        run_id,
        deliver,
        missing=f"the message on {topic!r} was not sent",
        doing=f"a message on {topic!r} was being sent",
        undone="nothing was sent",
    )
    return numbered[0]


def _changed(cp: Checkpoint, box: MailboxRecord, wakes: bool) -> Checkpoint:
    """``cp`` with its new mailbox; a run waiting for this topic made ``running`` again
    with no owner, for the next ``run``, ``recover`` or the worker."""
    return replace(
        cp,
        mailbox=box,
        status="running" if wakes else cp.status,
        wake_at=None if wakes else cp.wake_at,
        updated_at=None,
    )


# -- looking: what waits -----------------------------------------------------------------


class PendingMessage(NamedTuple):
    """A message sent to a run and not yet received: its topic, its number in the topic,
    its payload and when it was sent (seconds since the epoch)."""

    topic: str
    seq: int
    payload: Any
    sent_at: float | None


def _pending(run_id: str) -> Generator[Request, Any, list[PendingMessage]]:
    cp: Checkpoint | None = yield LoadHead(check_run_id(run_id))  # the head: no state read
    if cp is None:
        raise not_found(run_id, "it has no mailbox to read")
    box = mailbox.plain(cp.mailbox)
    found = [
        PendingMessage(topic, int(m["seq"]), m.get("payload"), m.get("at"))
        for topic, queue in box["topics"].items()
        for m in queue["pending"]
    ]
    return sorted(found, key=lambda m: (m.sent_at or 0.0, m.topic, m.seq))


def pending_messages(store: Store, run_id: str) -> list[PendingMessage]:
    """The messages waiting in the run's mailbox (sent, not yet received), oldest first,
    every topic; one read of the run's head. ``RunNotFoundError``: no such run."""
    return execute(_pending(run_id), blocking_io(store))


async def pending_messages_async(store: AsyncStore, run_id: str) -> list[PendingMessage]:
    """``pending_messages`` for async stores."""
    return await execute_on(_pending(run_id), store)
