"""Loads, saves and sleeps carried out against a store: the ``do`` of programs that
need nothing else (a signal's delivery, a heartbeat's save), and the part of the
drivers' ``do`` that is plain I/O. ``blocking_io`` for a blocking store, ``AsyncStoreIO`` for
an async one. ``LoadHead`` and ``SaveHead`` read and write a run's head alone, whatever
its state's size; ``Info`` its metadata.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

from ..seam.store import AsyncStore, Store
from . import clock
from .requests import Request, Sleep, StoreRequest, execute_async
from .tasks import untracked

T = TypeVar("T")


def blocking_io(store: Store) -> Callable[[Request], Any]:
    """``do`` for programs that only load, save and sleep: a blocking store's I/O."""

    def do(op: Request) -> Any:
        if isinstance(op, Sleep):
            return clock.sleep(op.seconds)
        if not isinstance(op, StoreRequest):
            raise TypeError(op)
        call = op.store_call()
        return getattr(store, call.method)(*call.args, **(call.kwargs or {}))

    return do


class AsyncStoreIO:
    """``do`` for programs that only load, save and sleep: an async store's I/O.

    A write (a save, an item's) is not cut short by a cancellation: it is let finish,
    so that its outcome is known, and ``cancelled`` notes the cancellation. It is
    raised at the next sleep (or step), or by the caller once the program is done.
    """

    def __init__(self, store: AsyncStore) -> None:
        self.store = store
        self.cancelled = False

    async def __call__(self, op: Request) -> Any:
        if isinstance(op, Sleep):
            if self.cancelled:
                raise asyncio.CancelledError
            return await clock.asleep(op.seconds)
        if not isinstance(op, StoreRequest):
            raise TypeError(op)
        call = op.store_call()
        answer = getattr(self.store, call.method)(*call.args, **(call.kwargs or {}))
        return await (self._let_finish(answer) if call.writes else answer)

    async def _let_finish(self, write: Coroutine[Any, Any, T]) -> T:
        writing = untracked(write)
        while True:
            try:
                return await asyncio.shield(writing)
            except asyncio.CancelledError:
                if writing.cancelled():
                    raise  # the store itself gave up, not us
                self.cancelled = True  # also when the write ended just as it came
                if writing.done():
                    return writing.result()


async def execute_on(program: Generator[Request, Any, T], store: AsyncStore) -> T:
    """Run a program that only loads, saves and sleeps against an async store. A
    cancellation that came during a save was held back until the save's outcome was
    known: it is raised now."""
    io = AsyncStoreIO(store)
    done = await execute_async(program, io)
    if io.cancelled:
        raise asyncio.CancelledError
    return done
