"""Retries: a step that raises is run again in place, after a growing pause.

``Step(name, fn, retry=Retry(attempts=3, backoff=1.0, max_backoff=60.0))``: when
``fn`` raises one of ``on``, the runner saves the next attempt number (so a
crash between attempts counts too), waits ``delay(n)`` while its heartbeat keeps
the lease, and calls ``fn`` again. When the attempts are used up -- or the
exception is not in ``on`` -- the run is saved as ``failed`` with the error's
type and message, and the exception propagates; ``recover`` leaves failed runs
alone, and an explicit ``run`` starts a new round of attempts.
``KeyboardInterrupt``, ``SystemExit`` and ``asyncio.CancelledError`` are never
retried, whatever ``on`` says; nor are the failures no retry can cure (``INCURABLE``:
a result that is not JSON or over the size limit, a step that no longer matches its
journal).

The pause before attempt n + 1 is ``backoff * 2**(n - 1)``, capped at
``max_backoff``, times a random factor in [0.5, 1] ("equal jitter"), so that
workers failing together do not retry together. No library is used for this:
the loop itself must be durable (attempts live in the checkpoint, the lease is
renewed while waiting), which is not what tenacity or stamina model, and the
arithmetic is the one line below.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from ..seam.errors import InvalidStateError, StateTooLargeError, StepMismatchError

NEVER_RETRIED = (KeyboardInterrupt, SystemExit, asyncio.CancelledError, GeneratorExit)
INCURABLE = (InvalidStateError, StateTooLargeError, StepMismatchError)
"""Failures that running the same code on the same state again cannot cure -- a result
that is not JSON, or over the size limit, a journal or step list that does not match:
never retried, and a save refused with one fails the run at once (``run``)."""


@dataclass(frozen=True)
class Retry:
    """How often and how patiently a step is retried (``attempts`` counts the first)."""

    attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 60.0
    on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise TypeError(f"Retry(attempts=...) must be an int, not {self.attempts!r}")
        if self.attempts < 1:
            raise ValueError(f"Retry(attempts=...) counts the first try: >= 1, not {self.attempts}")
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"Retry({name}=...) must be a number of seconds, not {value!r}")
        if not 0 <= self.backoff <= self.max_backoff < float("inf"):
            raise ValueError(
                f"Retry needs 0 <= backoff <= max_backoff < inf, not {self.backoff!r} and "
                f"{self.max_backoff!r}"
            )
        on = tuple(self.on) if isinstance(self.on, list | tuple) else (self.on,)
        if not on or not all(isinstance(t, type) and issubclass(t, BaseException) for t in on):
            raise TypeError(f"Retry(on=...) must be exception classes, not {self.on!r}")
        object.__setattr__(self, "on", on)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after attempt ``attempt`` (1-based) failed."""
        return float(min(self.max_backoff, self.backoff * 2 ** (attempt - 1))) * random.uniform(
            0.5, 1
        )

    def retries(self, exc: BaseException, used: int) -> bool:
        """Whether attempt number ``used`` of this round, failed with ``exc``, is retried."""
        if isinstance(exc, NEVER_RETRIED + INCURABLE):
            return False
        return used < self.attempts and isinstance(exc, self.on)


ONCE = Retry(attempts=1)
"""A step without ``retry=``: one attempt, then the run is failed."""
