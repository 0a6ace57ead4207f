"""``run`` and ``run_async``: carry out what the runner's program asks, and keep the lease.

A driver executes the program's requests (``_runner.Load``, ``Save``, ``Call``,
``Sleep``) against a store and resumes the program with each result, or throws
the exception in. Besides, while a step runs or a retry pauses, it renews the
lease every ``lease / 3`` seconds (the heartbeat): a thread for ``run``, a task
for ``run_async``. Heartbeat and saves take the same lock and always save on
top of the latest etag, so each is conditional on the other's last write and
on nobody else's. A heartbeat that finds another writer marks the lease lost:
the step's result is not saved (under ``run_async`` the step is cancelled).

Under ``run_async`` a save is never cut short by a cancellation: it is let
finish, then the cancellation goes on (the program releases the lease), so
when ``run_async`` returns or raises, what the store holds is known.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ._errors import ConflictError, DurableError, LeaseLostError
from ._lease import Heartbeat
from ._observe import log
from ._runner import Call, Load, Op, Save, Sleep, _Run
from ._state import freeze, mark_stored
from ._step import Step, _current
from ._store import AsyncStore, Checkpoint, Store

T = TypeVar("T")
_sleep = time.sleep  # tests replace these two with a fake clock
_asleep = asyncio.sleep


def run(
    run_id: str,
    steps: Sequence[Step],
    store: Store,
    *,
    lease: float = 60.0,
    owner: str | None = None,
) -> dict[str, Any]:
    """Run ``steps`` under ``run_id``, resuming after the last checkpointed step.

    ``lease``: seconds the run is held for this worker without a save or a
    heartbeat; ``owner``: a stable id for this worker (default: unique per call).
    """
    _sync_only(store)
    return drive(_Run(run_id, steps, lease=lease, owner=owner), store)


async def run_async(
    run_id: str,
    steps: Sequence[Step],
    store: AsyncStore,
    *,
    lease: float = 60.0,
    owner: str | None = None,
) -> dict[str, Any]:
    """``run`` for asyncio: steps may be ``async def`` or plain functions."""
    _async_only(store)
    return await drive_async(_Run(run_id, steps, lease=lease, owner=owner), store)


def _sync_only(store: object) -> None:
    if inspect.iscoroutinefunction(getattr(store, "load", None)):
        raise TypeError(f"{store!r} is an async store: use run_async() with it")


def _async_only(store: object) -> None:
    if not inspect.iscoroutinefunction(getattr(store, "load", None)):
        raise TypeError(
            f"{store!r} is a sync store: use run() with it, or its async twin "
            "(AsyncFileStore, AsyncCosmosStore, async_store_from_env())"
        )


def drive(r: _Run, store: Store) -> dict[str, Any]:
    driver = _Sync(r, store)
    r.obs.bind(store)
    try:
        with r.obs.run():
            return execute(r.program(), driver.do)
    finally:
        driver.close()


async def drive_async(r: _Run, store: AsyncStore) -> dict[str, Any]:
    driver = _Async(r, store)
    r.obs.bind(store)
    try:
        with r.obs.run():
            return await execute_async(r.program(), driver)
    finally:
        await driver.close()


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


def plain(store: Store) -> Callable[[Op], Any]:
    """``do`` for programs that only load, save and sleep (signals, recovery)."""

    def do(op: Op) -> Any:
        if isinstance(op, Load):
            return store.load(op.run_id)
        if isinstance(op, Save):
            return store.save(op.checkpoint)
        if isinstance(op, Sleep):
            return _sleep(op.seconds)
        raise TypeError(op)

    return do


class PlainAsync:
    """The async twin of ``plain``."""

    cancelled = False

    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def do(self, op: Op) -> Any:
        if isinstance(op, Load):
            return await self.store.load(op.run_id)
        if isinstance(op, Save):
            return await self.store.save(op.checkpoint)
        if isinstance(op, Sleep):
            return await _asleep(op.seconds)
        raise TypeError(op)


async def execute_async(program: Generator[Op, Any, T], driver: _Async | PlainAsync) -> T:
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = program.send(value) if error is None else program.throw(error)
        except StopIteration as stop:
            if driver.cancelled:
                raise asyncio.CancelledError from None  # a save outlasted a cancellation
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            if driver.cancelled and not isinstance(op, Load | Save):
                raise asyncio.CancelledError  # let the program release the lease, then stop
            value = await driver.do(op)
        except BaseException as exc:
            error = exc


def _not_async(op: Call, result: object) -> None:
    if inspect.isawaitable(result):
        getattr(result, "close", lambda: None)()  # no "never awaited" warning
        raise TypeError(
            f"run {op.context.run_id!r}: step {op.context.index} {op.step.name!r} is async; "
            "run it with run_async()"
        )


class _Sync:
    """Blocking I/O, and a heartbeat thread that renews the lease during steps."""

    def __init__(self, r: _Run, store: Store) -> None:
        self.r, self.store = r, store
        self.lock = threading.Lock()
        self.latest: Checkpoint | None = None
        self.lost: LeaseLostError | None = None
        self.closed = False
        self.heart = Heartbeat(self.renew, r.lease / 3)

    def do(self, op: Op) -> Any:
        if isinstance(op, Load):
            return self.store.load(op.run_id)
        if isinstance(op, Save):
            with self.r.obs.save(op.checkpoint):
                return self.save(op.checkpoint)
        self.heart.arm()
        try:
            if isinstance(op, Sleep):
                _sleep(op.seconds)
                result = None
            else:
                token = _current.set(op.context)
                try:
                    with self.r.obs.step(op.context.index, op.step.name, op.context.attempt):
                        result = op.step.fn(op.state)
                        _not_async(op, result)
                finally:
                    _current.reset(token)
        finally:
            self.heart.disarm()
        if self.lost is not None:
            raise self.lost
        return result

    def save(self, cp: Checkpoint) -> Checkpoint:
        with self.lock:
            if self.lost is not None:
                raise self.lost
            return self._save(cp)

    def _save(self, cp: Checkpoint) -> Checkpoint:
        for _ in range(_ABSORB):
            cp = _on_top(cp, self.latest)  # of our own heartbeat's write, and of signals
            try:
                saved = self.store.save(cp)
            except ConflictError:
                if self.latest is None or not self._absorbed(self.store.load(self.r.run_id)):
                    raise
                continue
            self.latest = _stored(cp, saved)
            return self.latest
        raise self.r.lost()

    def _absorbed(self, stored: Checkpoint | None) -> bool:
        absorbed = _absorb(self.latest, stored)  # type: ignore[arg-type]
        if absorbed is not None:
            self.latest = absorbed
        return absorbed is not None

    def renew(self) -> None:
        with self.lock:
            if self.closed or self.lost is not None or not _holds(self.latest, self.r):
                return
            try:
                renewal = _renewed(self.latest, self.r)  # type: ignore[arg-type]
                with self.r.obs.save(renewal, beat=True):
                    self._save(renewal)
            except ConflictError as exc:
                self.lost = self.r.lost()
                self.lost.__cause__ = exc
            except DurableError as exc:  # unreachable for now: the next beat tries again
                log.warning("run %r: heartbeat failed: %s", self.r.run_id, exc)

    def close(self) -> None:
        with self.lock:
            self.closed = True
        self.heart.stop()


class _Async:
    """Awaited I/O; a heartbeat task per step; saves that finish despite cancellation."""

    def __init__(self, r: _Run, store: AsyncStore) -> None:
        self.r, self.store = r, store
        self.lock = asyncio.Lock()
        self.latest: Checkpoint | None = None
        self.lost: LeaseLostError | None = None
        self.cancelled = False
        self.closed = False
        self.task: asyncio.Task[Any] | None = None

    async def do(self, op: Op) -> Any:
        if isinstance(op, Load):
            return await self.store.load(op.run_id)
        if isinstance(op, Save):
            with self.r.obs.save(op.checkpoint):
                async with self.lock:
                    if self.lost is not None:
                        raise self.lost
                    return await self._save(op.checkpoint)
        self.task = asyncio.current_task()
        stop = asyncio.Event()
        beat = asyncio.create_task(self._beat(stop))
        try:
            if isinstance(op, Sleep):
                await _asleep(op.seconds)
                result = None
            else:
                token = _current.set(op.context)
                try:
                    with self.r.obs.step(op.context.index, op.step.name, op.context.attempt):
                        result = op.step.fn(op.state)
                        if inspect.isawaitable(result):
                            result = await result
                finally:
                    _current.reset(token)
        except asyncio.CancelledError:
            if self.lost is None:
                raise
            self.task.uncancel()  # type: ignore[union-attr] # we cancelled the step ourselves
            raise self.lost from None
        finally:
            stop.set()
            await beat
        if self.lost is not None:
            raise self.lost
        return result

    async def _save(self, cp: Checkpoint) -> Checkpoint:
        for _ in range(_ABSORB):
            cp = _on_top(cp, self.latest)
            try:
                return await self._save_once(cp)
            except ConflictError:
                if self.latest is None:
                    raise
                absorbed = _absorb(self.latest, await self.store.load(self.r.run_id))
                if absorbed is None:
                    raise
                self.latest = absorbed
        raise self.r.lost()

    async def _save_once(self, cp: Checkpoint) -> Checkpoint:
        saving = asyncio.ensure_future(self.store.save(cp))
        try:
            saved = await asyncio.shield(saving)
        except asyncio.CancelledError:
            if saving.done() and saving.cancelled():
                raise
            # Cancelled mid-save: let the write finish so its outcome is known, then
            # carry the cancellation on (see execute_async).
            self.cancelled = True
            while not saving.done():
                try:
                    await asyncio.shield(saving)
                except asyncio.CancelledError:
                    continue
            saved = saving.result()
        self.latest = _stored(cp, saved)
        return self.latest

    async def _beat(self, stop: asyncio.Event) -> None:
        interval = self.r.lease / 3
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except TimeoutError:
                pass
            else:
                return
            async with self.lock:
                if self.closed or self.lost is not None or not _holds(self.latest, self.r):
                    return
                try:
                    renewal = _renewed(self.latest, self.r)  # type: ignore[arg-type]
                    with self.r.obs.save(renewal, beat=True):
                        await self._save(renewal)
                except ConflictError as exc:
                    self.lost = self.r.lost()
                    self.lost.__cause__ = exc
                    if self.task is not None:
                        self.task.cancel()
                    return
                except DurableError as exc:
                    log.warning("run %r: heartbeat failed: %s", self.r.run_id, exc)

    async def close(self) -> None:
        self.closed = True


_ABSORB = 10
"""Signal deliveries absorbed in a row by one save before it gives up."""


def _on_top(cp: Checkpoint, latest: Checkpoint | None) -> Checkpoint:
    """``cp`` to be saved over ``latest``, the last write this run knows of: its etag,
    and every signal delivered meanwhile (signals are only ever added)."""
    if latest is None:
        return cp
    if latest.signals.keys() - cp.signals.keys():
        merged = {**latest.signals, **cp.signals}
        cp = replace(cp, signals=freeze(merged, "", cp.run_id, 0, "signal payload"))
    return cp if cp.etag == latest.etag else replace(cp, etag=latest.etag)


def _absorb(latest: Checkpoint, stored: Checkpoint | None) -> Checkpoint | None:
    """When the only change since ``latest`` is delivered signals (send_signal saved
    while we held the lease), ``latest`` as it now is in the store; else None: the
    lease was lost."""
    same = ("owner", "lease_expires", "step", "steps", "attempt", "status")
    if stored is None or any(getattr(stored, f) != getattr(latest, f) for f in same):
        return None
    if latest.signals.keys() - stored.signals.keys():
        return None
    mark_stored(latest.state, stored.etag)  # send_signal does not touch the state
    signals = freeze(dict(stored.signals), "", stored.run_id, 0, "signal payload")
    return replace(latest, etag=stored.etag, signals=signals)


def _stored(sent: Checkpoint, saved: Checkpoint) -> Checkpoint:
    """What the store now holds: ``saved``, sharing the frozen state that was sent."""
    mark_stored(sent.state, saved.etag)
    if saved.state is not sent.state:
        saved = replace(saved, state=sent.state)
    return saved


def _holds(cp: Checkpoint | None, r: _Run) -> bool:
    return cp is not None and cp.owner == r.owner and cp.lease_expires is not None


def _renewed(cp: Checkpoint, r: _Run) -> Checkpoint:
    return replace(cp, lease_expires=time.time() + r.lease, updated_at=None)
