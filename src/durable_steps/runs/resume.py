"""Resuming a failed or cancelled run: ``resume_run(store, run_id)``.

Design. One conditional save of the run's head (``changes.update_run``: the head
read and written alone, like a signal or a cancellation, whatever the state's size)
makes a ``failed`` or ``cancelled`` run ``running`` again from its last checkpoint,
with no lease, for the workers (``recover``, ``durable-steps worker``) or for a
``Workflow.run`` here (``runs resume --here``). Nothing else changes: the completed
steps, the state and the running step's journal stay, so its recorded calls replay.

- Its retry rounds start over: the next claim starts the failed step's attempts
  afresh -- a ``Retry(attempts=n)`` has n again, and so has the run's
  ``max_attempts`` (``claim.exhausted`` counts from ``first_attempt``, set to the
  next claim's attempt here).
- How it had ended stays visible: a record ``{"at", "status", "step", "attempt",
  "error", "cancel_reason"}`` is appended to ``Checkpoint.resumed`` (the last
  ``KEPT`` of them, messages cut short), and the error field keeps the last failure until the step
  completes, as after any retry.
- A run that is not failed or cancelled is refused, nothing changed: a completed run
  is final (``ConflictError``), a running or waiting one needs no resume
  (``ConflictError`` naming its status), an unknown one is ``RunNotFoundError``.

A save that meets another writer reads the head again and decides anew (a run
resumed meanwhile by someone else is then refused as running: one resume wins).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping
from typing import Any

from ..runner.changes import update_run
from ..runner.requests import Request, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.telemetry import log
from ..seam import attempts
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import ConflictError
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store

KEPT = 10
"""Resume records a run keeps (the latest): they ride in the run's head -- on the file
store in every record's fields -- so they must stay small however often a run is
resumed: at most ``KEPT`` of them, each error message cut at ``MESSAGE`` characters."""
MESSAGE = 500


def resume_run(store: Store, run_id: str) -> Checkpoint:
    """Make failed or cancelled run ``run_id`` running again, for the workers (see the
    top); the run's checkpoint as saved (its state not read)."""
    return execute(resume_program(run_id), blocking_io(store))


async def resume_run_async(store: AsyncStore, run_id: str) -> Checkpoint:
    """``resume_run`` for async stores."""
    return await execute_on(resume_program(run_id), store)


def resume_program(run_id: str) -> Generator[Request, Any, Checkpoint]:
    """The program of ``resume_run``: one head-only conditional save."""
    check_run_id(run_id)
    saved = yield from update_run(
        run_id,
        resumed,
        missing="it was not resumed",
        doing="it was being resumed",
        undone="it was not resumed",
    )
    assert saved is not None  # resumed() never finds nothing to do: it raises
    log.info("run %r resumed at step %d for the workers", run_id, saved.step + 1)
    return saved


def resumed(cp: Checkpoint) -> Checkpoint:
    """``cp`` (failed or cancelled) running again, how it had ended recorded; else the
    error that says why not."""
    if cp.status not in ("failed", "cancelled"):
        raise _refused(cp)
    record = {
        "at": time.time(),
        "status": cp.status,
        "step": cp.step + 1,
        "attempt": cp.attempt,
        "error": None if cp.error is None else _short(cp.error),
        "cancel_reason": cp.cancel_reason,
    }
    return evolve(
        cp,
        status="running",
        owner=None,
        lease_expires=None,
        cancel_reason=None,
        # The next claim starts attempt ``attempt + 1``: a new round of retries there.
        first_attempt=cp.attempt + 1,
        resumed=(*cp.resumed, record)[-KEPT:],
        # An attempt cancelled while it ran (cancel_run) ended so: not a crash.
        attempt_log=attempts.end(cp.attempt_log, "cancelled", cp.updated_at or time.time())
        if cp.status == "cancelled"
        else cp.attempt_log,
        updated_at=None,
    )


def _short(error: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded error as a resume record keeps it: its message cut at ``MESSAGE``."""
    message = error.get("message")
    if isinstance(message, str) and len(message) > MESSAGE:
        return {**error, "message": message[: MESSAGE - 3] + "..."}
    return dict(error)


def _refused(cp: Checkpoint) -> ConflictError:
    run_id = cp.run_id
    if cp.status == "completed":
        why = "it has completed; a completed run is final. Fork it or start a new run"
    elif cp.status == "waiting":
        what, send = (
            (f"a message on {cp.receiving!r}", "send the message")
            if cp.receiving is not None
            else (f"signal {cp.waiting_for!r}", "send the signal")
            if cp.waiting_for
            else ("its timer", "it wakes at its time")
        )
        why = f"it is waiting for {what}, not failed: it resumes by itself ({send})"
    else:
        why = "it is running (or waiting for a worker to take it), not failed or cancelled"
    return ConflictError(
        f"run {run_id!r} cannot be resumed: {why}; nothing was changed", run_id=run_id
    )
