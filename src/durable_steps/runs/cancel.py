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

import contextlib
from collections.abc import Generator
from typing import Any

from ..runner.changes import update_run
from ..runner.children import children_of, notify_parent, waits_on_child
from ..runner.requests import Load, Request, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.telemetry import log
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import ConflictError, RunNotFoundError
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store


def cancel_run(store: Store, run_id: str, *, reason: str | None = None) -> bool:
    """Cancel run ``run_id`` (see the top); True if this call cancelled it."""
    return execute(_cancel(run_id, reason), blocking_io(store))


async def cancel_run_async(store: AsyncStore, run_id: str, *, reason: str | None = None) -> bool:
    """``cancel_run`` for async stores."""
    return await execute_on(_cancel(run_id, reason), store)


def _cancel(run_id: str, reason: str | None) -> Generator[Request, Any, bool]:
    check_run_id(run_id)
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"cancel_run(reason=...) must be a str, not a {type(reason).__name__}")

    def cancel(cp: Checkpoint) -> Checkpoint | None:
        if cp.status == "cancelled":
            return None
        if cp.status == "completed":
            raise ConflictError(
                f"run {run_id!r} has completed; a completed run cannot be cancelled (nothing "
                "of it is left to stop). Delete it if it should go",
                run_id=run_id,
            )
        changes = {"owner": None, "lease_expires": None, "updated_at": None}
        return evolve(cp, status="cancelled", cancel_reason=reason, **changes)

    done = yield from update_run(
        run_id,
        cancel,
        missing="it was not cancelled",
        doing="it was being cancelled",
        undone="it was not cancelled",
    )
    if done is None:
        return False
    log.info("run %r cancelled%s", run_id, f" ({reason})" if reason else "")
    # child runs: a parent is told; a parent waiting on a child cancels the children
    # its running step started (their records are in its journal, so it is read whole
    # then, and only then: any other cancellation reads and writes the head alone)
    yield from notify_parent(done)
    whole = (yield Load(run_id)) if waits_on_child(done) else None
    for child in [] if whole is None else children_of(whole):
        with contextlib.suppress(ConflictError, RunNotFoundError):  # completed, or deleted
            yield from _cancel(child, f"its parent {run_id!r} was cancelled")
    return True
