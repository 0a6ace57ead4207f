"""Cancelling a run from outside: ``cancel_run(store, run_id, reason=None)``.

One conditional save sets the run's status to ``cancelled`` (with the reason, and no
lease). It is made on top of the run as loaded and retried over saves of the run's
owner -- a save that meets a newer version loads again -- so it never overwrites
one. ``True``: it cancelled the run; ``False``: it was cancelled already; a
completed run cannot be (``ConflictError``), a missing one raises
``RunNotFoundError``.

The owner learns of it at its next save or heartbeat (``lease_keeper``): under
``run_async`` the running step is cancelled, under ``run`` the step runs to its
end and its result is not saved; either way ``RunCancelledError`` is raised and
no other step or call starts. ``run``, ``Workflow.start`` and ``send_signal`` of a
cancelled run raise ``RunCancelledError`` before anything runs; ``recover`` and
the worker leave it alone; ``runs prune`` deletes it like a completed run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

from ..seam.errors import ConflictError
from ..seam.store import AsyncStore, Checkpoint, Store, check_run_id, evolve
from .claim import not_found
from .requests import Load, Request, Save, Sleep, execute, execute_async
from .store_io import AsyncIO, plain
from .telemetry import log

_TRIES = 20


def cancel_run(store: Store, run_id: str, *, reason: str | None = None) -> bool:
    """Cancel run ``run_id`` (see the top); True if this call cancelled it."""
    return execute(_cancel(run_id, reason), plain(store))


async def cancel_run_async(store: AsyncStore, run_id: str, *, reason: str | None = None) -> bool:
    """``cancel_run`` for async stores."""
    io = AsyncIO(store)
    done = await execute_async(_cancel(run_id, reason), io)
    if io.cancelled:
        raise asyncio.CancelledError  # held back until the cancellation's outcome was known
    return done


def _cancel(run_id: str, reason: str | None) -> Generator[Request, Any, bool]:
    check_run_id(run_id)
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"cancel_run(reason=...) must be a str, not {reason!r}")
    for attempt in range(_TRIES):
        cp: Checkpoint | None = yield Load(run_id)
        if cp is None:
            raise not_found(run_id, "it was not cancelled")
        if cp.status == "cancelled":
            return False
        if cp.status == "completed":
            raise ConflictError(
                f"run {run_id!r} has completed; a completed run cannot be cancelled (nothing "
                "of it is left to stop). Delete it if it should go",
                run_id=run_id,
            )
        try:
            yield Save(
                evolve(
                    cp,
                    status="cancelled",
                    cancel_reason=reason,
                    owner=None,
                    lease_expires=None,
                    updated_at=None,
                )
            )
        except ConflictError:
            yield Sleep(0.005 * (attempt + 1))  # the owner saved meanwhile: look again
            continue
        log.info("run %r cancelled%s", run_id, f" ({reason})" if reason else "")
        return True
    raise ConflictError(
        f"run {run_id!r} kept changing while it was being cancelled ({_TRIES} tries); it "
        "was not cancelled. Try again",
        run_id=run_id,
    )
