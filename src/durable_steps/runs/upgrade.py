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

The running step's journal stays: the new code replays the calls it recorded, so a
change inside that step goes behind ``patched`` (``patches``) like any change of a
step's code. ``True``: the run was moved; ``False``: it ran on that version already.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from ..runner.changes import update_run
from ..runner.requests import Request, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.telemetry import log
from ..runner.workflow import Workflow
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import ConflictError, RunLeasedError, StepMismatchError
from ..seam.lease import lease_holder
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store


def upgrade_run(store: Store, run_id: str, workflow: Workflow) -> bool:
    """Move run ``run_id`` to ``workflow``'s version (see the top); True if it moved."""
    return execute(upgrade_program(run_id, workflow), blocking_io(store))


async def upgrade_run_async(store: AsyncStore, run_id: str, workflow: Workflow) -> bool:
    """``upgrade_run`` for async stores."""
    return await execute_on(upgrade_program(run_id, workflow), store)


def upgrade_program(run_id: str, workflow: Workflow) -> Generator[Request, Any, bool]:
    check_run_id(run_id)
    if not isinstance(workflow, Workflow):
        raise TypeError(f"upgrade_run() needs the Workflow to move the run to, not {workflow!r}")
    if workflow.version is None:
        raise ValueError(
            f"workflow {workflow.name!r} has no version; give it one "
            "(Workflow(name, steps, version='...')) to move runs to it"
        )
    was: list[str | None] = []

    def change(cp: Checkpoint) -> Checkpoint | None:
        check_upgrade(cp, workflow)
        if cp.version == workflow.version:
            return None
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


def difference(done: tuple[str, ...], names: tuple[str, ...]) -> str:
    """Where the completed steps ``done`` and a new step list ``names`` part."""
    for i, name in enumerate(done):
        if i >= len(names):
            return (
                f"it completed {len(done)} steps and the new step list has {len(names)}: "
                f"completed step {i} {name!r} is not in it"
            )
        if names[i] != name:
            return f"its completed step {i} is {name!r}; the new step list has {names[i]!r}"
    return "the step lists agree"  # (never reached: called on a difference)
