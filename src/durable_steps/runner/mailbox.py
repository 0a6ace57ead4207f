"""A mailbox: messages sent to a run while it lives, each taken once, durably, by its steps.

This module is the receiving side, inside steps; the sending side (``send_message``,
``pending_messages``) is ``runs.mailbox``, as callers reach a run from outside.
``send_message(store, run_id, topic, payload, idempotency_key=None)`` (and
``send_message_async``) may be called any number of times, from any process; it
returns the message's number in its topic (0, 1, 2...). Inside a step,
``receive(topic, timeout=None)`` (and ``await receive_async(...)``) returns the
payload of the topic's next message. A multi-turn chat is one loop on one topic.

Guarantees, and how they are kept:

- Exactly once, across crashes. A receive is a durable operation of the step's
  journal, numbered like a call (``journal.take("receive", topic)``). Taking a
  message is one save that records it in the journal *and* removes it from the
  run's mailbox (``checkpoints.received``): before that save lands the message is
  still there for the step's next attempt, after it the record replays it. A
  replayed receive returns its recorded message and takes nothing.
- In send order. Each topic numbers its messages as they are accepted (conditional
  writes of one head: a total order); a receive takes the lowest-numbered message
  not yet taken. Receives made concurrently in one step (tasks) each take another
  message (``_claim``), and each replays its own record.
- No worker held while waiting. A receive with no message saves the run as
  ``waiting`` for that topic (``Checkpoint.receiving``; with ``timeout``, a deadline,
  as ``wait_for_signal``'s: recorded at the first suspension and kept as ``wake_at``)
  and raises ``RunWaiting`` (``.topic``). The next message on the topic makes the
  run ``running`` again with no owner, for ``recover``, the worker or the next
  ``run``; the step runs again, its recorded calls and receives return at once, and
  this receive takes the message. After the deadline with no message, the receive
  returns ``default``, or raises ``MessageTimeoutError``; that outcome is recorded
  too, so that a replay of the step times out again instead of taking a message
  that came later.
- A repeated ``idempotency_key`` is delivered once: the second send is accepted,
  changes nothing and returns the first one's number. Keys are remembered for the
  run's last ``seam.mailbox.KEYS_KEPT`` (128) keyed sends.

Storage (``seam.mailbox``): the pending messages live in the run's head, beside its
signals; consumed ones leave it in the save that consumes them. A send is
``changes.update_run``: one head read and one conditional head write (a save of the
run meanwhile makes it read again and retry, never overwrite), whatever the number
of messages consumed before. The run's own saves take over what was sent meanwhile
(``lease_keeper``). A run's waiting messages are bounded (``MAX_PENDING_BYTES``, as
JSON): a send over it is refused with ``StateTooLargeError``. A message to a
completed run is refused (``ConflictError``, naming its status), to a cancelled one
too (``RunCancelledError``); a failed run keeps its messages for its next attempt.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, NamedTuple

from ..seam import mailbox
from ..seam.errors import MessageTimeoutError, Suspend
from ..seam.state import freeze, thaw
from .clock import now
from .journal import Journal, _journal, save_record, save_record_async
from .step import current_step
from .timers import seconds_of

_NO_DEFAULT: Any = object()

# -- receiving -------------------------------------------------------------------------


def receive(
    topic: str, *, timeout: float | timedelta | None = None, default: Any = _NO_DEFAULT
) -> Any:
    """The payload of the next message on ``topic``, taken once and recorded; until one
    comes, the run waits without a worker (see the top). With ``timeout`` (seconds, or a
    ``timedelta``): resumed after the deadline with no message, returns ``default`` when
    given, else raises ``MessageTimeoutError`` in the step."""
    journal = _journal("receive")
    if journal.driven.is_async:
        raise TypeError(
            f"receive({topic!r}) inside a step run by run_async(): use "
            f"'await receive_async({topic!r})', which does not block the event loop"
        )
    taken = _take(journal, topic, timeout, default)
    if taken.record is not None:
        save_record(journal, taken.record)
        journal.recorded(taken.key, taken.record)
    return taken.outcome()


async def receive_async(
    topic: str, *, timeout: float | timedelta | None = None, default: Any = _NO_DEFAULT
) -> Any:
    """``receive`` for coroutines: ``await receive_async(topic)``."""
    journal = _journal("receive_async")
    taken = _take(journal, topic, timeout, default)
    if taken.record is not None:
        await save_record_async(journal, taken.record)
        journal.recorded(taken.key, taken.record)
    return taken.outcome()


class _Taken(NamedTuple):
    key: dict[str, Any]
    record: Mapping[str, Any] | None
    """To save before the receive returns (None: replayed, nothing to save)."""
    value: Any
    error: MessageTimeoutError | None

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _take(journal: Journal, topic: str, timeout: object, default: Any) -> _Taken:
    """What a receive returns, and the record to save first; raises ``Suspend`` when
    the run is to wait. Decided without I/O, before any await."""
    mailbox.check_topic(topic)
    seconds = None if timeout is None else seconds_of(timeout, "receive(timeout=...)")
    ctx = current_step()
    key, record = journal.take("receive", topic)
    if record is not None and "result" in record:  # replayed: what it took (or its timeout)
        if record.get("timed_out"):
            return _Taken(key, None, *_timed_out(ctx.run_id, topic, record["deadline"], default))
        return _Taken(key, None, thaw(record["result"]), None)
    journal.check()
    base = {**key, "name": topic, "kind": "receive", "step_attempt": ctx.attempt}
    message = _claim(journal, topic)
    if message is not None:
        done = {**base, "seq": message["seq"], "at": time.time(), "result": message["payload"]}
        saved = freeze(done, "", ctx.run_id, 0, "mailbox message")
        return _Taken(key, saved, thaw(message["payload"]), None)
    if record is None:  # the first time it waits: its deadline decided now
        deadline = None if seconds is None else now() + seconds
        raise Suspend(None, deadline, {**base, "deadline": deadline}, topic=topic)
    deadline = record.get("deadline")
    if deadline is None or deadline > now():
        raise Suspend(None, deadline, topic=topic)
    # The deadline passed with no message: recorded, so that a replay times out again.
    out = {**base, "deadline": deadline, "timed_out": True, "at": time.time(), "result": None}
    value, error = _timed_out(ctx.run_id, topic, deadline, default)
    return _Taken(key, freeze(out, "", ctx.run_id, 0, "mailbox message"), value, error)


def _timed_out(
    run_id: str, topic: str, deadline: float, default: Any
) -> tuple[Any, MessageTimeoutError | None]:
    if default is not _NO_DEFAULT:
        return default, None
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(deadline))
    return None, MessageTimeoutError(
        f"run {run_id!r}: no message on topic {topic!r} came before its deadline ({when}); "
        "pass default= to receive to go on without one, or catch MessageTimeoutError",
        run_id=run_id,
        signal=topic,
        topic=topic,
        deadline=deadline,
    )


_claims: weakref.WeakKeyDictionary[Journal, dict[str, set[int]]] = weakref.WeakKeyDictionary()
_claims_lock = threading.Lock()


def _claim(journal: Journal, topic: str) -> Mapping[str, Any] | None:
    """The next message of ``topic`` that no other receive of this step attempt took:
    receives gathered in tasks (or threads) each get another one, even before the
    save of the one before has come back."""
    with _claims_lock:
        taken = _claims.setdefault(journal, {}).setdefault(topic, set())
        for message in mailbox.pending(journal.run.cp.mailbox, topic):
            if message["seq"] not in taken:
                taken.add(message["seq"])
                return message
    return None
