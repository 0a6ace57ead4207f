"""Steps: what a step is, and what a running step can know about itself.

``Step(name, fn, retry=None)``: ``fn`` gets the run's state (read-only) and returns
a mapping of updates, or None. Inside ``fn``, ``current_step()`` says which run,
step and attempt this is, with an ``idempotency_key`` that is the same on every
attempt of that step of that run -- and inside a ``call``'s function, the call's
own key. ``Suspend`` (in ``seam.errors``) is how ``wait_for_signal`` and ``sleep``
leave a step; the step's ``journal`` (``journal``) numbers its calls, sleeps and
waits.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .retry import Retry

StepFn = Callable[
    [Mapping[str, Any]], "Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None"
]


@dataclass(frozen=True)
class Step:
    """A named unit of work: ``fn(state)`` returns a mapping of updates, or ``None``."""

    name: str
    fn: StepFn
    retry: Retry | None = field(default=None, kw_only=True)
    """Retry this step in place when it raises (see ``Retry``); None: fail at once."""
    returns: Any = field(default=None, kw_only=True)
    """What the step returns, validated before its fields become the updates (a
    Pydantic model class; ``runner.typed``). None: a mapping, or a model's fields."""
    replay: Literal["strict", "lenient"] = field(default="strict", kw_only=True)
    """How a replay that departs from the step's record is met (``journal``):
    ``"strict"`` fails the run with ``NondeterminismError``, its record kept;
    ``"lenient"``, for a step nondeterministic by design, runs a changed call anew and
    drops records not asked for, with an INFO log -- what they returned is lost, and a
    changed call may run twice."""

    def __post_init__(self) -> None:
        if self.replay not in ("strict", "lenient"):
            raise ValueError(
                f"Step({self.name!r}, ..., replay={self.replay!r}): replay is 'strict' (a "
                "departure from the record fails the run) or 'lenient' (it is dropped)"
            )


class TaskScopes(Protocol):
    """What a step's context offers of the numbering of its durable operations by task
    (``tasks.Scopes``): a scope's owner, the scope of a new task."""

    def own(self, scope: str) -> None: ...

    def adopt(self, scope: str) -> None: ...

    def lend(self, scope: str, task: asyncio.Task[Any]) -> None: ...

    def child(self, parent: StepContext) -> StepContext: ...


class StepJournal(Protocol):
    """What a step's context offers of its attempt's journal (``journal.Journal``): the
    next durable operation of the caller's scope, and the scopes."""

    @property
    def scopes(self) -> TaskScopes: ...

    def take(
        self, kind: str, name: str, *, foreign: bool = False, key: str | None = None
    ) -> tuple[dict[str, Any], Mapping[str, Any] | None]: ...


@dataclass(frozen=True)
class StepContext:
    """What a running step can know about itself (see ``current_step()``)."""

    run_id: str
    index: int
    name: str
    attempt: int
    """1 on the first start of this step, 2 after one crash, failure or retry, ...
    Inside a call's function: how many times that call has been started -- its
    retries, and the step's attempts that reached it (every attempt since the one
    that recorded the step's durable operation before it: 2 after the step was
    killed once in the call; an attempt that died before reaching it counts too)."""
    signals: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    first_attempt: int = field(default=1, repr=False, compare=False)
    """The step attempt at which its current round of retries began."""
    call: tuple[int, str] | None = None
    """Inside a call's function: its index and name in the step's journal (the index
    within the task that made it, ``call_scope``)."""
    journal: StepJournal | None = field(default=None, repr=False, compare=False)
    """The step attempt's ``journal.Journal`` (None outside a run)."""
    task: str = ""
    """The scope in which durable operations made here are numbered (``tasks``): ``""``
    for the step's own task or thread, ``"1"`` for the second task it created, ``"1.0"``
    for that one's first, ``"c3"`` inside the function of its call 3, ..."""
    call_scope: str = field(default="", repr=False, compare=False)
    """Inside a call's function: the scope of the task that made the call."""

    @property
    def idempotency_key(self) -> str:
        """The same on every retry of this step of this run (inside a call's function:
        of that call, and different for every call): pass it to the services you call."""
        raw = f"{self.run_id}\x00{self.index}\x00{self.name}"
        if self.call is not None:
            raw += f"\x00{self.call[0]}\x00{self.call[1]}"
            if self.call_scope:  # a call of a task the step created (root keys as before)
                raw += f"\x00{self.call_scope}"
        return hashlib.sha256(raw.encode()).hexdigest()[:32]


_current: ContextVar[StepContext | None] = ContextVar("durable_steps_current", default=None)
_running = [0]
_running_lock = threading.Lock()


class running:  # (lower case: used as a function, ``with running(ctx):``)
    """``ctx`` is the current step here while the step's function runs (counted in
    ``running_steps``). A class, not a ``contextmanager`` generator: it is entered once
    per step, and the generator's machinery cost more than its work (~3 µs a step)."""

    __slots__ = ("_ctx", "_token")

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx

    def __enter__(self) -> None:
        self._token = _current.set(self._ctx)
        with _running_lock:
            _running[0] += 1

    def __exit__(self, *exc: object) -> None:
        with _running_lock:
            _running[0] -= 1
        _current.reset(self._token)


def running_steps() -> int:
    """How many steps are running in this process now, in any thread or task. With
    ``current_step()`` it tells an integration "outside any step" (nothing to make
    durable) from "in a thread a step started, without its context" (which would make
    calls that no journal records: refuse)."""
    return _running[0]


def current_step() -> StepContext:
    """The step running in this context (thread or asyncio task)."""
    ctx = _current.get()
    if ctx is None:
        where = (
            " (a step is running in this process: in a thread it started, its context is not "
            "there; make durable calls in the step's own thread or task)"
            if _running[0]
            else ""
        )
        raise RuntimeError(
            f"current_step() is only available inside a step run by run() or run_async(){where}"
        )
    return ctx
