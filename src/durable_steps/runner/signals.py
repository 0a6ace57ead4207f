"""Signals: a run that waits for a person (or any outside event) without holding a worker.

Inside a step, ``wait_for_signal(name)`` returns the signal's payload once it has
been delivered. Before that it suspends the run: the runner saves it as
``waiting`` for that name (that step not completed, the earlier ones kept),
releases the lease and raises ``RunWaiting``. With ``timeout=``, the deadline
is recorded in the step's journal and as the run's ``wake_at``: ``recover`` and
the worker resume the run once it passes, and the wait returns ``default`` (or
raises ``SignalTimeoutError``) unless the signal came after all.
``send_signal(store, run_id, name, payload)`` (``runs.signals``: the sending side,
outside the run) delivers it: a conditional save that adds the payload to the
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
from datetime import timedelta
from typing import Any

from ..seam.errors import SignalTimeoutError, Suspend
from ..seam.rules import check_name
from ..seam.state import thaw
from .clock import now
from .step import current_step
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
