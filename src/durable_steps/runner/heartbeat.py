"""``Heartbeat``: renews a run's lease from a thread while a step runs under ``run``
(under ``run_async`` a task of the driver does it: ``drivers``). What a beat saves is
the lease keeper's (``lease_keeper``).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable


class Heartbeat:
    """Calls ``beat`` every ``interval`` seconds while armed.

    One scheduler thread per process watches every armed heartbeat and starts a
    short-lived thread for each beat that is due: arming and disarming cost a lock
    (not a thread per run), and a slow beat (an unreachable store) delays no other
    run's heartbeat. Arming wakes the scheduler only when the new beat is due before
    the time it already sleeps until: a run arms and disarms once per step, and
    waking a thread each time would cost a thread switch per step (the scheduler
    checks what is due whenever it wakes, so a later beat is never missed).
    """

    _cond = threading.Condition()
    _armed: dict[Heartbeat, float] = {}  # noqa: RUF012 - shared on purpose: one scheduler
    _thread: threading.Thread | None = None
    _wakes = math.inf
    """When the scheduler wakes next by itself (monotonic; inf: only when notified)."""

    def __init__(self, beat: Callable[[], None], interval: float) -> None:
        self.beat, self.interval = beat, interval

    def arm(self) -> None:
        cls = Heartbeat
        with cls._cond:
            due = cls._armed[self] = time.monotonic() + self.interval
            if cls._thread is None:
                cls._thread = threading.Thread(
                    target=cls._schedule, name="durable-steps-heartbeat", daemon=True
                )
                cls._thread.start()
            if due < cls._wakes:
                cls._wakes = due  # it is about to wait for this one (or an earlier one)
                cls._cond.notify()

    def disarm(self) -> None:
        with Heartbeat._cond:
            Heartbeat._armed.pop(self, None)

    stop = disarm

    @staticmethod
    def _schedule() -> None:
        cls = Heartbeat
        with cls._cond:
            while True:
                now = time.monotonic()
                if cls._armed:
                    heart, due = min(cls._armed.items(), key=lambda item: item[1])
                    if due <= now:
                        cls._armed[heart] = now + heart.interval
                        threading.Thread(
                            target=heart.beat, name="durable-steps-beat", daemon=True
                        ).start()
                        continue
                    cls._wakes = due
                elif cls._wakes <= now:
                    cls._wakes = math.inf
                # With nothing armed it still sleeps until the time it promised: a run
                # arming its next step before then need not wake it.
                cls._cond.wait(None if cls._wakes == math.inf else cls._wakes - now)

    @staticmethod
    def _after_fork() -> None:  # the scheduler thread does not survive a fork
        Heartbeat._cond = threading.Condition()
        Heartbeat._armed = {}
        Heartbeat._thread = None
        Heartbeat._wakes = math.inf


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=Heartbeat._after_fork)
