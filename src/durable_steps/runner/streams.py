"""Output streams, the writing side: a run's chunks, written inside its steps.

``write_stream(name, chunk)`` (``await write_stream_async(...)`` under ``run_async``),
inside a step or a call's function, appends a JSON chunk to the run's stream ``name``;
``close_stream(name)`` ends it. Outside, ``read_stream`` (``runs.streams``) yields
``(offset, chunk)`` as they come. Offsets are 0, 1, 2, ...

Storage. Each chunk is one per-run item (``seam.items``) of kind ``stream:NAME`` whose
key is its offset: one append, create-only, so that no two writers ever get one
offset (a stale owner that writes after another took the run over meets the
other's items: ``ConflictError``, which ends its step). Offsets are dense: the
run's owner assigns them one after the other, appends one at a time (an async
step's tasks take turns), and only after the chunk before is stored -- so a reader
never sees an offset before the one below it. Before a stream's first entry, its
name is put in the run's index of streams (``runs.stream_index``: what
``list_streams`` reads).

What a resume does (the run's process killed, its lease taken over, a step retried):

- a recorded call is replayed without running its function: its chunks stay and
  are not written again;
- chunks written by step code outside calls are written once: each write takes
  its place in the step's journal (``journal.take``: step, task scope, index) and
  stores it with the chunk; when the step runs again, a write whose place is in
  the stream already is skipped (steps are deterministic between durable
  operations, so it is the same chunk);
- chunks written by a call that did not record its result (in flight at a kill,
  raised, retried) are *kept and marked*: when that call runs again (a new
  attempt) its first write appends a marker first, ``StreamReset(since, call)``:
  the chunks that call wrote from offset ``since`` up to the marker belong to an
  attempt that was interrupted, and what the call writes after the marker replaces
  them. A reader gets the marker as an entry, ``(offset, StreamReset(...))``, in
  its place: never silence, never a rewritten offset.

Stored values: ``{"chunk": C, "at": place}`` (step code), ``{"chunk": C, "call":
id, "attempt": n}`` (a call's function), ``{"reset": since, "call": id,
"attempt": n}``, ``{"closed": true, ...}``.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..seam.items import Item, offset_key
from ..seam.rules import check_name
from .journal import Journal
from .requests import AppendItem, PutItem, ReadItems, Request, execute, execute_async
from .step import current_step
from .tasks import join

PAGE = 500
"""Items a reader or a writer's first look reads per request."""
INDEX = "streams"
"""The kind of the run's index of streams: one item per stream, keyed by its name
(``runs.stream_index`` reads it)."""


class StreamReset(NamedTuple):
    """A marker in a stream: the chunks that call ``call`` wrote from offset ``since`` up
    to this entry were written by an attempt that was interrupted (a kill, an error, a
    retry); what that call writes next replaces them."""

    since: int
    call: str


def kind_of(name: str) -> str:
    """The item kind of stream ``name``'s entries."""
    return "stream:" + check_name(name, "stream name")


def indexed(run_id: str, name: str) -> PutItem:
    """The index entry ``write_stream`` puts before a stream's first entry."""
    return PutItem(run_id, INDEX, name, {"opened_at": time.time()})


# -- writing, inside a step ----------------------------------------------------------------


@dataclass
class _Written:
    """What the run's owner knows of one stream (read once per process, then kept)."""

    next: int = 0
    places: set[str] = field(default_factory=set)
    """The places (step/scope/index) of the chunks step code wrote."""
    calls: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per call: the attempt that wrote last, and the offset where that attempt began."""
    closed: bool = False

    def absorb(self, offset: int, value: Any) -> None:
        self.next = offset + 1
        if not isinstance(value, dict):
            return
        if "at" in value:
            self.places.add(str(value["at"]))
        call, attempt = value.get("call"), value.get("attempt")
        if isinstance(call, str) and isinstance(attempt, int):
            seen = self.calls.get(call)
            if seen is None or seen[0] != attempt or "reset" in value:
                self.calls[call] = (attempt, offset)
        if value.get("closed") is True:
            self.closed = True


_known: weakref.WeakKeyDictionary[object, dict[str, _Written]] = weakref.WeakKeyDictionary()
"""Per run program (one owner's run in this process): its streams as it knows them."""
_turns: weakref.WeakKeyDictionary[object, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()
"""Under ``run_async``: per stream, the lock on which the step's tasks take turns to
append (one at a time, each after the one before landed: dense offsets)."""


def _load(run_id: str, kind: str) -> Generator[Request, Any, _Written]:
    written = _Written()
    after: str | None = None
    while True:
        items: list[Item] = yield ReadItems(run_id, kind, after, PAGE)
        for item in items:
            written.absorb(int(item.key), item.value)
        if len(items) < PAGE:
            return written
        after = items[-1].key


def _write(journal: Journal, name: str, body: dict[str, Any]) -> Generator[Request, Any, None]:
    """Append ``body`` (a chunk, or the close) to stream ``name`` (see the top)."""
    kind = kind_of(name)
    ctx = current_step()
    run_id = journal.run.run_id
    if ctx.call is None:  # step code: its place makes a replayed write a no-op
        key, _ = journal.take("stream", name)
        at = f"{ctx.index}/{key.get('task', '')}/{key['i']}"
        body = {**body, "at": at}
    else:  # a call's function: its attempt, so a later attempt marks what this one wrote
        call = f"{ctx.index}/{join(ctx.call_scope, f'c{ctx.call[0]}')}"
        body = {**body, "call": call, "attempt": ctx.attempt}
    streams = _known.setdefault(journal.run, {})
    written = streams.get(kind)
    if written is None:
        written = streams[kind] = yield from _load(run_id, kind)
    if "at" in body and body["at"] in written.places:
        return  # written by an earlier attempt of this step
    if written.closed:
        raise ValueError(
            f"run {run_id!r}: stream {name!r} is closed; nothing more can be written to it "
            "(write to another stream, or close it only when the run is done with it)"
        )
    journal.check()
    try:
        if written.next == 0:  # listed before its first entry (runs.stream_index reads it)
            yield indexed(run_id, name)
        if "call" in body:
            seen = written.calls.get(body["call"])
            if seen is not None and seen[0] != body["attempt"]:
                marker = {"reset": seen[1], "call": body["call"], "attempt": body["attempt"]}
                yield AppendItem(run_id, kind, offset_key(written.next), marker)
                written.absorb(written.next, marker)
        yield AppendItem(run_id, kind, offset_key(written.next), body)
    except BaseException:
        streams.pop(kind, None)  # unsure what landed: read it again next time
        raise
    written.absorb(written.next, body)


def _journal(what: str) -> Journal:
    try:
        journal = current_step().journal
    except RuntimeError as exc:  # said of the stream: the caller wrote one, not current_step()
        where = str(exc).partition(" (")[2]
        raise RuntimeError(
            f"{what}() was called outside a step: a stream is written by a step while "
            "run() or run_async() runs it (call it in the step's code or in a call's "
            "function); outside a run, read a stream with read_stream()"
            + (f" ({where}" if where else "")
        ) from None
    if not isinstance(journal, Journal) or journal.driver is None:
        raise RuntimeError(
            f"{what}() is only available inside a step run by run() or run_async(); outside, "
            "read a stream with read_stream()"
        )
    return journal


def _written(journal: Journal, name: str, body: dict[str, Any]) -> None:
    driver = journal.driven
    if driver.is_async:
        raise TypeError(
            f"{'close_stream' if 'closed' in body else 'write_stream'}({name!r}, ...) inside a "
            "step run by run_async(): await write_stream_async() / close_stream_async()"
        )
    execute(_write(journal, name, body), driver.io)


async def _written_async(journal: Journal, name: str, body: dict[str, Any]) -> None:
    driver = journal.driven
    if not driver.is_async:  # a coroutine of a run() step: the run's blocking I/O
        execute(_write(journal, name, body), driver.io)
        return
    turns = _turns.setdefault(journal.run, {})
    turn = turns.get(name) or turns.setdefault(name, asyncio.Lock())
    async with turn:
        await execute_async(_write(journal, name, body), driver.io)
    if driver.cancelled:
        raise asyncio.CancelledError  # held back while the append finished


def write_stream(name: str, chunk: Any) -> None:
    """Append ``chunk`` (JSON, at most 256 KiB) to the run's stream ``name``, inside a
    step or a call's function run by ``run()`` (see the top for what a resume does)."""
    _written(_journal("write_stream"), name, {"chunk": chunk})


async def write_stream_async(name: str, chunk: Any) -> None:
    """``write_stream`` for steps run by ``run_async()`` (and coroutines of ``run`` steps)."""
    await _written_async(_journal("write_stream_async"), name, {"chunk": chunk})


def close_stream(name: str) -> None:
    """End the run's stream ``name``: readers stop after its last chunk."""
    _written(_journal("close_stream"), name, {"closed": True})


async def close_stream_async(name: str) -> None:
    """``close_stream`` for steps run by ``run_async()``."""
    await _written_async(_journal("close_stream_async"), name, {"closed": True})
