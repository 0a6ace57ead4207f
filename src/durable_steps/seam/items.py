"""Per-run items: small records kept beside a run's checkpoint, in its own space.

Streams and published events (written by ``runner.streams``, ``runner.events``; read by
``runs.streams``, ``runs.events``) are stored as
*items* of a run -- and the mailbox, history and queue slots may use the same
mechanism -- so a backend implements it once (``Store.append_item``, ``put_item``,
``read_items``; and their async twins):

- an item is ``(run_id, kind, key) -> value``: ``kind`` names a family of items of
  the run (``"stream:out"``, ``"events"``), ``key`` orders them within it (text,
  compared code point by code point; a stream's keys are its offsets written with
  ``offset_key``, so text order is offset order), ``value`` is JSON by the state's
  rules, at most ``MAX_ITEM_BYTES`` as compact JSON;
- ``append_item`` is create-only: an existing key raises ``ConflictError`` and
  writes nothing (so two writers never both get an offset); ``put_item`` is an
  upsert (an event set again); ``read_items`` gives the items of a kind whose key
  is after ``after``, in key order, at most ``limit``;
- items go with their run: ``delete`` removes them; the run's listing never lists
  them. A store need not check that the run exists: an item of a run that has no
  checkpoint is read like any other, and deleted by that run's ``delete``.

Cost: an append is one write of the item (file: one framed record appended and
synced; Cosmos DB: one small item created in the run's partition), whatever the
number of items before it; a read after a key reads what follows it (file: from an
index of the records' places; Cosmos DB: one single-partition query ordered by key).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .document import dumps
from .errors import ConflictError, InvalidStateError
from .rules import check_name, check_run_id
from .state import check_json

MAX_ITEM_BYTES = 256 * 1024
"""The largest item value (compact JSON): far under Cosmos DB's 2 MB item limit even
with every character escaped, so an item that one store keeps every store keeps."""
OFFSET_DIGITS = 12


class Item(NamedTuple):
    """One stored item: its key and its value (plain JSON, not aliased with the store)."""

    key: str
    value: Any


def offset_key(offset: int) -> str:
    """The key of a stream's offset: fixed width, so text order is number order."""
    return f"{offset:0{OFFSET_DIGITS}d}"


def checked(run_id: str, kind: str, key: str | None = None) -> None:
    """The run id, kind and key by the rules of every store, before any I/O."""
    check_run_id(run_id)
    check_name(kind, "item kind")
    if key is not None:
        check_name(key, "item key")


def item_json(run_id: str, kind: str, key: str, value: Any) -> bytes:
    """``value`` checked by the state's rules and its size limit, as compact JSON."""
    checked(run_id, kind, key)
    check_json(value, run_id, f"{kind} item {key!r}")
    raw = dumps(value)
    if len(raw) > MAX_ITEM_BYTES:
        raise InvalidStateError(
            f"run {run_id!r}: the value of {kind} item {key!r} is {len(raw):,} bytes as JSON, "
            f"over the {MAX_ITEM_BYTES:,} a stream chunk or event may take in every store; "
            "write it in smaller chunks, or keep large data elsewhere and write its address",
            run_id=run_id,
        )
    return raw


def item_exists(run_id: str, kind: str, key: str) -> ConflictError:
    """An append met an item already there: another writer (a stale owner of the run)
    took that key first."""
    return ConflictError(
        f"run {run_id!r}: {kind} item {key!r} exists already; nothing was written. Another "
        "writer took that place first (a worker that lost the run's lease?): run one worker "
        "per run id, and reload before writing again",
        run_id=run_id,
    )
