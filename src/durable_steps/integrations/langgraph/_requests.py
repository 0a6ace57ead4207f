"""The requests the saver's programs yield, and the two drivers that carry them out
against a store -- the whole vocabulary between the saver's semantics (written once,
as programs) and its blocking and async methods.

Each request is one call of a store's method (``call``: its name and arguments), so a
driver is a lookup: ``getattr(store, name)(*args)``, awaited for an ``AsyncStore``.
The loop that sends each result back into a program (or throws its exception in) is
one, ``_drive``, for both: the blocking driver's ``do`` never suspends, so its loop
ends in one step (integrations do not import the runner's loop).
Only the listing of runs (an iterator, an async one) and a
``Wait`` for another program's write (a thread's event, polled in an event loop) differ.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, NamedTuple

from ... import ConflictError
from ...backend import AsyncStore, Checkpoint, Item, Store

Call = tuple[str, tuple[Any, ...], dict[str, Any]]
WAIT = 60.0
"""Seconds a ``Wait`` waits at most (then the program does without what it waited for)."""


class Read(NamedTuple):
    run_id: str
    kind: str
    after: str | None = None
    limit: int | None = None

    def call(self) -> Call:
        return "read_items", (self.run_id, self.kind), {"after": self.after, "limit": self.limit}


class Append(NamedTuple):
    """Create-only; ``quiet``: an item there already is no error (``append`` says False)."""

    run_id: str
    item: Item
    kind: str
    quiet: bool = False

    def call(self) -> Call:
        return "append_item", (self.run_id, self.kind, self.item.key, self.item.value), {}


class Put(NamedTuple):
    run_id: str
    item: Item
    kind: str

    def call(self) -> Call:
        return "put_item", (self.run_id, self.kind, self.item.key, self.item.value), {}


class Remove(NamedTuple):
    """Some items of a kind (``Store.delete_items``)."""

    run_id: str
    kind: str
    keys: tuple[str, ...]

    def call(self) -> Call:
        return "delete_items", (self.run_id, self.kind, self.keys), {}


class LoadRun(NamedTuple):
    run_id: str

    def call(self) -> Call:
        return "load", (self.run_id,), {}


class LoadHead(NamedTuple):
    run_id: str

    def call(self) -> Call:
        return "load_head", (self.run_id,), {}


class SaveRun(NamedTuple):
    checkpoint: Checkpoint

    def call(self) -> Call:
        return "save", (self.checkpoint,), {}


class SaveHead(NamedTuple):
    checkpoint: Checkpoint

    def call(self) -> Call:
        return "save_head", (self.checkpoint,), {}


class DeleteRun(NamedTuple):
    run_id: str

    def call(self) -> Call:
        return "delete", (self.run_id,), {}


class Wait(NamedTuple):
    """Until each of ``events`` is set (another program of this saver ended a write)."""

    events: tuple[threading.Event, ...]


class ListRuns(NamedTuple):
    """The ids of the runs of a workflow (a list, whichever the store's iterator)."""

    workflow: str


Request = (
    Read
    | Append
    | Put
    | Remove
    | LoadRun
    | LoadHead
    | SaveRun
    | SaveHead
    | DeleteRun
    | ListRuns
    | Wait
)
Program = Generator[Request, Any, Any]


def append(request: Append) -> Generator[Request, Any, bool]:
    """``request`` carried out: True when written, False when its item was there already
    and the request is ``quiet`` (else that ``ConflictError``)."""
    try:
        yield request
    except ConflictError:
        if not request.quiet:
            raise
        return False
    return True


async def _drive(program: Program, do: Callable[[Request], Awaitable[Any]]) -> Any:
    """``program`` to its end: each request done with ``do``, its result sent back in
    (its exception thrown in: the program decides)."""
    value: Any = None
    failure: BaseException | None = None
    try:
        while True:
            try:
                request = program.send(value) if failure is None else program.throw(failure)
            except StopIteration as stop:
                return stop.value
            value, failure = None, None
            try:
                value = await do(request)
            except Exception as exc:
                failure = exc
    finally:  # cut short (cancelled): its cleanup runs now (a put waiting on it is told)
        program.close()


def run_blocking(program: Program, store: Store) -> Any:
    """``program`` carried out with a blocking store's calls: the one loop (``_drive``),
    whose ``do`` never suspends, run to its end in one step."""

    async def do(request: Request) -> Any:
        if isinstance(request, ListRuns):
            return [info.run_id for info in store.list_runs(workflow=request.workflow)]
        if isinstance(request, Wait):
            deadline = time.monotonic() + WAIT
            return all(e.wait(max(0.0, deadline - time.monotonic())) for e in request.events)
        name, args, kwargs = request.call()
        return getattr(store, name)(*args, **kwargs)

    driving = _drive(program, do)
    try:
        driving.send(None)
    except StopIteration as stop:
        return stop.value
    driving.close()
    raise AssertionError("a blocking driver's step suspended")  # pragma: no cover


async def run_async(program: Program, store: AsyncStore) -> Any:
    """``program`` carried out with an async store's calls."""

    async def do(request: Request) -> Any:
        if isinstance(request, ListRuns):
            return [info.run_id async for info in store.list_runs(workflow=request.workflow)]
        if isinstance(request, Wait):  # set by a task of this loop, or a thread: polled
            deadline = time.monotonic() + WAIT
            while not all(e.is_set() for e in request.events):
                if time.monotonic() > deadline:
                    return False
                await asyncio.sleep(0.001)
            return True
        name, args, kwargs = request.call()
        return await getattr(store, name)(*args, **kwargs)

    return await _drive(program, do)
