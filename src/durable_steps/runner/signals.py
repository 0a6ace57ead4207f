"""Signals: a run that waits for a person (or any outside event) without holding a worker.

Inside a step, ``wait_for_signal(name)`` returns the signal's payload once it has
been delivered. Before that it suspends the run: the runner saves it as
``waiting`` for that name (that step not completed, the earlier ones kept),
releases the lease and raises ``RunWaiting``. With ``timeout=``, the deadline
is recorded in the step's journal and as the run's ``wake_at``: ``recover`` and
the worker resume the run once it passes, and the wait returns ``default`` (or
raises ``SignalTimeoutError``) unless the signal came after all. ``send_signal(store, run_id, name,
payload)`` delivers it: a conditional save that adds the payload to the
checkpoint's ``signals`` and, when the run waits for exactly that name, makes it
``running`` again with no owner -- so the next ``run``, or ``recover``, resumes
it and the step starts over, this time getting the payload. A concurrent save
of the run's owner makes the delivery load and try again; it never overwrites.

Signals are kept for the life of the run: a second signal of the same name is
refused (``ConflictError``), also after the run completed, and a signal sent
before the step asks for it is returned at once. Code of the waiting step
before the ``wait_for_signal`` call runs again when the run resumes -- but what it
does through ``call`` returns its recorded result, so no side effect repeats. A
cancelled run takes no signal (``RunCancelledError``).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import replace
from datetime import timedelta
from typing import Any

from ..seam.checkpoint import Checkpoint
from ..seam.errors import ConflictError, SignalTimeoutError, Suspend
from ..seam.rules import check_name, check_run_id
from ..seam.state import freeze, thaw
from ..seam.store import AsyncStore, Store
from .changes import update_run
from .clock import now
from .errors import cancelled
from .requests import Request, execute
from .step import current_step
from .store_io import blocking_io, execute_on
from .timers import seconds_of

_NO_DEFAULT: Any = object()


def wait_for_signal(
    name: str, *, timeout: float | timedelta | None = None, default: Any = _NO_DEFAULT
) -> Any:
    """The payload of signal ``name``; until it is delivered, suspends the run.

    With ``timeout`` (seconds, or a ``timedelta``), the deadline -- the first
    suspension + ``timeout`` -- is recorded; resumed after it without the signal, this
    returns ``default`` when one is given, else raises ``SignalTimeoutError`` in the
    step. A signal that is there when the run resumes is returned, even if it came
    late."""
    check_name(name, "signal name")
    seconds = None if timeout is None else seconds_of(timeout, "wait_for_signal(timeout=...)")
    ctx = current_step()
    journal = ctx.journal
    key, record = (None, None) if journal is None else journal.take("wait", name)
    if name in ctx.signals:
        return thaw(ctx.signals[name])
    if record is None:
        deadline = None if seconds is None else now() + seconds
        entry = None
        if key is not None:
            entry = {**key, "name": name, "kind": "wait", "deadline": deadline}
            entry["step_attempt"] = ctx.attempt
        raise Suspend(name, deadline, entry)
    deadline = record.get("deadline")
    if deadline is None or deadline > now():
        raise Suspend(name, deadline)
    if default is not _NO_DEFAULT:
        return default
    raise SignalTimeoutError(
        f"run {ctx.run_id!r}: signal {name!r} did not come before its deadline "
        f"({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(deadline))}); pass "
        "default= to wait_for_signal to go on without it, or catch SignalTimeoutError",
        run_id=ctx.run_id,
        signal=name,
        deadline=deadline,
    )


def send_signal(store: Store, run_id: str, name: str, payload: Any = None) -> Checkpoint:
    """Deliver signal ``name`` with ``payload`` (JSON) to run ``run_id``; returns the
    checkpoint as stored, read and written without its state (its ``state`` is not
    read: ``store.load`` gives it). ``RunNotFoundError`` if the run does not exist,
    ``ConflictError`` if that signal was delivered before."""
    return execute(_deliver(run_id, name, payload), blocking_io(store))


async def send_signal_async(
    store: AsyncStore, run_id: str, name: str, payload: Any = None
) -> Checkpoint:
    """``send_signal`` for async stores."""
    return await execute_on(_deliver(run_id, name, payload), store)


def _deliver(run_id: str, name: str, payload: Any) -> Generator[Request, Any, Checkpoint]:
    check_run_id(run_id)
    check_name(name, "signal name")
    payload = thaw(freeze(payload, f"[{name!r}]", run_id, 1, "signal payload"))

    def deliver(cp: Checkpoint) -> Checkpoint:
        if cp.status == "cancelled":
            raise cancelled(run_id, cp.cancel_reason)
        if name in cp.signals:
            raise ConflictError(
                f"run {run_id!r} already has signal {name!r}; nothing was changed. A signal "
                "is delivered once: use another name for another decision",
                run_id=run_id,
            )
        wakes = cp.status == "waiting" and cp.waiting_for == name
        return replace(
            cp,
            signals={**cp.signals, name: payload},
            status="running" if wakes else cp.status,
            wake_at=None if wakes else cp.wake_at,
            updated_at=cp.updated_at if cp.status == "completed" else None,
        )

    saved = yield from update_run(
        run_id,
        deliver,
        missing=f"signal {name!r} was not delivered",
        doing=f"signal {name!r} was being delivered",
        undone="nothing was changed",
    )
    assert saved is not None  # deliver always changes the run
    return saved
