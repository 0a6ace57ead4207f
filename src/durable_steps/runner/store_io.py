"""Loads, saves and sleeps carried out against a store: the ``do`` of programs that
need nothing else (a signal's delivery, a heartbeat's save), and the part of the
drivers' ``do`` that is plain I/O. ``plain`` for a blocking store, ``AsyncIO`` for an
async one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from ..seam.document import info_of
from ..seam.store import AsyncStore, Checkpoint, RunInfo, Store
from .requests import Info, Load, Request, Save, Sleep, execute_async
from .tasks import untracked

T = TypeVar("T")

_sleep = time.sleep  # tests replace these three with a fake clock
_asleep = asyncio.sleep
_now = time.time


def now() -> float:
    """Seconds since the epoch, as timers, deadlines and result polling read them."""
    return _now()


def plain(store: Store) -> Callable[[Request], Any]:
    """``do`` for programs that only load, save and sleep: a blocking store's I/O."""

    def do(op: Request) -> Any:
        if isinstance(op, Load):
            return store.load(op.run_id)
        if isinstance(op, Save):
            return store.save(op.checkpoint)
        if isinstance(op, Sleep):
            return _sleep(op.seconds)
        if isinstance(op, Info):
            info = getattr(store, "run_info", None)
            return _info_of(store.load(op.run_id)) if info is None else info(op.run_id)
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

    async def __call__(self, op: Request) -> Any:
        if isinstance(op, Load):
            return await self.store.load(op.run_id)
        if isinstance(op, Save):
            return await self._save(op)
        if isinstance(op, Sleep):
            if self.cancelled:
                raise asyncio.CancelledError
            return await _asleep(op.seconds)
        if isinstance(op, Info):
            info = getattr(self.store, "run_info", None)
            if info is None:  # a store of the protocol's two methods: read it whole
                return _info_of(await self.store.load(op.run_id))
            return await info(op.run_id)
        raise TypeError(op)

    async def _save(self, op: Save) -> Any:
        saving = untracked(self.store.save(op.checkpoint))
        while True:
            try:
                return await asyncio.shield(saving)
            except asyncio.CancelledError:
                if saving.cancelled():
                    raise  # the store itself gave up, not us
                self.cancelled = True  # also when the save ended just as it came
                if saving.done():
                    return saving.result()


async def execute_on(program: Generator[Request, Any, T], store: AsyncStore) -> T:
    """Run a program that only loads, saves and sleeps against an async store. A
    cancellation that came during a save was held back until the save's outcome was
    known: it is raised now."""
    io = AsyncIO(store)
    done = await execute_async(program, io)
    if io.cancelled:
        raise asyncio.CancelledError
    return done


def _info_of(cp: Checkpoint | None) -> RunInfo | None:
    return None if cp is None else info_of(cp, 0)
