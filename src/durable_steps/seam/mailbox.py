"""A run's mailbox as its checkpoint keeps it: messages sent and not yet consumed, per topic.

``send_message`` (``runs.mailbox``) adds a message to a run; ``receive`` inside a step
takes the next one of its topic, durably. This module is the stored form and the pure
functions over it, shared by the runner (its saves merge what senders added meanwhile)
and by every store (the mailbox is one more field of the head).

Storage. Messages live in the run's head, next to its signals, in
``Checkpoint.mailbox``::

    {"topics": {"chat": {"sent": 7, "pending": [{"seq": 6, "at": 1733..., "payload": ...}]}},
     "keys": {"<hash of topic and idempotency key>": 6, ...}}

- ``sent``: how many messages the topic was ever sent -- the next one's ``seq``;
  ``pending``: those sent and not consumed, in ``seq`` order. A message is consumed
  when the receive that took it is recorded in the step's journal: the same save
  removes it from ``pending`` (``consumed``), so the run's head holds only what is
  still to come, and a send costs one head read and one conditional head write
  whatever the number of messages consumed before.
- ``keys``: the idempotency keys of the last ``KEYS_KEPT`` keyed sends (hashed with
  their topic: a fixed 16 characters whatever the key), each with its message's
  ``seq``. A send whose key is there changes nothing and returns that ``seq``.
- Two writers change a mailbox: senders only add (messages, keys, ``sent``), the run
  only removes (consumes). So two versions merge without loss (``merged``): a message
  is gone when either version consumed it -- its ``seq`` below that version's
  ``sent`` and not pending there -- and kept when either has it pending.
- The bound: the pending messages of a run, as JSON, at most ``MAX_PENDING_BYTES``;
  a send over it is refused (``StateTooLargeError``, nothing written). The head is
  rewritten by every save of the run, so what waits there is paid for by each.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from .checkpoint import MailboxRecord
from .errors import StateTooLargeError
from .rules import check_name
from .state import thaw

MAX_PENDING_BYTES = 256 * 1024
"""The most a run's unconsumed messages may take, as JSON (their payloads)."""
KEYS_KEPT = 128
"""Idempotency keys a run remembers: those of its last ``KEYS_KEPT`` keyed sends."""

Mailbox = MailboxRecord


def _size(value: Any) -> int:
    """Bytes of a JSON value as the stores write it (compact UTF-8)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def check_topic(topic: object) -> str:
    """A topic: a name (non-empty text of at most 255 printable characters)."""
    return check_name(topic, "a mailbox topic")


def key_of(topic: str, key: object) -> str:
    """How an idempotency key is remembered: a hash of it and its topic, 16 characters."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"idempotency_key must be a non-empty str, not {key!r}")
    digest = hashlib.blake2b(f"{topic}\x00{key}".encode(errors="surrogatepass"), digest_size=12)
    return base64.urlsafe_b64encode(digest.digest()).decode()


def plain(mailbox: Mailbox | None) -> Mailbox:
    """A mailbox as a new plain dict (its topics and keys copied), ``{}`` for none."""
    if not mailbox:
        return {"topics": {}, "keys": {}}
    box = thaw(mailbox)
    box.setdefault("topics", {})
    box.setdefault("keys", {})
    return box  # type: ignore[no-any-return]


def pending(mailbox: Mailbox | None, topic: str) -> list[Mapping[str, Any]]:
    """The unconsumed messages of ``topic``, in send order."""
    if not mailbox:
        return []
    queue = mailbox.get("topics", {}).get(topic)
    return [] if queue is None else list(queue["pending"])


def waiting_messages(mailbox: Mailbox | None) -> int:
    """How many messages wait in the mailbox, all topics together."""
    if not mailbox:
        return 0
    return sum(len(q["pending"]) for q in mailbox.get("topics", {}).values())


def added(  # noqa: PLR0917 (one message: its run, topic, payload, time and key)
    mailbox: Mailbox | None,
    run_id: str,
    topic: str,
    payload: Any,
    at: float,
    key: str | None,
    limit: int = MAX_PENDING_BYTES,
) -> tuple[Mailbox | None, int]:
    """The mailbox with ``payload`` (checked JSON) sent on ``topic``, and its ``seq``;
    None instead of a mailbox when ``key`` (``key_of``) was sent before: nothing to do."""
    box = plain(mailbox)
    if key is not None and key in box["keys"]:
        return None, int(box["keys"][key])
    queue = box["topics"].setdefault(topic, {"sent": 0, "pending": []})
    seq = queue["sent"]
    size = _size(payload)
    waiting = sum(_size(m["payload"]) for q in box["topics"].values() for m in q["pending"])
    if waiting + size > limit:
        raise StateTooLargeError(
            f"run {run_id!r}: this message ({size:,} bytes as JSON) would bring the messages "
            f"waiting in its mailbox to {waiting + size:,} bytes, over the limit of "
            f"{limit:,}; nothing was sent. Let the run take its messages (is it running, "
            "or waiting on another topic?), or send large data by reference (a path, a URL)",
            run_id=run_id,
            size=waiting + size,
            limit=limit,
        )
    queue["sent"] = seq + 1
    queue["pending"].append({"seq": seq, "at": at, "payload": payload})
    if key is not None:
        box["keys"][key] = seq
        for old in list(box["keys"])[: max(0, len(box["keys"]) - KEYS_KEPT)]:
            del box["keys"][old]
    return box, seq


def consumed(mailbox: Mailbox | None, topic: str, seq: int) -> Mailbox:
    """The mailbox without message ``seq`` of ``topic`` (a receive took it)."""
    box = plain(mailbox)
    queue = box["topics"].get(topic)
    if queue is not None:
        queue["pending"] = [m for m in queue["pending"] if m["seq"] != seq]
    return box


def merged(ours: Mailbox | None, theirs: Mailbox | None) -> Mailbox | None:
    """Two versions of one mailbox as one: every message sent in either, less those
    consumed in either (see the top). None when both are empty."""
    if not ours:
        return None if not theirs else plain(theirs)
    if not theirs:
        return plain(ours)
    a, b = plain(ours), plain(theirs)
    topics: dict[str, Any] = {}
    for topic in {**a["topics"], **b["topics"]}:
        qa = a["topics"].get(topic, {"sent": 0, "pending": []})
        qb = b["topics"].get(topic, {"sent": 0, "pending": []})
        in_a, in_b = _kept_by(qa), _kept_by(qb)
        by_seq = {m["seq"]: m for m in (*qa["pending"], *qb["pending"])}
        topics[topic] = {
            "sent": max(qa["sent"], qb["sent"]),
            "pending": [by_seq[s] for s in sorted(by_seq) if in_a(s) and in_b(s)],
        }
    keys = {**a["keys"], **b["keys"]}
    for old in list(keys)[: max(0, len(keys) - KEYS_KEPT)]:
        del keys[old]
    return {"topics": topics, "keys": keys}


def _kept_by(queue: Mapping[str, Any]) -> Callable[[int], bool]:
    """Whether a version of a topic has not consumed message ``seq``: it was sent after
    that version (``seq >= sent``) or is pending there."""
    sent, waiting = queue["sent"], {m["seq"] for m in queue["pending"]}
    return lambda seq: seq >= sent or seq in waiting


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read(value: object) -> Mailbox | None:
    """A stored mailbox, checked for its shape (``ValueError`` says what is wrong)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("mailbox is not a JSON object")  # noqa: TRY004 (corrupt: ValueError)
    topics, keys = value.get("topics", {}), value.get("keys", {})
    if not isinstance(topics, dict) or not isinstance(keys, dict):
        raise ValueError("mailbox topics or keys is not a JSON object")  # noqa: TRY004
    for topic, queue in topics.items():
        if (
            not isinstance(queue, dict)
            or not _count(queue.get("sent"))
            or not isinstance(queue.get("pending"), list)
            or not all(isinstance(m, dict) and _count(m.get("seq")) for m in queue["pending"])
        ):
            raise ValueError(f"mailbox topic {topic!r} is not a queue of messages")
    return cast("Mailbox", value)
