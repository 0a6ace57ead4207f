"""Output streams, the reading side: a run's chunks read outside it as they come.

``read_stream(store, run_id, name, after=)`` (an iterator; ``read_stream_async`` an
async one) yields ``(offset, chunk)`` and follows the stream live until it is closed
or the run ends (completed, failed, cancelled). Offsets are 0, 1, 2, ... A reader
that stops and comes back with ``after=`` its last offset misses nothing and sees
nothing twice; a ``StreamReset`` entry marks the chunks of a call's interrupted
attempt. How streams are written and stored, and what a resume does to them, is at
the top of ``runner.streams`` (the writing side, inside steps).

Unknown names. A reader's mistake is said at once, the same with or without
``follow``: a run that does not exist is ``RunNotFoundError``; a stream the run has
not written (not in its index, ``runs.stream_index``) is ``StreamNotFoundError``
naming the streams it has -- when the run has ended (it never will write it), and,
on a live run, unless the caller passed ``wait=True``. A run writes a stream only
when its step gets there, so a reader that starts with the run, or before the step
that writes, passes ``wait=True``: it then follows the stream from its first chunk
(or gets nothing yet with ``follow=False``), and the error comes only if the run
ends without writing it. Names are checked once per reader, when a round finds
nothing and the stream was not seen yet (an index read: the run's few names).

One implementation for sync and async: a round of reading is a program
(``_Reader.poll``, yielding ``runner.requests``), run by ``read_stream`` on a sync
store and by ``read_stream_async`` on an async one, as the runner's drivers run steps.

Reading polls the store: ``read_items`` after the last offset (file: the log's new
records only; Cosmos DB: one single-partition query); when nothing is new, the
run's metadata (``run_info``: never its state) tells whether it ended. The pause
between empty polls starts at ``interval`` and backs off to ``max_interval``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

from ..runner.clock import now
from ..runner.errors import not_found
from ..runner.requests import Info, ReadItems, Request, Sleep, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.streams import PAGE, StreamReset, kind_of
from ..runner.timers import seconds_of
from ..seam.checkpoint import RunInfo
from ..seam.items import Item, offset_key
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store
from .stream_index import names, unknown

ENDED = ("completed", "failed", "cancelled")


# -- reading, outside ----------------------------------------------------------------------


class _Reader:
    """One reader's position and pace; ``poll`` is a program of one round."""

    def __init__(
        self,
        run_id: str,
        name: str,
        *,
        after: int | None,
        follow: bool,
        wait: bool,
        interval: float,
        max_interval: float,
        timeout: float | None,
    ) -> None:
        self.run_id, self.kind, self.follow = check_run_id(run_id), kind_of(name), follow
        self.name, self.wait, self.listed = name, wait, False
        if after is not None and (type(after) is not int or after < -1):
            raise ValueError(f"read_stream(after=...) must be an offset (int >= -1), not {after!r}")
        self.after = None if after is None or after < 0 else offset_key(after)
        self.interval = seconds_of(interval, "read_stream(interval=...)") or 0.001
        self.max_interval = max(self.interval, seconds_of(max_interval, "max_interval"))
        self.pause = self.interval
        self.timeout = None if timeout is None else seconds_of(timeout, "timeout")
        self.deadline = None if self.timeout is None else now() + self.timeout
        self.done = False

    def poll(self) -> Generator[Request, Any, list[tuple[int, Any]]]:
        """The entries that came since the last round (paused first when none did)."""
        items: list[Item] = yield ReadItems(self.run_id, self.kind, self.after, PAGE)
        if items:
            self.listed = True
            self.pause = self.interval
            if self.timeout is not None:
                self.deadline = now() + self.timeout
            return self._entries(items)
        if not self.follow and self.listed:
            self.done = True
            return []
        info: RunInfo | None = yield Info(self.run_id)
        if info is None:
            raise not_found(self.run_id, "it has no stream to read (start it first)")
        if not self.listed:
            yield from self._listed(info)
        if not self.follow:
            self.done = True
            return []
        if info.status in ENDED:  # what was written before it ended, then no more
            items = yield ReadItems(self.run_id, self.kind, self.after, PAGE)
            self.done = len(items) < PAGE
            return self._entries(items)
        if self.deadline is not None and now() >= self.deadline:
            raise TimeoutError(
                f"run {self.run_id!r}: nothing new on its {self.kind} within the timeout (the "
                f"run is {info.status}); read again from your last offset"
            )
        yield Sleep(self.pause)
        self.pause = min(self.pause * 2, self.max_interval)
        return []

    def _listed(self, info: RunInfo) -> Generator[Request, Any, None]:
        """Whether the run has the stream; ``StreamNotFoundError`` when it has not and
        will not (see the top). The index is read after ``info``: a stream the run wrote
        before it ended is in it."""
        streams = yield from names(self.run_id)
        if self.name in streams:
            self.listed = True
        elif info.status in ENDED:
            raise unknown(self.run_id, self.name, streams, f"the run is {info.status}")
        elif not self.wait:
            raise unknown(
                self.run_id,
                self.name,
                streams,
                f"the run is {info.status} and has not written it: check the name, or pass "
                "wait=True (--wait) to wait for a stream it writes later",
            )

    def _entries(self, items: list[Item]) -> list[tuple[int, Any]]:
        entries: list[tuple[int, Any]] = []
        for item in items:
            self.after = item.key
            value = item.value if isinstance(item.value, dict) else {}
            if value.get("closed") is True:
                self.done = True
                break
            if "reset" in value:
                entries.append((int(item.key), StreamReset(value["reset"], value["call"])))
            else:
                entries.append((int(item.key), value.get("chunk")))
        return entries


def read_stream(
    store: Store,
    run_id: str,
    name: str,
    *,
    after: int | None = None,
    follow: bool = True,
    wait: bool = False,
    interval: float = 0.05,
    max_interval: float = 1.0,
    timeout: float | None = None,
) -> Iterator[tuple[int, Any]]:
    """``(offset, chunk)`` of the run's stream ``name`` after offset ``after`` (from the
    start with None), following it live until it is closed or the run ends -- or, with
    ``follow=False``, what is there now. A ``StreamReset`` entry marks the chunks of an
    interrupted call (see the top). ``wait=True``: a stream the run has not written yet
    is waited for (followed) or empty (``follow=False``) instead of unknown.
    ``timeout``: seconds without a new entry before ``TimeoutError``.
    ``RunNotFoundError`` when the run does not exist, ``StreamNotFoundError`` (naming the
    streams it has) when it has no stream ``name`` (see the top)."""
    reader = _Reader(
        run_id,
        name,
        after=after,
        follow=follow,
        wait=wait,
        interval=interval,
        max_interval=max_interval,
        timeout=timeout,
    )
    do = blocking_io(store)
    while not reader.done:
        yield from execute(reader.poll(), do)


async def read_stream_async(
    store: AsyncStore,
    run_id: str,
    name: str,
    *,
    after: int | None = None,
    follow: bool = True,
    wait: bool = False,
    interval: float = 0.05,
    max_interval: float = 1.0,
    timeout: float | None = None,
) -> AsyncIterator[tuple[int, Any]]:
    """``read_stream`` for async stores (an async iterator)."""
    reader = _Reader(
        run_id,
        name,
        after=after,
        follow=follow,
        wait=wait,
        interval=interval,
        max_interval=max_interval,
        timeout=timeout,
    )
    while not reader.done:
        for entry in await execute_on(reader.poll(), store):
            yield entry
