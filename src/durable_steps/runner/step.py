"""Steps: what a step is, and what a running step can know about itself.

``Step(name, fn, retry=None)``: ``fn`` gets the run's state (read-only) and returns
a mapping of updates, or None. Inside ``fn``, ``current_step()`` says which run,
step and attempt this is, with an ``idempotency_key`` that is the same on every
attempt of that step of that run. ``Suspend`` (in ``seam.errors``) is how
``wait_for_signal`` leaves a step (``signals``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class StepContext:
    """What a running step can know about itself (see ``current_step()``)."""

    run_id: str
    index: int
    name: str
    attempt: int
    """1 on the first start of this step, 2 after one crash, failure or retry, ..."""
    signals: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

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
