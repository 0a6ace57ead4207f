"""Signals, the sending side: ``send_signal`` delivers a signal to a run from outside.

A conditional save of the run's head (``changes.update_run``) adds the payload to the
checkpoint's ``signals`` and, when the run waits for exactly that name, makes it
``running`` again with no owner. What a signal is, and the waiting side inside a step
(``wait_for_signal``), are at the top of ``runner.signals``.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

from ..runner.changes import update_run
from ..runner.errors import cancelled
from ..runner.requests import Request, execute
from ..runner.store_io import blocking_io, execute_on
from ..seam.checkpoint import Checkpoint
from ..seam.errors import ConflictError
from ..seam.rules import check_name, check_run_id
from ..seam.state import freeze, thaw
from ..seam.store import AsyncStore, Store


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
