"""Loads, saves and sleeps carried out against a store: the ``do`` of programs that
need nothing else (a signal's delivery, a heartbeat's save), and the part of the
drivers' ``do`` that is plain I/O. ``plain`` for a blocking store, ``AsyncIO`` for an
async one.

``LoadHead`` and ``SaveHead`` go to a ``HeadStore``'s ``load_head`` and ``save_head``
(the head alone, whatever the state's size); a store of ``load`` and ``save`` alone
is read and written whole instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from ..seam.document import info_of
from ..seam.state import frozen_state
from ..seam.store import AsyncHeadStore, AsyncStore, Checkpoint, HeadStore, RunInfo, Store, evolve
from .requests import Info, Load, LoadHead, Request, Save, SaveHead, Sleep, execute_async
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
    if isinstance(store, HeadStore):
        load_head, save_head = store.load_head, store.save_head
    else:
        load_head, save_head = (lambda run_id: _whole(store.load(run_id))), store.save

    def do(op: Request) -> Any:
        if isinstance(op, Load):
            return store.load(op.run_id)
        if isinstance(op, Save):
            return store.save(op.checkpoint)
        if isinstance(op, LoadHead):
            return load_head(op.run_id)
        if isinstance(op, SaveHead):
            return save_head(op.checkpoint)
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
        if isinstance(op, Save | SaveHead):
            return await self._save(op)
        if isinstance(op, LoadHead):
            return await self._load_head(op.run_id)
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

    async def _load_head(self, run_id: str) -> Checkpoint | None:
        if isinstance(self.store, AsyncHeadStore):
            return await self.store.load_head(run_id)
        return _whole(await self.store.load(run_id))

    async def _save(self, op: Save | SaveHead) -> Any:
        store = self.store
        if isinstance(op, SaveHead) and isinstance(store, AsyncHeadStore):
            saving = untracked(store.save_head(op.checkpoint))
        else:
            saving = untracked(store.save(op.checkpoint))
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


def _whole(cp: Checkpoint | None) -> Checkpoint | None:
    """``LoadHead`` on a store of ``load`` and ``save`` alone: the run read whole, its
    state marked as the stored one, so that its ``SaveHead`` (a save) writes no state
    where the store can tell."""
    if cp is None:
        return None
    return evolve(cp, state=frozen_state(cp.state, cp.run_id, stored_as=cp.etag))


def _info_of(cp: Checkpoint | None) -> RunInfo | None:
    return None if cp is None else info_of(cp, 0)
