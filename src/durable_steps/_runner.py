"""The runner: load the checkpoint, skip what is done, run the rest, save after each step.

``run`` and ``run_async`` are the same loop written twice in six lines each; every
rule of the semantics (validation, resume, mismatch, attempts, annotations, what a
checkpoint holds) lives once, in ``_Run``.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ._errors import StepMismatchError
from ._store import AsyncStore, Checkpoint, Store, check_run_id

StepFn = Callable[
    [Mapping[str, Any]], "Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None"
]


@dataclass(frozen=True)
class Step:
    """A named unit of work: ``fn(state)`` returns a mapping of updates, or ``None``."""

    name: str
    fn: StepFn


@dataclass(frozen=True)
class StepContext:
    """What a running step can know about itself (see ``current_step()``)."""

    run_id: str
    index: int
    name: str
    attempt: int
    """1 on the first start of this step, 2 after one crash or failure, ..."""

    @property
    def idempotency_key(self) -> str:
        """The same on every retry of this step of this run: pass it to the services you call."""
        raw = f"{self.run_id}\x00{self.index}\x00{self.name}".encode()
        return hashlib.sha256(raw).hexdigest()[:32]


_current: ContextVar[StepContext | None] = ContextVar("durable_steps_current", default=None)


def current_step() -> StepContext:
    """The step running in this context (thread or asyncio task)."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_step() is only available inside a step run by run()")
    return ctx


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    # State is plain JSON (the store checked it), so a JSON round trip is a
    # complete and fast deep copy: nothing a step holds aliases our state.
    return json.loads(json.dumps(state))  # type: ignore[no-any-return]


class _Run:
    """The semantics of one call to run()/run_async(), free of any I/O."""

    def __init__(self, run_id: str, steps: Sequence[Step]) -> None:
        self.run_id = check_run_id(run_id)
        self.steps = list(steps)
        for s in self.steps:
            if not isinstance(s, Step) or not isinstance(s.name, str) or not s.name:
                raise TypeError(f"steps must be Step(name, fn) with a non-empty str name: {s!r}")
        names = [s.name for s in self.steps]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"run {run_id!r}: duplicate step names {dupes}; names must be unique")
        self.cp = Checkpoint(run_id=self.run_id, step=-1, state={})

    def resume(self, loaded: Checkpoint | None) -> Checkpoint | None:
        """Adopt the loaded checkpoint; returns the one to save before any step runs.

        That first save claims the run (a second worker gets ConflictError before
        repeating a side effect) and counts the attempt, so current_step().attempt
        stays right across crashes. It costs one save per call, not per step.
        """
        if loaded is None:
            return replace(self.cp, done=not self.steps)  # a fresh start: claim the run
        given = tuple(s.name for s in self.steps[: len(loaded.steps)])
        if given != loaded.steps:
            raise StepMismatchError(
                f"run {self.run_id!r} completed steps {list(loaded.steps)}, but the step list "
                f"now starts {list(given)}; nothing was run. Keep completed steps as they were "
                "(append new ones only), or use a new run id",
                run_id=self.run_id,
            )
        self.cp = loaded
        if self.finished:
            return None
        return replace(loaded, attempt=loaded.attempt + 1, done=False, updated_at=None)

    @property
    def finished(self) -> bool:
        return self.cp.step + 1 >= len(self.steps)

    def pending(self) -> Iterator[tuple[int, Step]]:
        while not self.finished:
            i = self.cp.step + 1
            yield i, self.steps[i]

    @contextlib.contextmanager
    def running(self, i: int, step: Step) -> Iterator[Mapping[str, Any]]:
        token = _current.set(StepContext(self.run_id, i, step.name, self.cp.attempt))
        try:
            yield MappingProxyType(_copy(self.cp.state))
        except BaseException as exc:
            kept = f"steps 0..{i - 1} stay checkpointed" if i else "no step had completed"
            exc.add_note(
                f"durable-steps: run {self.run_id!r} failed in step {i} {step.name!r}; "
                f"{kept}; running it again resumes at this step"
            )
            raise
        finally:
            _current.reset(token)

    def completed(self, i: int, step: Step, updates: object) -> Checkpoint:
        if updates is None:
            updates = {}
        if inspect.isawaitable(updates):
            getattr(updates, "close", lambda: None)()  # no "never awaited" warning
            raise TypeError(
                f"run {self.run_id!r}: step {i} {step.name!r} is async; run it with run_async()"
            )
        if not isinstance(updates, Mapping):
            raise TypeError(
                f"run {self.run_id!r}: step {i} {step.name!r} returned "
                f"{type(updates).__name__}; return a mapping of updates or None"
            )
        return replace(
            self.cp,
            step=i,
            steps=(*self.cp.steps, step.name),
            state={**self.cp.state, **updates},
            done=i + 1 == len(self.steps),
            attempt=1,
            updated_at=None,
        )

    def saved(self, cp: Checkpoint) -> None:
        self.cp = cp

    def result(self) -> dict[str, Any]:
        return _copy(self.cp.state)


def run(run_id: str, steps: Sequence[Step], store: Store) -> dict[str, Any]:
    """Run ``steps`` under ``run_id``, resuming after the last checkpointed step."""
    r = _Run(run_id, steps)
    if inspect.iscoroutinefunction(store.load):
        raise TypeError(f"{store!r} is an async store: use run_async() with it")
    if restart := r.resume(store.load(r.run_id)):
        r.saved(store.save(restart))
    for i, step in r.pending():
        with r.running(i, step) as state:
            updates = step.fn(state)
        r.saved(store.save(r.completed(i, step, updates)))
    return r.result()


async def run_async(run_id: str, steps: Sequence[Step], store: AsyncStore) -> dict[str, Any]:
    """``run`` for asyncio: steps may be ``async def`` or plain functions."""
    r = _Run(run_id, steps)
    if not inspect.iscoroutinefunction(store.load):
        raise TypeError(
            f"{store!r} is a sync store: use run() with it, or its async twin "
            "(AsyncFileStore, AsyncCosmosStore, async_store_from_env())"
        )
    if restart := r.resume(await store.load(r.run_id)):
        r.saved(await store.save(restart))
    for i, step in r.pending():
        with r.running(i, step) as state:
            updates = step.fn(state)
            if inspect.isawaitable(updates):
                updates = await updates
        r.saved(await store.save(r.completed(i, step, updates)))
    return r.result()
