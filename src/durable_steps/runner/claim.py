"""Claiming a run: what the loaded checkpoint allows, decided before anything runs.

``claim_for`` takes the loaded checkpoint (None: a fresh run) and says what the run
does next: raise (nothing ran, nothing was written), return None (nothing is left
to run: the run completed), or return the checkpoint that claims it -- this worker
as owner until now + ``lease``, the next step's attempt counted. In order:

1. the completed part of the step list, and the workflow, must be the checkpoint's
   (``StepMismatchError``);
2. another worker's live lease is left alone (``RunLeasedError``);
3. a cancelled run runs nothing (``RunCancelledError``);
4. a waiting run stays waiting until its signal comes or its timer or deadline is
   due (``RunWaiting``);
5. a completed run runs nothing, even if its step list grew since: it is final;
6. else the run is claimed. The next step was started once more than the
   checkpoint says -- by a worker that crashed in it, or by us now -- so its attempt
   is one higher; after a failure or a wait a new round of retries begins.

A claim that would start the next step more often in one round than ``max_attempts``
(or its ``Retry``'s attempts, if more) allows is a poison run -- every attempt died
without a result, the process killed each time (the OOM killer), or its lease lost:
``exhausted`` gives the ``TooManyAttemptsError`` the run is failed with instead. Only
attempts that recorded nothing new count: an agent step killed again and again, each
attempt recording one more call (each record names the step attempt that made it:
``step_attempt``), is making progress -- its next attempt replays those calls -- and
is not failed for it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..seam import attempts, mailbox
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import (
    StepMismatchError,
    TooManyAttemptsError,
)
from ..seam.lease import lease_holder
from .clock import now
from .errors import cancelled, leased, still_waiting
from .step import Step


def claim_for(
    loaded: Checkpoint,
    steps: Sequence[Step],
    workflow: str | None,
    owner: str,
    held: dict[str, Any],
) -> Checkpoint | None:
    """The claim of a loaded run for ``owner`` (``held``: its lease fields), or None
    when nothing is left to run; raises when the run is not to be run now."""
    run_id = loaded.run_id
    given = tuple(s.name for s in steps[: len(loaded.steps)])
    if given != loaded.steps:
        raise StepMismatchError(
            f"run {run_id!r} completed steps {list(loaded.steps)}, but the step list "
            f"now starts {list(given)}; nothing was run. Keep completed steps as they were "
            "(append new ones only), or use a new run id",
            run_id=run_id,
        )
    if workflow and loaded.workflow not in (None, workflow):
        raise StepMismatchError(
            f"run {run_id!r} belongs to workflow {loaded.workflow!r}, not {workflow!r}; "
            "nothing was run. Use that workflow, or a new run id",
            run_id=run_id,
        )
    if holder := lease_holder(loaded, owner, time.time()):
        raise leased(loaded, holder)
    if loaded.status == "cancelled":
        raise cancelled(run_id, loaded.cancel_reason)
    if loaded.status == "waiting" and not _due(loaded):
        raise still_waiting(loaded)
    if loaded.status == "completed" or loaded.step + 1 >= len(steps):
        return None
    started = loaded.attempt + 1
    # After a failure or a wait, a new round of retries; after a crash, the same one.
    woken = loaded.waiting_for is not None or loaded.receiving is not None  # by a send
    new_round = loaded.status in ("failed", "waiting") or woken
    # An attempt still open in the log ended without a record: a crash or a lost lease.
    log = attempts.lost(loaded.attempt_log, loaded.updated_at)
    return evolve(
        loaded,
        status="running",
        workflow=workflow or loaded.workflow,
        attempt=started,
        first_attempt=started if new_round else loaded.first_attempt,
        attempt_log=attempts.begin(log, loaded.step + 1, started, time.time()),
        waiting_for=None,
        receiving=None,
        wake_at=None,
        updated_at=None,
        **held,
    )


MAX_ATTEMPTS = 10
"""The default ``max_attempts`` of a run: the attempts of a step, in one round, that a
claim starts before it fails the run instead (``exhausted``). Ten: a run survives
several deploys, node drains or preemptions in a row in one step (each costs an
attempt), while a step that kills its process every time -- out of memory, a native
crash -- stops after ten executions of its side effects instead of looping forever."""


def exhausted(
    claim: Checkpoint, steps: Sequence[Step], max_attempts: int | None
) -> TooManyAttemptsError | None:
    """The error to fail the run with when ``claim`` would start the next step's
    attempt ``max_attempts + 1`` of this round (None: the claim may go on; so it may
    while the step's ``Retry`` allows more attempts)."""
    i = claim.step + 1
    if max_attempts is None or i >= len(steps):
        return None  # (an empty step list completes at once)
    step = steps[i]
    limit = max(max_attempts, step.retry.attempts if step.retry else 1)
    started = claim.attempt - claim.first_attempt  # before this claim, in this round
    barren = started - len(_recording(claim))
    if barren < limit:
        return None
    run_id = claim.run_id
    which = (
        "none of them recorded a result"
        if barren == started
        else f"{barren} of them recorded nothing new (no call's result, no completed step)"
    )
    return TooManyAttemptsError(
        f"run {run_id!r}: step {i} {step.name!r} was started {started} times (attempts "
        f"{claim.first_attempt}..{claim.attempt - 1}) and {which}: each such "
        "attempt's process died (killed by the OOM killer or a deploy, a native crash) or "
        f"lost its lease. It was not started again (max_attempts={limit}): the run is "
        "failed, and no worker takes it. Find out why it dies (its logs, its memory), "
        "then run it again explicitly (workflow.run() or run(): a new round of attempts)",
        run_id=run_id,
        step=i,
        step_name=step.name,
        attempts=barren,
    )


def _recording(claim: Checkpoint) -> set[int]:
    """The attempts of this round, before ``claim``'s, that recorded something in the
    step's journal that is still there (a call's result, a retry, a sleep, a wait)."""
    earlier = range(claim.first_attempt, claim.attempt)
    found = (r.get("step_attempt") for r in claim.calls)
    return {a for a in found if isinstance(a, int) and a in earlier}


def check_max_attempts(value: object) -> int | None:
    """A ``max_attempts=``, checked: a whole number from 1, or None (no limit)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(
        f"max_attempts must be a whole number of attempts from 1, or None for no limit, "
        f"not {value!r}"
    )


def _due(cp: Checkpoint) -> bool:
    """Whether a waiting run may resume: its signal came, or its time is up."""
    if cp.waiting_for is not None and cp.waiting_for in cp.signals:
        return True
    if cp.receiving is not None and mailbox.pending(cp.mailbox, cp.receiving):
        return True  # a message came (send_message wakes the run itself: a fallback)
    return cp.wake_at is not None and cp.wake_at <= now()
