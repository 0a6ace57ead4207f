"""The runner's clock: wall time for timers, deadlines, leases' expiry checks and result
polling, and its pauses (retry backoff, result polling). Tests replace ``_now``,
``_sleep`` and ``_asleep`` with a fake clock; nothing else reads the time for these."""

from __future__ import annotations

import asyncio
import time

_sleep = time.sleep
_asleep = asyncio.sleep
_now = time.time


def now() -> float:
    """Seconds since the epoch, as timers, deadlines and result polling read them."""
    return _now()


def sleep(seconds: float) -> None:
    """A pause of the runner's (a retry's backoff, a poll): blocking."""
    _sleep(seconds)


async def asleep(seconds: float) -> None:
    """A pause of the runner's, awaited."""
    await _asleep(seconds)
