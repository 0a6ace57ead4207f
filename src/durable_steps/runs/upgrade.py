"""Moving a run to another version of its workflow's code: ``upgrade_run(store, run_id,
workflow)`` (``versions`` has the design of versions).

Design. One conditional save of the run's head (``changes.update_run``, like a
signal: the state is neither read nor written) sets the run's version to
``workflow.version``, after checking, on the head as read:

- the run belongs to ``workflow`` (its name), and ``workflow`` has a version;
- the run's completed steps are the first steps of the new step list, by name
  (``StepMismatchError`` naming the first difference; nothing changed) -- the same
  rule a claim applies, checked now rather than at the next claim;
- the run is not completed (final: ``ConflictError``) and no live lease holds it
  (``RunLeasedError``): a worker running it on the old code would go on with it, so
  the operator stops it first (``runs cancel``, then ``runs resume`` after the
  upgrade), or waits for its step boundary -- a failed, cancelled, waiting or
  queued run is moved at once, keeping its status.

The running step's journal stays, and the new code replays the calls it recorded. So
before anything changes, the replayer (``replay``) re-runs that step on the new code
against the run's record, running and writing nothing: a move after which the step
would diverge -- ask for a recorded call under another name, or end without asking
for recorded ones -- is refused (``Refused``, naming where and how; nothing changed),
where the move itself would succeed and the run fail at its next claim. The move is
made on the version of the run that was checked (its etag): a run that changed in
between is refused too (``ConflictError``), to be checked again. ``drop_calls=True``
moves it without that check, discarding the running step's recorded calls: the step
starts afresh on the new code, its calls made again. A change inside a step that
must keep its records goes behind ``patched`` (``patches``) instead. ``True``: the run
was moved; ``False``: it ran on that version already.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from ..runner.changes import update_run
from ..runner.errors import not_found
from ..runner.replay import Refused, RunReplay, check_against, difference
from ..runner.replay_driver import AsyncReplay, SyncReplay
from ..runner.requests import Load, Request, Save, execute, execute_async
from ..runner.store_io import AsyncStoreIO, blocking_io, execute_on
from ..runner.telemetry import log
from ..runner.workflow import Workflow
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import ConflictError, RunLeasedError, StepMismatchError
from ..seam.lease import lease_holder
from ..seam.rules import check_run_id
from ..seam.state import frozen_state
from ..seam.store import AsyncStore, Store


def upgrade_run(store: Store, run_id: str, workflow: Workflow, *, drop_calls: bool = False) -> bool:
    """Move run ``run_id`` to ``workflow``'s version once its running step replays on
    that code (see the top); True if it moved. ``drop_calls``: move it without that
    check, discarding the running step's recorded calls."""
    _check_target(run_id, workflow)
    io = blocking_io(store)
    if drop_calls:
        return execute(_dropping(run_id, workflow), io)
    checked = execute(_checked(run_id, workflow), SyncReplay(io).do)
    return execute(upgrade_program(run_id, workflow, checked), io)


async def upgrade_run_async(
    store: AsyncStore, run_id: str, workflow: Workflow, *, drop_calls: bool = False
) -> bool:
    """``upgrade_run`` for async stores."""
    _check_target(run_id, workflow)
    if drop_calls:
        return await execute_on(_dropping(run_id, workflow), store)
    checked = await execute_async(_checked(run_id, workflow), AsyncReplay(AsyncStoreIO(store)).do)
    return await execute_on(upgrade_program(run_id, workflow, checked), store)


def _check_target(run_id: str, workflow: Workflow) -> None:
    check_run_id(run_id)
    if not isinstance(workflow, Workflow):
        raise TypeError(f"upgrade_run() needs the Workflow to move the run to, not {workflow!r}")
    if workflow.version is None:
        raise ValueError(
            f"workflow {workflow.name!r} has no version; give it one "
            "(Workflow(name, steps, version='...')) to move runs to it"
        )


def _checked(run_id: str, workflow: Workflow) -> Generator[Request, Any, RunReplay | None]:
    """The replay of the run's running step on ``workflow``'s code (None: nothing to
    replay); ``Refused`` if it diverges."""
    loaded: Checkpoint | None = yield Load(run_id)
    if loaded is None:
        raise not_found(run_id, "it was not upgraded")
    check_upgrade(loaded, workflow)
    if loaded.version == workflow.version:
        return None
    checked = yield from check_against(loaded, workflow)
    if checked.diverges:
        at = f" at its recorded {checked.where}" if checked.where else ""
        raise Refused(
            f"run {run_id!r} cannot move to version {workflow.version!r}: its running step "
            f"{checked.step} {checked.step_name!r} diverges from its record on that code{at}: "
            f"{checked.detail}; nothing was changed. Keep the step's recorded calls in the "
            "new code (put the change behind patched()), or move it with --drop-calls "
            "(drop_calls=True), which discards them: the step then runs afresh",
            run_id=run_id,
            step=checked.step,
            step_name=checked.step_name,
            recorded=list(checked.recorded_ops),
            asked=list(checked.asked_ops),
        )
    return checked


def _dropping(run_id: str, workflow: Workflow) -> Generator[Request, Any, bool]:
    """Move the run, its running step's recorded calls discarded: one conditional save
    of the whole run (a head's save keeps the journal)."""
    loaded: Checkpoint | None = yield Load(run_id)
    if loaded is None:
        raise not_found(run_id, "it was not upgraded")
    check_upgrade(loaded, workflow)
    if loaded.version == workflow.version and not loaded.calls:
        return False
    state = frozen_state(loaded.state, run_id, stored_as=loaded.etag)
    moved = evolve(loaded, state=state, version=workflow.version, calls=(), updated_at=None)
    try:
        yield Save(moved)
    except ConflictError as exc:
        raise _changed(run_id) from exc
    log.info(
        "run %r moved from version %r to %r, %d recorded call(s) of its step %d dropped",
        *(run_id, loaded.version, workflow.version, len(loaded.calls), loaded.step + 1),
    )
    return True


def _changed(run_id: str) -> ConflictError:
    return ConflictError(
        f"run {run_id!r} changed while it was being upgraded (a worker ran it?); nothing "
        "was changed. Try again",
        run_id=run_id,
    )


def upgrade_program(
    run_id: str, workflow: Workflow, checked: RunReplay | None = None
) -> Generator[Request, Any, bool]:
    """The move itself: one conditional save of the run's head, on the version that
    was ``checked`` (when the replay had something to check)."""
    was: list[str | None] = []

    def change(cp: Checkpoint) -> Checkpoint | None:
        check_upgrade(cp, workflow)
        if cp.version == workflow.version:
            return None
        if checked is not None and cp.etag != checked.etag:
            raise _changed(run_id)
        was[:] = [cp.version]
        return evolve(cp, version=workflow.version, updated_at=None)

    saved = yield from update_run(
        run_id,
        change,
        missing="it was not upgraded",
        doing="it was being upgraded",
        undone="it was not upgraded",
    )
    if saved is None:
        return False
    log.info("run %r moved from version %r to %r", run_id, was[0], workflow.version)
    return True


def check_upgrade(cp: Checkpoint, workflow: Workflow) -> None:
    """Raise what keeps run ``cp`` from moving to ``workflow``'s code (see the top)."""
    run_id = cp.run_id
    if cp.workflow != workflow.name:
        of = f"workflow {cp.workflow!r}" if cp.workflow else "a plain run() (no workflow)"
        raise StepMismatchError(
            f"run {run_id!r} is a run of {of}, not of {workflow.name!r}; nothing was "
            "changed. Name the module that holds its workflow",
            run_id=run_id,
        )
    if cp.status == "completed":
        raise ConflictError(
            f"run {run_id!r} has completed; a completed run is final and cannot be "
            "upgraded; nothing was changed",
            run_id=run_id,
        )
    names = tuple(s.name for s in workflow.steps)
    if names[: len(cp.steps)] != cp.steps:
        raise StepMismatchError(
            f"run {run_id!r} cannot move to version {workflow.version!r}: "
            f"{difference(cp.steps, names)}; nothing was changed. A new version keeps the "
            "completed steps as they were (append or change later steps only), or the "
            "run stays on its version",
            run_id=run_id,
        )
    if holder := lease_holder(cp, "", time.time()):
        raise RunLeasedError(
            f"run {run_id!r} is being run by {holder} (its lease is live) on version "
            f"{cp.version!r}; nothing was changed. Let its step finish, or cancel it "
            "(durable-steps runs cancel), upgrade, then resume it (durable-steps runs resume)",
            run_id=run_id,
            owner=holder,
            expires_at=cp.lease_expires,
        )
