"""Loads, saves and sleeps carried out against a store: the ``do`` of programs that
need nothing else (a signal's delivery, a heartbeat's save), and the part of the
drivers' ``do`` that is plain I/O. ``blocking_io`` for a blocking store, ``AsyncStoreIO`` for
an async one. ``LoadHead`` and ``SaveHead`` read and write a run's head alone, whatever
its state's size; ``Info`` its metadata.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from ..seam.store import AsyncStore, Store
from . import clock
from .requests import (
    AppendItem,
    Info,
    Load,
    LoadAt,
    LoadHead,
    PutItem,
    ReadItems,
    Request,
    Save,
    SaveHead,
    Sleep,
    execute_async,
)
from .tasks import untracked

T = TypeVar("T")


def blocking_io(store: Store) -> Callable[[Request], Any]:
    """``do`` for programs that only load, save and sleep: a blocking store's I/O."""

    def do(op: Request) -> Any:  # noqa: PLR0911 (one return per request kind)
        if isinstance(op, Load):
            return store.load(op.run_id)
        if isinstance(op, Save):
            return store.save(op.checkpoint)
        if isinstance(op, LoadHead):
            return store.load_head(op.run_id)
        if isinstance(op, SaveHead):
            return store.save_head(op.checkpoint)
        if isinstance(op, Sleep):
            return clock.sleep(op.seconds)
        if isinstance(op, Info):
            return store.run_info(op.run_id)
        if isinstance(op, LoadAt):
            return store.load_at(op.run_id, op.step)
        if isinstance(op, AppendItem):
            return store.append_item(op.run_id, op.kind, op.key, op.value)
        if isinstance(op, PutItem):
            return store.put_item(op.run_id, op.kind, op.key, op.value)
        if isinstance(op, ReadItems):
            return store.read_items(op.run_id, op.kind, after=op.after, limit=op.limit)
        raise TypeError(op)

    return do


class AsyncStoreIO:
    """``do`` for programs that only load, save and sleep: an async store's I/O.

    A save is not cut short by a cancellation: it is let finish, so that its outcome
    is known, and ``cancelled`` notes the cancellation. It is raised at the next
    sleep (or step), or by the caller once the program is done.
    """

    def __init__(self, store: AsyncStore) -> None:
        self.store = store
        self.cancelled = False

    async def __call__(self, op: Request) -> Any:  # noqa: PLR0911 - one per kind of request
        if isinstance(op, Load):
            return await self.store.load(op.run_id)
        if isinstance(op, Save | SaveHead):
            return await self._save(op)
        if isinstance(op, LoadHead):
            return await self.store.load_head(op.run_id)
        if isinstance(op, Sleep):
            if self.cancelled:
                raise asyncio.CancelledError
            return await clock.asleep(op.seconds)
        if isinstance(op, Info):
            return await self.store.run_info(op.run_id)
        if isinstance(op, LoadAt):
            return await self.store.load_at(op.run_id, op.step)
        if isinstance(op, ReadItems):
            return await self.store.read_items(op.run_id, op.kind, after=op.after, limit=op.limit)
        if isinstance(op, AppendItem | PutItem):  # a write: let finish, as a save
            return await self._write_item(op)
        raise TypeError(op)

    async def _write_item(self, op: AppendItem | PutItem) -> None:
        store = self.store
        write = store.append_item if isinstance(op, AppendItem) else store.put_item
        writing = untracked(write(op.run_id, op.kind, op.key, op.value))
        while True:
            try:
                return await asyncio.shield(writing)
            except asyncio.CancelledError:
                if writing.cancelled():
                    raise
                self.cancelled = True
                if writing.done():
                    return writing.result()

    async def _save(self, op: Save | SaveHead) -> Any:
        store = self.store
        if isinstance(op, SaveHead):
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
    io = AsyncStoreIO(store)
    done = await execute_async(program, io)
    if io.cancelled:
        raise asyncio.CancelledError
    return done
