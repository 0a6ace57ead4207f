"""A run's streams, listed: ``list_streams(store, run_id)`` (and ``list_streams_async``)
gives each stream the run wrote with its length and whether it is closed; ``stream_info``
one of them. For a reader that shows what a run streams (``durable-steps runs streams``,
the console) without knowing the names in advance.

Storage. A store lists items by kind, not the kinds of a run, so the names are kept
in an index: one per-run item (``seam.items``) of kind ``streams`` per stream, its
key the stream's name, put (an upsert) by ``write_stream`` before the stream's first
entry is appended (``runner.streams``). A crash between the two leaves a listed
stream of length 0 -- never an unlisted stream with chunks. It costs one write per
stream, not per chunk.

Length without reading the chunks. A stream's offsets are dense (0, 1, 2, ... each
appended only after the one before landed), so "is there an entry at offset k" is one
read of at most one item after offset k - 1, and the length is found by doubling k
until there is none, then halving the gap: about 2 log2(n) single-item reads for n
entries, whatever their size. ``length`` counts the offsets that carry a chunk or a
reset marker (``StreamReset``: it takes an offset, as readers see it); the close
marker is not counted but makes ``closed`` true. ``known`` (an offset the caller has
seen) starts the search there: a reader that follows a stream asks "closed yet?" for
about three reads.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

from ..runner.errors import not_found
from ..runner.requests import Info, ReadItems, Request, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.streams import INDEX, kind_of
from ..seam.checkpoint import RunInfo
from ..seam.errors import StreamNotFoundError
from ..seam.items import Item, offset_key
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store

PAGE = 500


class StreamInfo(NamedTuple):
    """A stream of a run: its name, how many entries it holds (chunks and reset markers;
    the next entry's offset) and whether it was closed."""

    name: str
    length: int
    closed: bool


def _at(run_id: str, kind: str, offset: int) -> Generator[Request, Any, Item | None]:
    """The entry at ``offset``, if there is one (offsets are dense: the first after the
    one before it)."""
    after = None if offset == 0 else offset_key(offset - 1)
    found: list[Item] = yield ReadItems(run_id, kind, after, 1)
    return found[0] if found and int(found[0].key) == offset else None


def names(run_id: str) -> Generator[Request, Any, list[str]]:
    """The names of the streams the run has (its index), in order."""
    found: list[str] = []
    after: str | None = None
    while True:
        items: list[Item] = yield ReadItems(run_id, INDEX, after, PAGE)
        found += [i.key for i in items]
        if len(items) < PAGE:
            return found
        after = items[-1].key


def unknown(run_id: str, name: str, streams: list[str], why: str) -> StreamNotFoundError:
    """The error of a read of a stream the run does not have: it names the streams it has."""
    has = ", ".join(repr(n) for n in streams) if streams else "none"
    return StreamNotFoundError(
        f"run {run_id!r} has no stream {name!r} (its streams: {has}); {why}",
        run_id=run_id,
        stream=name,
        streams=streams,
    )


def _info(run_id: str, name: str, known: int) -> Generator[Request, Any, StreamInfo]:
    kind = kind_of(name)
    last = yield from _at(run_id, kind, max(known, 0))
    if last is None:
        if known > 0:
            return (yield from _info(run_id, name, -1))  # the caller's offset is not there
        streams = yield from names(run_id)  # no entry: listed (a crash after the index) or not
        if name in streams:
            return StreamInfo(name, 0, False)
        raise unknown(run_id, name, streams, "check its name ('durable-steps runs streams RUN')")
    lo, hi, jump = max(known, 0), None, 1
    while hi is None:  # double until an offset has no entry ...
        probe = lo + jump
        item = yield from _at(run_id, kind, probe)
        if item is None:
            hi = probe
        else:
            lo, last, jump = probe, item, jump * 2
    while hi - lo > 1:  # ... then halve the gap: lo has an entry, hi none
        mid = (lo + hi) // 2
        item = yield from _at(run_id, kind, mid)
        if item is None:
            hi = mid
        else:
            lo, last = mid, item
    closed = isinstance(last.value, dict) and last.value.get("closed") is True
    return StreamInfo(name, lo if closed else lo + 1, closed)


def _exists(run_id: str) -> Generator[Request, Any, RunInfo]:
    info: RunInfo | None = yield Info(check_run_id(run_id))
    if info is None:
        raise not_found(run_id, "it has no streams to list")
    return info


def _list(run_id: str) -> Generator[Request, Any, list[StreamInfo]]:
    yield from _exists(run_id)
    found = []
    for name in (yield from names(run_id)):
        found.append((yield from _info(run_id, name, 0)))
    return found


def _one(run_id: str, name: str, known: int) -> Generator[Request, Any, StreamInfo]:
    if type(known) is not int or known < -1:
        raise ValueError(f"stream_info(known=...) must be an offset (int >= -1), not {known!r}")
    yield from _exists(run_id)
    return (yield from _info(run_id, name, known))


def list_streams(store: Store, run_id: str) -> list[StreamInfo]:
    """The streams run ``run_id`` wrote, by name: each one's length and whether it is
    closed. ``RunNotFoundError`` when the run does not exist."""
    return execute(_list(run_id), blocking_io(store))


async def list_streams_async(store: AsyncStore, run_id: str) -> list[StreamInfo]:
    """``list_streams`` for async stores."""
    return await execute_on(_list(run_id), store)


def stream_info(store: Store, run_id: str, name: str, *, known: int = -1) -> StreamInfo:
    """Stream ``name`` of the run now; ``known``: an offset the caller saw, where the
    search starts. ``StreamNotFoundError`` (naming the run's streams) when the run has
    no stream ``name``, ``RunNotFoundError`` when there is no such run."""
    return execute(_one(run_id, name, known), blocking_io(store))


async def stream_info_async(
    store: AsyncStore, run_id: str, name: str, *, known: int = -1
) -> StreamInfo:
    """``stream_info`` for async stores."""
    return await execute_on(_one(run_id, name, known), store)
