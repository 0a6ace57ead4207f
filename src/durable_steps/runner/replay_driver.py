"""The replayer's driver: what runs a step during a replay, with no way to write
(``replay`` has the design).

``ReplayJournal`` is the engine's ``Journal``, which also notes where each task's last
operation was taken and where the step departed from its record, for the report.
``SyncReplay`` and ``AsyncReplay`` are the drivers a journal needs
(``journal.StepDriver``): they carry out reads, refuse writes, and answer every
operation that would do new work with a run "no longer ours" (``keep.lost``,
``NotRun``), which is how the engine stops a step whose lease was lost -- so the step
ends at its first unrecorded operation, and nothing runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Any

from ..seam.checkpoint import Checkpoint
from ..seam.errors import StepInterrupted, StepMismatchError
from ..seam.state import call_key
from .drivers import call_step, call_step_async
from .identity import label
from .journal import Journal
from .requests import AppendItem, Call, PutItem, Request, Save, SaveHead
from .run import RunProgram
from .step import Step, _current


class NotRun(Exception):
    """The replay's answer to an operation that would do new work (see the top)."""


def _op(record: Mapping[str, Any]) -> str:
    return f"{record.get('kind', 'call')} {record['name']!r}"


class Replaying(RunProgram):
    """The run as its journal knows it, with no way to save a record."""

    def record(
        self, record: Mapping[str, Any], still: Callable[[], object]
    ) -> Generator[Request, Any, Checkpoint]:
        raise NotRun(f"run {self.run_id!r}: a replay saves nothing")
        yield  # (a program, as the journal expects)


class ReplayJournal(Journal):
    """The engine's journal, noting where each scope's last operation was taken and
    where the step diverged, for the report."""

    __slots__ = ("last", "mismatch")

    def __init__(self, run: Replaying, step: Step) -> None:
        super().__init__(run, run.cp.calls, step.name, lenient=step.replay == "lenient")
        self.last: dict[str, str] = {}
        self.mismatch: tuple[str, str, str] | None = None

    def take(self, kind: str, name: str, **how: Any) -> Any:
        scope = _current.get().task  # type: ignore[union-attr] # inside a step
        try:
            where, record = super().take(kind, name, **how)
        except BaseException as exc:
            if not isinstance(exc, StepInterrupted | StepMismatchError):
                raise
            if how.get("key") is not None:
                place: dict[str, Any] = {"key": how["key"], "i": 0}
            else:
                i = self.scopes.made(scope) - 1
                place = {"i": i, "task": scope} if scope else {"i": i}
            there = next((r for r in self.records if call_key(r) == call_key(place)), None)
            if there is not None and (there.get("kind", "call"), there["name"]) != (kind, name):
                self.mismatch = (label(place, there["name"]), _op(there), f"{kind} {name!r}")
            raise
        self.last[scope] = label(where, name, kind)
        return where, record


# -- the drivers ----------------------------------------------------------------------


_WRITES = (Save, SaveHead, AppendItem, PutItem)


class _Driver:
    """What a journal needs of the driver running its step (``journal.StepDriver``),
    with no way to write: every operation that would do new work finds the run lost."""

    cancelled = False

    def __init__(self) -> None:
        self.journal: ReplayJournal | None = None
        self.stopped: str | None = None

    @property
    def keep(self) -> _Driver:
        return self

    @property
    def lost(self) -> BaseException:
        if self.stopped is None and self.journal is not None:
            ctx = _current.get()
            self.stopped = self.journal.last.get("" if ctx is None else ctx.task, "?")
        return NotRun(f"a replay runs nothing: stopped at {self.stopped}")

    def attach(self, op: Call) -> ReplayJournal:
        journal = op.context.journal
        assert isinstance(journal, ReplayJournal), "a replay's step has a replay journal"
        self.journal, self.stopped = journal, None
        return journal


def _refuse_writes(op: Request) -> None:
    if isinstance(op, _WRITES):
        raise StepInterrupted(NotRun(f"a replay writes nothing ({type(op).__name__})"))


class SyncReplay(_Driver):
    """The replay driver over a blocking store's reads (``store_io.blocking_io``)."""

    is_async = False

    def __init__(self, reads: Callable[[Request], Any]) -> None:
        super().__init__()
        self._reads = reads

    def io(self, op: Request) -> Any:
        _refuse_writes(op)
        return self._reads(op)

    def do(self, op: Request) -> Any:
        if not isinstance(op, Call):
            return self.io(op)
        if is_coroutine_step(op.step.fn):  # on an event loop of its own, as run_async would

            async def reads(op: Request) -> Any:
                return self.io(op)

            return asyncio.run(AsyncReplay(reads).call(op))
        return self.call(op)

    def call(self, op: Call) -> Any:
        self.attach(op)
        return call_step(self, op, contextlib.nullcontext())


class AsyncReplay(_Driver):
    """The replay driver over an async store's reads (``store_io.AsyncStoreIO``)."""

    is_async = True

    def __init__(self, reads: Callable[[Request], Awaitable[Any]]) -> None:
        super().__init__()
        self._reads = reads

    async def io(self, op: Request) -> Any:
        _refuse_writes(op)
        return await self._reads(op)

    async def do(self, op: Request) -> Any:
        if not isinstance(op, Call):
            return await self.io(op)
        if not is_coroutine_step(op.step.fn):  # a plain step: in a thread, reads sent here
            loop = asyncio.get_running_loop()

            def reads(op: Request) -> Any:
                return asyncio.run_coroutine_threadsafe(self.io(op), loop).result()

            return await asyncio.to_thread(SyncReplay(reads).call, op)
        return await self.call(op)

    async def call(self, op: Call) -> Any:
        self.attach(op)
        return await call_step_async(self, op, contextlib.nullcontext())


def is_coroutine_step(fn: object) -> bool:
    """Whether a step's function is a coroutine function (or a partial of one, or an
    object whose ``__call__`` is one)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 # an object whose __call__ is async
    )
