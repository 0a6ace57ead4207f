"""The runner: load the checkpoint, claim the run, run the remaining steps, save after each.

``run(run_id, steps, store)`` loads the run's checkpoint and claims it (``claim``: a
live lease of another worker, a cancelled run, a waiting run that is not due and a
step list that no longer fits raise before anything runs; a completed run returns
its state) -- one conditional save records this worker as owner until now +
``lease``. Then each remaining step runs on the state so far (read-only) and
returns its updates, which are merged and saved with the lease renewed. Inside a
step, each ``call``, ``sleep`` and ``wait_for_signal`` is numbered in the step's
journal (``journal``); a finished call is a save of its own (``record``), so a step
that runs again replays its finished calls instead of making them again. A step
that raises is retried as its ``Retry`` says, then the run is saved as ``failed``;
a step that waits for a signal or sleeps saves the run as ``waiting``; either way,
and on cancellation, the lease is released and the exception propagates. A save
that finds another writer means the lease was lost (``LeaseLostError``) or the run
was cancelled (``RunCancelledError``): that step's result is not saved. What each
of those checkpoints holds is ``checkpoints``'.

All of that lives once, in ``RunProgram.program``: a generator that yields what it
needs done -- load, save, call a step, sleep -- and is resumed with the result.
``run`` and ``run_async`` (in ``drivers``) carry those requests out, the one with
blocking calls and a heartbeat thread, the other with awaits and a heartbeat task,
so the two cannot drift apart.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, NoReturn

from ..seam import attempts, mailbox
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import (
    ConflictError,
    InvalidStateError,
    LeaseLostError,
    RunCancelledError,
    StopRequested,
    StoreError,
    Suspend,
)
from ..seam.lease import default_owner
from ..seam.rules import check_name, check_run_id
from ..seam.state import FrozenState, call_records, freeze, frozen_state, thaw
from . import checkpoints, deadlines
from . import errors as run_errors
from .children import notify_parent, parent_cancelled
from .claim import MAX_ATTEMPTS, check_max_attempts, claim_for, exhausted
from .journal import Journal
from .requests import Call, Load, Request, Save, Sleep
from .retry import INCURABLE, NEVER_RETRIED, ONCE
from .step import Step, StepContext
from .telemetry import Observer, log
from .typed import declared, updates_of
from .versions import check_pinned, check_version, pin

_CLAIMS = 20
"""Claims tried before a ConflictError stands (each after a fresh load). Senders write a
run's head too (signals, messages, cancels): racing senders can make several claims in
a row lose, though nobody else holds the run. A run that another worker took is refused
at the next load (``claim_for``: its lease), so more tries never take a held run."""
Program = Generator[Request, Any, dict[str, Any]]


class RunProgram:
    """The semantics of one call to run()/run_async(), free of any I/O."""

    def __init__(
        self,
        run_id: str,
        steps: Sequence[Step],
        *,
        lease: float = 60.0,
        owner: str | None = None,
        workflow: str | None = None,
        input: Mapping[str, Any] | None = None,
        stop: Callable[[], bool] | None = None,
        max_attempts: int | None = MAX_ATTEMPTS,
        version: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self.run_id = check_run_id(run_id)
        self.steps = list(steps)
        for s in self.steps:
            if not isinstance(s, Step) or not isinstance(s.name, str) or not s.name:
                raise TypeError(f"steps must be Step(name, fn) with a non-empty str name: {s!r}")
        dupes = sorted(n for n, k in Counter(s.name for s in self.steps).items() if k > 1)
        if dupes:
            raise ValueError(f"run {run_id!r}: duplicate step names {dupes}; names must be unique")
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not lease > 0:
            raise ValueError(f"lease must be a positive number of seconds, not {lease!r}")
        self.lease = float(lease)
        self.owner = default_owner() if owner is None else check_name(owner, "owner")
        self.workflow = workflow
        self.version = check_version(version)  # lifecycle: the code's version (``versions``)
        self.max_attempts = check_max_attempts(max_attempts)
        self.input = frozen_state({} if input is None else input, self.run_id)
        self.stop = stop or (lambda: False)
        self.timeout = deadlines.check_timeout(timeout, "timeout")
        # signals frozen from the start: a store then knows they were checked
        no_signals = freeze({}, "", self.run_id, 0, "signal payload")
        self.cp = Checkpoint(run_id=self.run_id, step=-1, state=self.input, signals=no_signals)
        self.obs = Observer(self.run_id, workflow)

    # -- the program ---------------------------------------------------------------------

    def program(self) -> Program:
        if not (yield from self.claim()):
            log.debug("run %r has no step left to run", self.run_id)
            return self.result()
        try:
            for i, step in self.pending():
                if self.stop():
                    self.cp = yield from self.save(checkpoints.stopped(self.cp))
                    raise StopRequested(
                        f"run {self.run_id!r} released before step {i}: the worker is stopping",
                        run_id=self.run_id,
                    )
                if self.cp.parent is not None and (why := (yield from parent_cancelled(self.cp))):
                    released = checkpoints.released(self.cp, "cancelled")
                    cancelled = evolve(released, status="cancelled")
                    self.cp = yield from self.save(evolve(cancelled, cancel_reason=why))
                    raise run_errors.cancelled(self.run_id, why)
                self.cp = yield from self.attempts(i, step)
        except GeneratorExit:
            raise
        except BaseException as exc:
            # Whatever went wrong (a store error, an interrupt during a save), give the
            # lease back so that the next run need not wait for it to expire.
            if self.holding and not self.lost(exc):
                try:
                    self.cp = yield Save(checkpoints.released(self.cp))
                except Exception as release_failed:
                    exc.add_note(f"durable-steps: releasing the lease failed: {release_failed}")
            raise
        log.info("run %r completed (%d steps)", self.run_id, len(self.steps))
        yield from notify_parent(self.cp)  # child runs: a parent waits for this one
        return self.result()

    def claim(self) -> Generator[Request, Any, bool]:
        """Load the run and claim it for this worker; False: no step is left to run."""
        tries = 1
        while True:
            loaded = yield Load(self.run_id)
            self.obs.loaded(loaded)
            if loaded is not None and deadlines.passed(loaded):  # cancelled, not run
                self.adopt(loaded)
                try:
                    self.cp = yield Save(deadlines.expired(self.cp))
                except ConflictError:
                    continue  # changed meanwhile: look again
                raise deadlines.error(self.run_id)
            claim = self.first_claim() if loaded is None else self.claim_of(loaded)
            if claim is None:
                return False
            poisoned = exhausted(claim, self.steps, self.max_attempts)
            try:
                if poisoned is not None:  # failed instead, as the run stands
                    self.cp = yield Save(checkpoints.failed(self.cp, claim.step + 1, poisoned))
                else:
                    self.cp = yield Save(self.obs.claiming(claim))
            except ConflictError:
                # Another worker claimed it between our load and our save (the next load
                # shows its lease), or the store answered from a replica that had not
                # seen the latest write yet (the next load has it): look again.
                # A warning: no step ran yet; the claim is tried again from a fresh load.
                log.warning("run %r: another writer saved it while we claimed it", self.run_id)
                if tries == _CLAIMS:
                    raise
                tries += 1
                continue
            except StoreError as exc:
                yield from self.unclaim(exc)
                raise
            if poisoned is not None:
                # A warning beside the failed run saved: nothing more runs.
                log.warning("run %r failed: %s", self.run_id, poisoned)
                raise poisoned
            self.obs.claimed(self.cp, loaded)
            return True

    def unclaim(self, exc: StoreError) -> Generator[Request, Any, None]:
        """The claim's save failed with its outcome unknown (its answer lost, the
        read-back failing too): if it landed, the run is held by this call, which is
        ending -- a caller retrying the run (a web handler) would meet its lease until
        it expires. Read back, a version of this owner's is released; else nothing."""
        try:
            stored = yield Load(self.run_id)
            if stored is None or stored.owner != self.owner or stored.lease_expires is None:
                return
            self.adopt(stored)
            self.cp = yield Save(checkpoints.released(self.cp))
            log.info("run %r: its claim had landed unconfirmed; lease released", self.run_id)
        except Exception as release_failed:
            exc.add_note(f"durable-steps: releasing the lease failed: {release_failed}")

    def attempts(self, i: int, step: Step) -> Generator[Request, Any, Checkpoint]:
        """Run step i until it returns (retrying as its Retry says) and save its result.
        Once a record of its journal could not be saved, what the step did after does
        not count (it may have caught the ``StepInterrupted``): ``unsaved`` decides."""
        while True:
            cp = self.cp
            journal = Journal(self, cp.calls, step.name, lenient=step.replay == "lenient")
            ctx = StepContext(
                self.run_id, i, step.name, cp.attempt, cp.signals, cp.first_attempt, None, journal
            )
            try:
                updates = yield Call(step, ctx, self.state)
            except GeneratorExit:
                raise
            except BaseException as exc:
                if journal.failed is None and isinstance(exc, Suspend):
                    # Suspended while records of its were never asked for: failed before
                    # the wait is saved (``Journal.unasked``).
                    journal.failed = journal.unasked(suspended=True)
                if journal.failed is None and (yield from self.ended(i, step, exc)):
                    continue
            else:
                if journal.failed is None:
                    try:
                        done = self.completed(i, step, updates)
                    except Exception as exc:  # not a mapping, not JSON: it would be again
                        yield from self.fail(i, step, exc)
                    # Completed while records of its were never asked for: failed before
                    # the save that would drop them (``Journal.unasked``).
                    journal.failed = journal.unasked()
                    if journal.failed is None:
                        saved = yield from self.keep(i, step, done)
                        self.obs.step_ended(None)
                        return saved
            yield from self.unsaved(i, step, journal)

    def ended(self, i: int, step: Step, exc: BaseException) -> Generator[Request, Any, bool]:
        """Step i raised ``exc``: True when it runs again now (a retry, or a signal that
        came while it suspended); else the run is saved as it stands and ``exc`` raised."""
        if isinstance(exc, Suspend):
            return (yield from self.suspend(i, step, exc))
        if self.lost(exc):
            raise exc
        if (yield from self.retried(i, step, exc)):
            return True
        return (yield from self.fail(i, step, exc))

    def unsaved(self, i: int, step: Step, journal: Journal) -> Generator[Request, Any, NoReturn]:
        """Step i's journal could not go on (``Journal.failed``): a record's save failed,
        or the run is no longer ours. A refusal no retry can cure (``INCURABLE``: the
        record over the size limit...) fails the run once; anything else -- a lost
        lease, a cancelled run, an unreachable store -- propagates as it is, the run
        left to a later attempt (``max_attempts`` bounds how often)."""
        error = journal.failed
        assert error is not None
        if isinstance(error, StopRequested):  # stopped at its next call: not an attempt
            self.cp = yield from self.save(checkpoints.interrupted(self.cp))
            self.obs.step_ended(error)
            raise error
        if isinstance(error, INCURABLE):
            yield from self.fail(i, step, error)
        if not self.lost(error):
            # A warning beside the error raised: the call whose record failed was never
            # recorded, so it runs again when the step does; the recorded ones replay.
            log.warning(
                "run %r: step %d %r could not record a call (%s: %s); its attempt ends here",
                *(self.run_id, i, step.name, type(error).__name__, error),
            )
        self.obs.step_ended(error)
        raise error

    def keep(self, i: int, step: Step, cp: Checkpoint) -> Generator[Request, Any, Checkpoint]:
        """Save a checkpoint of step i's attempt. A refusal no retry can cure -- over the
        size limit, not JSON, its step names wrong (``INCURABLE``) -- fails the run once,
        with that error recorded: every later attempt would be refused the same way."""
        try:
            return (yield from self.save(cp))
        except INCURABLE as exc:
            return (yield from self.fail(i, step, exc))

    def suspend(self, i: int, step: Step, wait: Suspend) -> Generator[Request, Any, bool]:
        """Step i waits: the run saved as waiting, its lease released. True when the
        signal came meanwhile and the run was taken back: the step runs again now."""
        self.cp = yield from self.keep(i, step, checkpoints.waiting(self.cp, wait))
        self.obs.step_ended(wait)
        came = wait.signal is not None and wait.signal in self.cp.signals
        if wait.topic is not None:  # a message that came meanwhile (runner.mailbox)
            came = bool(mailbox.pending(self.cp.mailbox, wait.topic))
        if not came:
            raise run_errors.suspended(self.run_id, i, step, wait) from None
        self.cp = yield from self.keep(i, step, checkpoints.woken(self.cp, self.held()))
        return True

    def retried(self, i: int, step: Step, exc: BaseException) -> Generator[Request, Any, bool]:
        """Whether step i, failed with ``exc``, is tried again: if so, the next attempt
        is saved (so a crash during the pause counts too) and the pause taken."""
        retry = step.retry or ONCE
        used = self.cp.attempt - self.cp.first_attempt + 1
        if not retry.retries(exc, used):
            return False
        pause = retry.delay(used)
        again = checkpoints.retrying(self.cp, i, exc, self.held(), pause)
        self.cp = yield from self.keep(i, step, again)
        self.obs.step_ended(exc)
        # A warning: the retry replays the calls recorded; none runs again.
        log.warning(
            "run %r: step %d %r failed (%s, attempt %d); retrying in %.1f s",
            *(self.run_id, i, step.name, type(exc).__name__, self.cp.attempt - 1, pause),
        )
        yield Sleep(pause)
        return True

    def fail(self, i: int, step: Step, exc: BaseException) -> Generator[Request, Any, NoReturn]:
        """Record that step i failed for good (or was interrupted), release, re-raise."""
        interrupted = isinstance(exc, NEVER_RETRIED)
        run_errors.annotate(exc, self.run_id, i, step, self.cp.attempt)
        # A warning beside the error raised and the run saved failed or interrupted.
        log.warning(
            "run %r: step %d %r %s (%s, attempt %d)",
            *(self.run_id, i, step.name, "interrupted" if interrupted else "failed"),
            *(type(exc).__name__, self.cp.attempt),
        )
        ended = (
            checkpoints.released(self.cp) if interrupted else checkpoints.failed(self.cp, i, exc)
        )
        try:
            self.cp = yield from self.save(ended)
        except (LeaseLostError, RunCancelledError) as lost:
            raise lost from exc
        except Exception as save_failed:
            exc.add_note(f"durable-steps: recording this failure failed too: {save_failed}")
        else:
            yield from notify_parent(self.cp)  # child runs: a parent waits for this one
        self.obs.step_ended(exc)
        raise exc

    def record(
        self, record: Mapping[str, Any], still: Callable[[], object]
    ) -> Generator[Request, Any, Checkpoint]:
        """A record of the running step's journal saved: a checkpoint of its own.
        ``still`` raises, under the driver's save lock, if the step has ended meanwhile."""
        self.cp = yield from self.save(checkpoints.with_record(self.cp, record, self.held()), still)
        return self.cp

    def save(
        self, cp: Checkpoint, guard: Callable[[], object] | None = None
    ) -> Generator[Request, Any, Checkpoint]:
        """Save a checkpoint of a claimed run: a conflict now means the lease was lost
        (the keeper tells a cancelled or deleted run apart)."""
        if cp.status in ("running", "waiting") and deadlines.passed(self.cp):
            # Past the run's deadline: saved as cancelled instead, as the run stands.
            self.cp = yield from self.save(deadlines.expired(self.cp), guard)
            # A warning beside the error raised: the run is saved cancelled; nothing more runs.
            log.warning("run %r passed its deadline: cancelled", self.run_id)
            raise deadlines.error(self.run_id)
        try:
            saved: Checkpoint = yield Save(cp, guard)
        except LeaseLostError:
            raise
        except ConflictError as exc:
            raise run_errors.lost(self.run_id, self.cp.step + 1) from exc
        return saved

    # -- the run's checkpoint ------------------------------------------------------------

    def first_claim(self) -> Checkpoint:
        """The claim of a run that has no checkpoint yet."""
        done = not self.steps
        return evolve(
            deadlines.begun(self.cp, self.timeout),
            status="completed" if done else "running",
            workflow=self.workflow,
            version=self.version if self.workflow else None,
            attempt_log=() if done else attempts.begin((), 0, 1, time.time()),
            **({} if done else self.held()),
        )

    def claim_of(self, loaded: Checkpoint) -> Checkpoint | None:
        """Adopt the loaded checkpoint (frozen: validated once, never aliased) and claim
        it, or None when nothing is left to run (``claim.claim_for``)."""
        self.adopt(loaded)
        self.cp = deadlines.begun(self.cp, self.timeout) if loaded.status == "running" else self.cp
        check_pinned(self.cp, self.workflow, self.version)
        claim = claim_for(self.cp, self.steps, self.workflow, self.owner, self.held())
        return pin(claim, self.workflow, self.version)

    def adopt(self, loaded: Checkpoint) -> None:
        """The loaded checkpoint as this run's, frozen: validated once, never aliased."""
        self.cp = evolve(
            loaded,
            state=frozen_state(loaded.state, self.run_id, stored_as=loaded.etag),
            signals=freeze(dict(loaded.signals), "", self.run_id, 0, "signal payload"),
            calls=call_records(
                freeze(dict(r), "", self.run_id, 0, "call result") for r in loaded.calls
            ),
            mailbox=frozen_mailbox(loaded),
        )

    def completed(self, i: int, step: Step, updates: object) -> Checkpoint:
        updates = updates_of(declared(step.fn, step.returns), updates, step.name, self.run_id)
        if updates is None:
            updates = {}
        if type(updates) is not dict and not isinstance(updates, Mapping):
            raise InvalidStateError(  # (also a TypeError)
                f"run {self.run_id!r}: step {i} {step.name!r} returned "
                f"{type(updates).__name__}; return a mapping of updates or None",
                run_id=self.run_id,
            )
        state = self.state.updated(updates, self.run_id)
        last = i + 1 == len(self.steps)
        return checkpoints.after_step(self.cp, i, step.name, state, last=last, held=self.held())

    def held(self) -> dict[str, Any]:
        """The lease fields of a checkpoint this worker saves now."""
        return {"owner": self.owner, "lease_expires": time.time() + self.lease}

    def result(self) -> dict[str, Any]:
        """The final state for the caller: the one copy a run makes of its whole state."""
        return thaw(self.cp.state)  # type: ignore[no-any-return]

    def lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` says this run is no longer ours -- its lease was lost, or it
        was cancelled or deleted (not, say, a nested run's)."""
        return (
            isinstance(exc, LeaseLostError | RunCancelledError)
            and getattr(exc, "run_id", None) == self.run_id
        )

    @property
    def holding(self) -> bool:
        return self.cp.owner == self.owner and self.cp.lease_expires is not None

    @property
    def state(self) -> FrozenState:
        return self.cp.state  # type: ignore[return-value] # frozen by claim_of()/completed()

    def pending(self) -> Generator[tuple[int, Step], None, None]:
        while self.cp.status != "completed" and self.cp.step + 1 < len(self.steps):
            i = self.cp.step + 1
            yield i, self.steps[i]


def frozen_mailbox(cp: Checkpoint) -> Any:
    """A loaded run's mailbox, frozen as the runner keeps it (a store then knows it was
    checked); None when it has none."""
    if cp.mailbox is None:
        return None
    return freeze(dict(cp.mailbox), "", cp.run_id, 0, "mailbox message")
