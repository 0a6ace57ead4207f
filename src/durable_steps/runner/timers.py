"""Durable timers: ``sleep(seconds)`` and ``sleep_until(when)`` inside a step, a pause
that holds no worker. A length is seconds or a ``timedelta``; a moment is a
timezone-aware ``datetime`` or seconds since the epoch.

The first time a step reaches a sleep, its wake time is recorded in the step's
journal (``journal``: sleeps are numbered like calls, so a step may sleep several
times, between calls) and the run is saved as ``waiting`` with ``wake_at``, its
lease released: ``run`` raises ``RunWaiting`` (``.wake_at``; ``.signal`` is None).
Running it before then raises ``RunWaiting`` again and runs nothing. After then,
``run``, ``recover`` or the worker resumes it: the step runs again, its recorded
calls return at once, and the sleep, finding its wake time past, returns. A sleep
whose wake time is already past when it is first reached returns at once.

Wake times are wall-clock seconds since the epoch, compared across machines:
keep clocks in sync (as for leases).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from ..seam.errors import Suspend
from .clock import now
from .journal import _journal
from .step import current_step


def sleep(seconds: float | timedelta) -> None:
    """Pause the run for ``seconds`` (a number, or a ``timedelta``) without holding a
    worker (see the top)."""
    _until(now() + seconds_of(seconds, "sleep()"))


def sleep_until(when: datetime | float) -> None:
    """Pause the run until ``when``: a timezone-aware ``datetime``, or seconds since
    the epoch (see the top)."""
    if isinstance(when, datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(
                f"sleep_until({when!r}): the datetime has no timezone, so its moment is "
                "ambiguous; pass an aware one, e.g. datetime.now(timezone.utc) + timedelta(...)"
            )
        wake = when.timestamp()
    else:
        wake = seconds_of(when, "sleep_until()")
    _until(wake)


def _until(wake: float) -> None:
    journal = _journal("sleep")
    key, record = journal.take("sleep", "sleep")
    if record is not None:
        wake = record["wake_at"]  # the first time decided it
    elif wake > now():
        attempt = current_step().attempt
        entry = {**key, "name": "sleep", "kind": "sleep", "wake_at": wake, "step_attempt": attempt}
        raise Suspend(None, wake, entry)
    if wake > now():
        raise Suspend(None, wake)  # resumed early (another worker's clock): not yet


def seconds_of(value: object, what: str) -> float:
    """A finite, non-negative length -- a number of seconds or a ``timedelta`` -- in
    seconds, or a clear error."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError(
                f"{what} takes a non-negative length (seconds or a timedelta), not {value!r}"
            )
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"{what} takes a finite number of seconds or a timedelta, not {value!r}")
    if value < 0:
        raise ValueError(f"{what} takes a non-negative number of seconds, not {value!r}")
    return float(value)
