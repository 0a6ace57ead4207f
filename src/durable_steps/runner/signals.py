"""Signals: a run that waits for a person (or any outside event) without holding a worker.

Inside a step, ``wait_for_signal(name)`` returns the signal's payload once it has
been delivered. Before that it suspends the run: the runner saves it as
``waiting`` for that name (that step not completed, the earlier ones kept),
releases the lease and raises ``RunWaiting``. ``send_signal(store, run_id, name,
payload)`` delivers it: a conditional save that adds the payload to the
checkpoint's ``signals`` and, when the run waits for exactly that name, makes it
``running`` again with no owner -- so the next ``run``, or ``recover``, resumes
it and the step starts over, this time getting the payload. A concurrent save
of the run's owner makes the delivery load and try again; it never overwrites.

Signals are kept for the life of the run: a second signal of the same name is
refused (``ConflictError``), also after the run completed, and a signal sent
before the step asks for it is returned at once. Code of the waiting step
before the ``wait_for_signal`` call runs again when the run resumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import replace
from typing import Any

from ..seam.errors import ConflictError, RunNotFoundError, Suspend
from ..seam.state import freeze, thaw
from ..seam.store import AsyncStore, Checkpoint, Store, check_name, check_run_id
from .requests import Load, Request, Save, Sleep, execute, execute_async
from .step import current_step
from .store_io import AsyncIO, plain

_TRIES = 20


def wait_for_signal(name: str) -> Any:
    """The payload of signal ``name``; until it is delivered, suspends the run."""
    check_name(name, "signal name")
    ctx = current_step()
    if name in ctx.signals:
        return thaw(ctx.signals[name])
    raise Suspend(name)


def send_signal(store: Store, run_id: str, name: str, payload: Any = None) -> Checkpoint:
    """Deliver signal ``name`` with ``payload`` (JSON) to run ``run_id``; returns the
    checkpoint as stored. ``RunNotFoundError`` if the run does not exist,
    ``ConflictError`` if that signal was delivered before."""
    return execute(_deliver(run_id, name, payload), plain(store))


async def send_signal_async(
    store: AsyncStore, run_id: str, name: str, payload: Any = None
) -> Checkpoint:
    """``send_signal`` for async stores."""
    io = AsyncIO(store)
    delivered = await execute_async(_deliver(run_id, name, payload), io)
    if io.cancelled:
        raise asyncio.CancelledError  # held back until the delivery's outcome was known
    return delivered


def _deliver(run_id: str, name: str, payload: Any) -> Generator[Request, Any, Checkpoint]:
    check_run_id(run_id)
    check_name(name, "signal name")
    payload = thaw(freeze(payload, f"[{name!r}]", run_id, 1, "signal payload"))
    for attempt in range(_TRIES):
        cp = yield Load(run_id)
        if cp is None:
            raise RunNotFoundError(
                f"run {run_id!r} does not exist, so signal {name!r} was not delivered; "
                "check the run id ('durable-steps runs list')",
                run_id=run_id,
            )
        if name in cp.signals:
            raise ConflictError(
                f"run {run_id!r} already has signal {name!r}; nothing was changed. A signal "
                "is delivered once: use another name for another decision",
                run_id=run_id,
            )
        wakes = cp.status == "waiting" and cp.waiting_for == name
        try:
            saved: Checkpoint = yield Save(
                replace(
                    cp,
                    signals={**cp.signals, name: payload},
                    status="running" if wakes else cp.status,
                    updated_at=cp.updated_at if cp.status == "completed" else None,
                )
            )
        except ConflictError:
            yield Sleep(0.005 * (attempt + 1))  # the owner saved meanwhile: look again
        else:
            return saved
    raise ConflictError(
        f"run {run_id!r} kept changing while signal {name!r} was being delivered "
        f"({_TRIES} tries); nothing was changed. Try again",
        run_id=run_id,
    )
