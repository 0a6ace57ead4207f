"""Programs and their requests: what the runner, a heartbeat or a signal asks a driver
to do, and the plain way of doing it.

The semantics of a run (``_runner``), of keeping its lease (``_keep``) and of
delivering a signal (``_signals``) are generators free of I/O: each yields a
request -- ``Load``, ``Save``, ``Call`` a step, ``Sleep`` -- and is resumed with
its result, or has its exception thrown in. ``execute`` and ``execute_async``
run such a program to its end; ``plain`` and ``AsyncIO`` carry out loads, saves
and sleeps against a blocking or an async store (the drivers of ``run`` and
``run_async`` in ``_drive`` add steps, heartbeats and the lease). So each piece
of semantics is written once, and sync and async code cannot drift apart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ._store import AsyncStore, Checkpoint, Store

if TYPE_CHECKING:
    from ._state import FrozenState
    from ._step import Step, StepContext

T = TypeVar("T")
_sleep = time.sleep  # tests replace these two with a fake clock
_asleep = asyncio.sleep


# Requests are made several times per step: NamedTuples, which cost a fraction of a
# frozen dataclass to make.


class Load(NamedTuple):
    run_id: str


class Save(NamedTuple):
    checkpoint: Checkpoint


class Call(NamedTuple):
    step: Step
    context: StepContext
    state: FrozenState


class Sleep(NamedTuple):
    seconds: float


Op = Load | Save | Call | Sleep


def execute(program: Generator[Op, Any, T], do: Callable[[Op], Any]) -> T:
    """Run ``program`` to its end, doing each request with ``do``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = program.send(value) if error is None else program.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = do(op)
        except BaseException as exc:  # handed to the program, which decides
            error = exc


async def execute_async(program: Generator[Op, Any, T], do: Callable[[Op], Awaitable[Any]]) -> T:
    """``execute`` for asyncio."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = program.send(value) if error is None else program.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await do(op)
        except BaseException as exc:
            error = exc


def plain(store: Store) -> Callable[[Op], Any]:
    """``do`` for programs that only load, save and sleep: a blocking store's I/O."""

    def do(op: Op) -> Any:
        if isinstance(op, Load):
            return store.load(op.run_id)
        if isinstance(op, Save):
            return store.save(op.checkpoint)
        if isinstance(op, Sleep):
            return _sleep(op.seconds)
        raise TypeError(op)

    return do


class AsyncIO:
    """``do`` for programs that only load, save and sleep: an async store's I/O.

    A save is not cut short by a cancellation: it is let finish, so that its outcome
    is known, and ``cancelled`` notes the cancellation. It is raised at the next
    sleep (or step), or by the caller once the program is done.
    """

    def __init__(self, store: AsyncStore) -> None:
        self.store = store
        self.cancelled = False

    async def __call__(self, op: Op) -> Any:
        if isinstance(op, Load):
            return await self.store.load(op.run_id)
        if isinstance(op, Save):
            return await self._save(op)
        if isinstance(op, Sleep):
            if self.cancelled:
                raise asyncio.CancelledError
            return await _asleep(op.seconds)
        raise TypeError(op)

    async def _save(self, op: Save) -> Any:
        saving = asyncio.ensure_future(self.store.save(op.checkpoint))
        while True:
            try:
                return await asyncio.shield(saving)
            except asyncio.CancelledError:
                if saving.cancelled():
                    raise  # the store itself gave up, not us
                self.cancelled = True  # also when the save ended just as it came
                if saving.done():
                    return saving.result()
