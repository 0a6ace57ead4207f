"""``run`` and ``run_async``: carry out what the runner's program asks, and keep the lease.

A driver executes the program's requests (``requests``: ``Load``, ``Save``, ``Call``,
``Sleep``) against a store and resumes the program with each result, or throws
the exception in. While a step runs, its calls (``journal``) save through the same
driver. Saves go through the run's ``LeaseKeeper`` (``lease_keeper``), which saves
on top of the run's latest write. While a step runs or a retry pauses, the
driver's heartbeat renews the lease every ``lease / 3`` seconds -- a thread for
``run``, a task for ``run_async`` -- taking turns with the saves under one lock.
A heartbeat that finds another owner marks the lease lost: the step's result is
not saved, and under ``run_async`` the step is cancelled.

Under ``run_async`` a save is never cut short by a cancellation: it is let
finish, then the cancellation goes on (the program releases the lease), so
when ``run_async`` returns or raises, what the store holds is known.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..seam.store import AsyncStore, Store
from . import tasks
from .claim import MAX_ATTEMPTS
from .heartbeat import Heartbeat
from .journal import Journal
from .lease_keeper import LeaseKeeper
from .requests import Call, Load, Request, Save, execute, execute_async
from .run import RunProgram
from .step import Step, running
from .store_io import AsyncStoreIO, blocking_io


def run(
    run_id: str,
    steps: Sequence[Step],
    store: Store,
    *,
    input: Mapping[str, Any] | None = None,
    lease: float = 60.0,
    owner: str | None = None,
    max_attempts: int | None = MAX_ATTEMPTS,
) -> dict[str, Any]:
    """Run ``steps`` under ``run_id``, resuming after the last checkpointed step.

    ``input``: the initial state of a fresh run (a JSON object; ignored on resume);
    ``lease``: seconds the run is held for this worker without a save or a
    heartbeat; ``owner``: a stable id for this worker (default: unique per call);
    ``max_attempts``: starts of a step, in one round, after which the run is failed
    instead (``TooManyAttemptsError``; ``Workflow.max_attempts`` says more).
    """
    _sync_only(store)
    program = RunProgram(
        run_id, steps, lease=lease, owner=owner, input=input, max_attempts=max_attempts
    )
    return drive(program, store)


async def run_async(
    run_id: str,
    steps: Sequence[Step],
    store: AsyncStore,
    *,
    input: Mapping[str, Any] | None = None,
    lease: float = 60.0,
    owner: str | None = None,
    max_attempts: int | None = MAX_ATTEMPTS,
) -> dict[str, Any]:
    """``run`` for asyncio: steps may be ``async def`` or plain functions."""
    _async_only(store)
    program = RunProgram(
        run_id, steps, lease=lease, owner=owner, input=input, max_attempts=max_attempts
    )
    return await drive_async(program, store)


def _sync_only(store: object) -> None:
    if isinstance(store, AsyncStore):
        raise TypeError(f"{store!r} is an async store: use run_async() with it")
    if not isinstance(store, Store):
        raise TypeError(
            f"{store!r} is not a store: give run() a Store (FileStore, CosmosStore, "
            "MemoryStore, store_from_env()), or subclass durable_steps.Store"
        )


def _async_only(store: object) -> None:
    if not isinstance(store, AsyncStore):
        raise TypeError(
            f"{store!r} is a sync store: use run() with it, or its async twin "
            "(AsyncFileStore, AsyncCosmosStore, async_store_from_env())"
        )


def drive(run: RunProgram, store: Store) -> dict[str, Any]:
    driver = SyncDriver(run, store)
    run.obs.bind(store)
    try:
        with run.obs.run():
            return execute(run.program(), driver.do)
    finally:
        driver.close()


async def drive_async(run: RunProgram, store: AsyncStore) -> dict[str, Any]:
    driver = AsyncDriver(run, store)
    run.obs.bind(store)
    try:
        with run.obs.run():
            state = await execute_async(run.program(), driver.do)
            if driver.io.cancelled:
                raise asyncio.CancelledError  # held back while a save finished
            return state
    finally:
        driver.close()


def _journal_of(op: Call) -> Journal:
    journal = op.context.journal
    assert isinstance(journal, Journal), "the runner gives every step attempt its journal"
    return journal


def _what(op: Call) -> tuple[int, str, int]:
    return op.context.index, op.step.name, op.context.attempt


def _not_async(op: Call, result: object) -> None:
    if result is None or type(result) is dict:  # the common cases, before a slow ABC check
        return
    if inspect.isawaitable(result):
        getattr(result, "close", lambda: None)()  # no "never awaited" warning
        raise TypeError(
            f"run {op.context.run_id!r}: step {op.context.index} {op.step.name!r} is async; "
            "run it with run_async()"
        )


def call_step(driver: Any, op: Call, around: AbstractContextManager[Any]) -> Any:
    """Run a plain step's function in this thread, its journal driven by ``driver``
    (``around``: the step's span; the replayer's drivers run steps this way too)."""
    journal = _journal_of(op)
    journal.driver = driver  # the step's calls save through this driver
    journal.scopes.own("")  # the step's scope is this thread's
    try:
        with running(op.context), around:
            result = op.step.fn(op.state)
    finally:
        journal.closed = True
    _not_async(op, result)
    return result


async def call_step_async(driver: Any, op: Call, around: AbstractContextManager[Any]) -> Any:
    """``call_step`` for a step run in this task: its function plain or async."""
    journal = _journal_of(op)
    journal.driver = driver  # the step's calls save through this driver
    journal.scopes.own("")  # the step's scope is this task's
    tasks.install(asyncio.get_running_loop())  # and tasks it creates get theirs
    try:
        with running(op.context), around:
            result = op.step.fn(op.state)
            if inspect.isawaitable(result):
                result = await result
    finally:
        journal.closed = True
    return result


# -- the two drivers --------------------------------------------------------------------


class SyncDriver:
    """Blocking I/O, and a heartbeat thread that renews the lease during steps."""

    is_async = False
    cancelled = False  # (no cancellation to hold back: a blocking save is not cut short)

    def __init__(self, run: RunProgram, store: Store) -> None:
        self.run, self.keep, self.io = run, LeaseKeeper(run), blocking_io(store)
        self.lock = threading.Lock()
        self.heart = Heartbeat(self.beat, run.lease / 3)

    def do(self, op: Request) -> Any:
        if isinstance(op, Load):
            return self.io(op)
        if isinstance(op, Save):
            with self.run.obs.save(op.checkpoint), self.lock:
                if op.guard is not None:
                    op.guard()
                return execute(self.keep.save(op.checkpoint), self.io)
        self.heart.arm()
        try:
            result = self.call(op) if isinstance(op, Call) else self.io(op)
        finally:
            self.heart.disarm()
        if self.keep.lost is not None:
            raise self.keep.lost
        return result

    def call(self, op: Call) -> Any:
        return call_step(self, op, self.run.obs.step(*_what(op)))

    def beat(self) -> None:
        with self.lock:
            execute(self.keep.renew(), self.io)

    def close(self) -> None:
        with self.lock:  # a beat in flight finishes first; none starts after
            self.keep.closed = True
        self.heart.disarm()


class AsyncDriver:
    """Awaited I/O, a heartbeat task per step, and saves that finish despite
    cancellation."""

    is_async = True

    @property
    def cancelled(self) -> bool:
        """A cancellation came during a save and was held back until it ended."""
        return self.io.cancelled

    def __init__(self, run: RunProgram, store: AsyncStore) -> None:
        self.run, self.keep, self.io = run, LeaseKeeper(run), AsyncStoreIO(store)
        self.lock = asyncio.Lock()
        self.stepping: asyncio.Task[Any] | None = None
        """The task running a step, while it runs: the one a lost lease cancels."""
        self.stopped_step = False

    async def do(self, op: Request) -> Any:
        if isinstance(op, Load):
            return await self.io(op)
        if isinstance(op, Save):
            with self.run.obs.save(op.checkpoint):
                async with self.lock:
                    if op.guard is not None:
                        op.guard()
                    return await execute_async(self.keep.save(op.checkpoint), self.io)
        if self.io.cancelled:
            raise asyncio.CancelledError  # held back during a save: raised before the step
        stop = asyncio.Event()
        beat = tasks.untracked(self.beat(stop))
        self.stepping = asyncio.current_task()
        try:
            result = await (self.call(op) if isinstance(op, Call) else self.io(op))
        except asyncio.CancelledError:
            if not self.stopped_step:
                raise
            result = None  # the lease is lost: raised below
        finally:
            self.stepping = None
            if self.stopped_step:
                asyncio.current_task().uncancel()  # type: ignore[union-attr] # ours, not the caller's
            stop.set()
            await beat
        if self.keep.lost is not None:
            raise self.keep.lost
        return result

    async def call(self, op: Call) -> Any:
        return await call_step_async(self, op, self.run.obs.step(*_what(op)))

    async def beat(self, stop: asyncio.Event) -> None:
        while not await _set_within(stop, self.run.lease / 3):
            async with self.lock:
                await execute_async(self.keep.renew(), self.io)
            if self.keep.lost is not None:
                if self.stepping is not None:  # still in the step: stop it
                    self.stopped_step = True
                    self.stepping.cancel()
                return

    def close(self) -> None:
        self.keep.closed = True


async def _set_within(event: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True
