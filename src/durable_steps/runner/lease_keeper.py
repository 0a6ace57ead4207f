"""Keeping a claimed run's lease: its saves and its heartbeat, on top of the latest write.

While a run holds its lease, two writers share it: the run's own saves (a step's
result, a recorded call, a retry, a release) and its heartbeat, which renews
``lease_expires`` every ``lease / 3`` seconds while a step runs or a retry pauses. The
driver lets only one of them save at a time (a lock), and both save on top of
``latest`` -- the last checkpoint this run wrote -- so each is conditional on the
other's last write and on nobody else's. More writers are welcome: ``send_signal`` may
add a signal while we hold the lease, ``send_message`` a message (``runs.mailbox``;
one that wakes the run while it saves itself as waiting for it, too). A save that
meets such a delivery reloads, takes the signals and messages over, and saves again.
So does a save that meets this run's own earlier write -- one whose outcome the store
could not tell (its answer lost, and the read-back failed too), which had landed: a
stored version written under this run's owner id is adopted, never taken for another
worker's (a failure then saved on top of it, a lease released after the step it saved,
not a lost lease that leaves the run held by nobody until it expires). A run cancelled
meanwhile (``cancel_run``) raises ``RunCancelledError``, one deleted meanwhile a
``LeaseLostError`` that says so; any other change means someone took the lease: the
run's own save raises ``ConflictError`` (which the runner turns into
``LeaseLostError``). A heartbeat that meets any of these marks the run ``lost``, so
that the step's result is not saved and no other call starts (``run_async`` also
cancels the step).

Both are programs like the runner's (they yield ``Load`` and ``Save`` and are
resumed with the result), so ``run`` and ``run_async`` share them.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import replace
from typing import Any

from ..seam import mailbox
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import ConflictError, DurableError, LeaseLostError, RunCancelledError
from ..seam.state import call_records, forget_base, freeze, frozen_state, mark_stored
from . import checkpoints
from . import errors as run_errors
from .errors import cancelled
from .requests import Load, Request, Save
from .run import RunProgram
from .telemetry import log

_ABSORB = 10
"""Signal deliveries absorbed in a row by one save before it gives up."""


class LeaseKeeper:
    """What one run knows of its own writes, shared by its saves and its heartbeat."""

    def __init__(self, run: RunProgram) -> None:
        self.run = run
        self.latest: Checkpoint | None = None
        """The last checkpoint this run wrote (or absorbed), as the store holds it."""
        self.lost: LeaseLostError | RunCancelledError | None = None
        """Set by a heartbeat that found another owner, or the run cancelled or
        deleted: nothing more is saved, no other call starts."""
        self.closed = False

    def save(self, cp: Checkpoint) -> Generator[Request, Any, Checkpoint]:
        """Save ``cp`` on top of ``latest``; returns it as stored."""
        if self.lost is not None:
            raise self.lost
        for _ in range(_ABSORB):
            cp = _on_top(cp, self.latest)
            try:
                saved: Checkpoint = yield Save(cp)
            except ConflictError:
                if self.latest is None:
                    raise  # the claim: the runner decides
                absorbed = _absorb(self.latest, (yield Load(self.run.run_id)), self.run.owner)
                if absorbed is None:
                    raise
                self.latest = absorbed
                continue
            self.latest = _stored(cp, saved)
            return self.latest
        raise run_errors.lost(self.run.run_id, cp.step + 1)

    def renew(self) -> Generator[Request, Any, None]:
        """One heartbeat: renew the lease if the run still holds it. A conflict marks
        the lease lost; an unreachable store is logged, and the next beat tries again."""
        cp = self.latest
        if self.closed or self.lost is not None or cp is None or not _ours(cp, self.run):
            return
        renewal = replace(cp, lease_expires=time.time() + self.run.lease, updated_at=None)
        try:
            with self.run.obs.save(renewal, beat=True):
                yield from self.save(renewal)
        except (LeaseLostError, RunCancelledError) as exc:
            self.lost = exc
        except ConflictError as exc:
            self.lost = run_errors.lost(self.run.run_id, cp.step + 1)
            self.lost.__cause__ = exc
        except DurableError as exc:
            # A warning: a lease truly lost is caught at the next heartbeat or save, which stop the
            # step; no recorded call runs again.
            log.warning("run %r: heartbeat failed: %s", self.run.run_id, exc)


def _ours(cp: Checkpoint, run: RunProgram) -> bool:
    return cp.owner == run.owner and cp.lease_expires is not None


def _on_top(cp: Checkpoint, latest: Checkpoint | None) -> Checkpoint:
    """``cp`` to be saved over ``latest``: its etag, every signal delivered meanwhile
    (signals are only ever added), and while the same step runs, every record of its
    journal saved meanwhile (calls gathered under ``run_async`` record concurrently,
    each on the run's checkpoint as it was when it began). A ``cp`` of an earlier step
    than ``latest`` -- the runner releasing its lease after the save of a step whose
    outcome it could not learn, which landed (``_adopted``) -- takes only its lease to
    ``latest``: a save never undoes a step that landed."""
    if latest is None:
        return cp
    if cp.step < latest.step:
        return evolve(latest, owner=cp.owner, lease_expires=cp.lease_expires, updated_at=None)
    if latest.signals.keys() - cp.signals.keys():
        merged = {**latest.signals, **cp.signals}
        cp = replace(cp, signals=freeze(merged, "", cp.run_id, 0, "signal payload"))
    if cp.mailbox is not latest.mailbox and latest.mailbox and cp.mailbox != latest.mailbox:
        cp = evolve(cp, mailbox=_merged_mailbox(cp, latest))
    if cp.step == latest.step and latest.calls and cp.calls is not latest.calls:
        journal = checkpoints.merge_calls(latest.calls, cp.calls)
        if journal is not cp.calls:
            cp = evolve(cp, calls=journal)
    return cp if cp.etag == latest.etag else evolve(cp, etag=latest.etag)


def _absorb(latest: Checkpoint, stored: Checkpoint | None, owner: str) -> Checkpoint | None:
    """When the only change since ``latest`` is delivered signals (send_signal saved
    while we held the lease), ``latest`` as it now is in the store. When the stored
    version was written under this run's own ``owner`` id, at or after ``latest``'s
    step, it is this run's own write whose outcome the store could not tell (its answer
    lost, the read-back failed too): adopted. Else None: the lease was lost. A run
    deleted or cancelled meanwhile raises what says so."""
    if stored is None:
        raise run_errors.deleted(latest.run_id, latest.step + 1)
    if stored.status == "cancelled":
        # A warning beside the error raised: nothing more runs.
        log.warning("run %r was cancelled while it ran; step not saved", latest.run_id)
        raise cancelled(latest.run_id, stored.cancel_reason)
    if (
        stored.owner == owner
        and stored.steps[: len(latest.steps)] == latest.steps
        and (stored.step > latest.step or stored.etag != latest.etag)
    ):
        return _adopted(latest, stored)
    same: tuple[str, ...] = ("owner", "lease_expires", "step", "steps", "attempt", "status")
    if _woken_by_message(latest, stored):
        same = same[:-1]
    if any(getattr(stored, f) != getattr(latest, f) for f in same):
        return None
    if latest.signals.keys() - stored.signals.keys():
        return None
    mark_stored(latest.state, stored.etag)  # send_signal does not touch the state
    signals = freeze(dict(stored.signals), "", stored.run_id, 0, "signal payload")
    absorbed = replace(latest, etag=stored.etag, signals=signals)
    if stored.mailbox is not None:  # messages sent meanwhile (runner.mailbox)
        absorbed = evolve(absorbed, mailbox=_merged_mailbox(latest, stored))
    return absorbed


def _woken_by_message(latest: Checkpoint, stored: Checkpoint) -> bool:
    """Whether the one change of status since ``latest`` -- this run saved as waiting
    for a message, its lease released -- is ``send_message`` waking it: the run is
    taking itself back for a message that was there already (``RunProgram.suspend``)."""
    return (
        latest.status == "waiting"
        and latest.receiving is not None
        and stored.status == "running"
        and latest.owner is None
        and stored.owner is None
    )


def _merged_mailbox(ours: Checkpoint, theirs: Checkpoint) -> object:
    """The run's mailbox as this run changed it (messages consumed) and as senders did
    (messages added), frozen as the runner keeps it."""
    box = mailbox.merged(ours.mailbox, theirs.mailbox)
    return None if box is None else freeze(box, "", ours.run_id, 0, "mailbox message")


def _adopted(latest: Checkpoint, stored: Checkpoint) -> Checkpoint:
    """``stored``, a version this run wrote without learning it had (a save whose
    outcome was unknown), as the keeper's latest write: frozen as the runner keeps it."""
    log.info(
        "run %r: a save whose outcome was unknown had landed (read back: this run's own); "
        "going on from it",
        latest.run_id,
    )
    run_id = latest.run_id
    if stored.step == latest.step:  # saves within a step never change its state
        mark_stored(latest.state, stored.etag)
        state: Any = latest.state
    else:
        state = frozen_state(stored.state, run_id, stored_as=stored.etag)
    box = stored.mailbox
    return evolve(
        stored,
        state=state,
        mailbox=None if box is None else freeze(dict(box), "", run_id, 0, "mailbox message"),
        signals=freeze(dict(stored.signals), "", run_id, 0, "signal payload"),
        calls=call_records(freeze(dict(r), "", run_id, 0, "call result") for r in stored.calls),
    )


def _stored(sent: Checkpoint, saved: Checkpoint) -> Checkpoint:
    """What the store now holds: ``saved``, sharing the frozen state that was sent."""
    mark_stored(sent.state, saved.etag)
    forget_base(sent.calls)
    if saved.state is not sent.state:
        saved = replace(saved, state=sent.state)
    return saved
