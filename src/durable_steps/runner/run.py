"""The runner: load the checkpoint, claim the run, run the remaining steps, save after each.

``run(run_id, steps, store)`` loads the run's checkpoint. A live lease of another
worker raises ``RunLeasedError``; a run waiting for a signal that has not come
raises ``RunWaiting``; a completed run returns its state. Otherwise the run is
claimed -- one conditional save records this worker as owner until now +
``lease`` -- and each remaining step runs on the state so far (read-only) and
returns its updates, which are merged and saved with the lease renewed. A step
that raises is retried as its ``Retry`` says, then the run is saved as
``failed``; a step that waits for a signal saves the run as ``waiting``; either
way, and on cancellation, the lease is released and the exception propagates.
A save that finds another writer means the lease was lost: ``LeaseLostError``,
and that step's result is not saved.

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
from dataclasses import replace
from typing import Any, NoReturn

from ..seam.errors import (
    ConflictError,
    DurableError,
    LeaseLostError,
    RunLeasedError,
    RunWaiting,
    StepMismatchError,
    StopRequested,
    Suspend,
)
from ..seam.lease import default_owner, lease_holder
from ..seam.state import FrozenState, freeze, frozen_state, thaw
from ..seam.store import Checkpoint, check_name, check_run_id, evolve
from .requests import Call, Load, Request, Save, Sleep
from .retry import NEVER_RETRIED, ONCE
from .step import Step, StepContext
from .telemetry import Observer, log

_CLAIMS = 3
"""Claims tried before a ConflictError stands (each after a fresh load)."""
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
        self.input = frozen_state({} if input is None else input, self.run_id)
        self.stop = stop or (lambda: False)
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
                    self.cp = yield from self.save(self.stopped())
                    raise StopRequested(
                        f"run {self.run_id!r} released before step {i}: the worker is stopping",
                        run_id=self.run_id,
                    )
                self.cp = yield from self.attempts(i, step)
        except GeneratorExit:
            raise
        except BaseException as exc:
            # Whatever went wrong (a store error, an interrupt during a save), give the
            # lease back so that the next run need not wait for it to expire.
            if self.holding and not self.lost_lease(exc):
                try:
                    self.cp = yield Save(self.released())
                except Exception as release_failed:
                    exc.add_note(f"durable-steps: releasing the lease failed: {release_failed}")
            raise
        log.info("run %r completed (%d steps)", self.run_id, len(self.steps))
        return self.result()

    def claim(self) -> Generator[Request, Any, bool]:
        """Load the run and claim it for this worker; False: no step is left to run."""
        tries = 1
        while True:
            loaded = yield Load(self.run_id)
            self.obs.loaded(loaded)
            claim = self.resume(loaded)
            if claim is None:
                return False
            try:
                self.cp = yield Save(self.obs.claiming(claim))
            except ConflictError:
                # Another worker claimed it between our load and our save (the next load
                # shows its lease), or the store answered from a replica that had not
                # seen the latest write yet (the next load has it): look again.
                log.warning("run %r: another writer saved it while we claimed it", self.run_id)
                if tries == _CLAIMS:
                    raise
                tries += 1
                continue
            self.obs.claimed(self.cp, loaded)
            return True

    def attempts(self, i: int, step: Step) -> Generator[Request, Any, Checkpoint]:
        """Run step i until it returns (retrying as its Retry says) and save its result."""
        while True:
            ctx = StepContext(self.run_id, i, step.name, self.cp.attempt, self.cp.signals)
            try:
                done = self.completed(i, step, (yield Call(step, ctx, self.state)))
            except Suspend as wait:
                self.cp = yield from self.save(self.waiting(wait.signal))
                self.obs.step_ended(wait)
                if wait.signal not in self.cp.signals:
                    raise self.suspended(i, step, wait.signal) from None
                # The signal came while the step suspended: take the run back, go on.
                self.cp = yield from self.save(self.woken())
                continue
            except BaseException as exc:
                if self.lost_lease(exc) or isinstance(exc, GeneratorExit):
                    raise
                if (yield from self.retried(i, step, exc)):
                    continue
                yield from self.fail(i, step, exc)
            saved = yield from self.save(done)
            self.obs.step_ended(None)
            return saved

    def retried(self, i: int, step: Step, exc: BaseException) -> Generator[Request, Any, bool]:
        """Whether step i, failed with ``exc``, is tried again: if so, the next attempt
        is saved (so a crash during the pause counts too) and the pause taken."""
        retry = step.retry or ONCE
        used = self.cp.attempt - self.cp.first_attempt + 1
        if not retry.retries(exc, used):
            return False
        self.cp = yield from self.save(self.retrying(i, exc))
        self.obs.step_ended(exc)
        pause = retry.delay(used)
        log.warning(
            "run %r: step %d %r failed (%s, attempt %d); retrying in %.1f s",
            *(self.run_id, i, step.name, type(exc).__name__, self.cp.attempt - 1, pause),
        )
        yield Sleep(pause)
        return True

    def fail(self, i: int, step: Step, exc: BaseException) -> Generator[Request, Any, NoReturn]:
        """Record that step i failed for good (or was interrupted), release, re-raise."""
        interrupted = isinstance(exc, NEVER_RETRIED)
        self.annotate(exc, i, step)
        log.warning(
            "run %r: step %d %r %s (%s, attempt %d)",
            *(self.run_id, i, step.name, "interrupted" if interrupted else "failed"),
            *(type(exc).__name__, self.cp.attempt),
        )
        try:
            self.cp = yield from self.save(self.released() if interrupted else self.failed(i, exc))
        except LeaseLostError as lost:
            raise lost from exc
        except Exception as save_failed:
            exc.add_note(f"durable-steps: recording this failure failed too: {save_failed}")
        self.obs.step_ended(exc)
        raise exc

    def save(self, cp: Checkpoint) -> Generator[Request, Any, Checkpoint]:
        """Save a checkpoint of a claimed run: a conflict now means the lease was lost."""
        try:
            saved: Checkpoint = yield Save(cp)
        except LeaseLostError:
            raise
        except ConflictError as exc:
            raise self.lost() from exc
        return saved

    # -- what each checkpoint holds ------------------------------------------------------

    def resume(self, loaded: Checkpoint | None) -> Checkpoint | None:
        """Adopt the loaded checkpoint; returns the claim to save, or None when the run
        has nothing left to run. Raises before anything runs when the run is not ours."""
        now = time.time()
        if loaded is None:
            done = not self.steps
            return replace(
                self.cp,
                status="completed" if done else "running",
                workflow=self.workflow,
                **({} if done else self.lease_until(now)),
            )
        given = tuple(s.name for s in self.steps[: len(loaded.steps)])
        if given != loaded.steps:
            raise StepMismatchError(
                f"run {self.run_id!r} completed steps {list(loaded.steps)}, but the step list "
                f"now starts {list(given)}; nothing was run. Keep completed steps as they were "
                "(append new ones only), or use a new run id",
                run_id=self.run_id,
            )
        if self.workflow and loaded.workflow not in (None, self.workflow):
            raise StepMismatchError(
                f"run {self.run_id!r} belongs to workflow {loaded.workflow!r}, not "
                f"{self.workflow!r}; nothing was run. Use that workflow, or a new run id",
                run_id=self.run_id,
            )
        if holder := lease_holder(loaded, self.owner, now):
            log.warning("run %r is leased by %s; nothing ran", self.run_id, holder)
            raise RunLeasedError(
                f"run {self.run_id!r} is leased by {holder} until "
                f"{time.strftime('%H:%M:%S', time.localtime(loaded.lease_expires))} "
                f"({(loaded.lease_expires or now) - now:.0f}s from now); nothing ran and nothing "
                "was written. Another worker is running it: leave it, or run it again after "
                "the lease expires (a crashed worker's lease expires by itself)",
                run_id=self.run_id,
                owner=holder,
                expires_at=loaded.lease_expires,
            )
        self.cp = replace(
            loaded,
            state=frozen_state(loaded.state, self.run_id, stored_as=loaded.etag),
            signals=freeze(dict(loaded.signals), "", self.run_id, 0, "signal payload"),
        )
        if self.cp.status == "waiting" and self.cp.waiting_for not in self.cp.signals:
            raise RunWaiting(
                f"run {self.run_id!r} is still waiting for signal {self.cp.waiting_for!r}; "
                "nothing ran. Deliver it with send_signal() or 'durable-steps runs signal', "
                "then run it again",
                run_id=self.run_id,
                signal=self.cp.waiting_for,
            )
        if self.finished:
            return None
        # The next step was started once more than the checkpoint says: by a worker that
        # crashed in it (or failed, or was interrupted), or by us now. A completed run
        # whose step list grew starts its new step afresh.
        started = self.cp.status != "completed"
        attempt = self.cp.attempt + 1 if started else 1
        # After a failure or a wait, a new round of retries; after a crash, the same one.
        new_round = not started or self.cp.status in ("failed", "waiting")
        new_round = new_round or self.cp.waiting_for is not None
        return replace(
            self.cp,
            status="running",
            workflow=self.workflow or self.cp.workflow,
            attempt=attempt,
            first_attempt=attempt if new_round else self.cp.first_attempt,
            waiting_for=None,
            updated_at=None,
            **self.lease_until(now),
        )

    def result(self) -> dict[str, Any]:
        """The final state for the caller: the one copy a run makes of its whole state."""
        return thaw(self.cp.state)  # type: ignore[no-any-return]

    @property
    def holding(self) -> bool:
        return self.cp.owner == self.owner and self.cp.lease_expires is not None

    @property
    def finished(self) -> bool:
        return self.cp.step + 1 >= len(self.steps)

    @property
    def state(self) -> FrozenState:
        return self.cp.state  # type: ignore[return-value] # frozen by resume()/completed()

    def pending(self) -> Generator[tuple[int, Step], None, None]:
        while not self.finished:
            i = self.cp.step + 1
            yield i, self.steps[i]

    def lease_until(self, now: float) -> dict[str, Any]:
        return {"owner": self.owner, "lease_expires": now + self.lease}

    def completed(self, i: int, step: Step, updates: object) -> Checkpoint:
        if updates is None:
            updates = {}
        if type(updates) is not dict and not isinstance(updates, Mapping):
            raise TypeError(
                f"run {self.run_id!r}: step {i} {step.name!r} returned "
                f"{type(updates).__name__}; return a mapping of updates or None"
            )
        last = i + 1 == len(self.steps)
        return evolve(  # replace(), faster: once per step
            self.cp,
            step=i,
            steps=(*self.cp.steps, step.name),
            state=self.state.updated(updates, self.run_id),
            status="completed" if last else "running",
            attempt=1,  # the next step starts at once
            first_attempt=1,
            error=None,
            updated_at=None,
            **({"owner": None, "lease_expires": None} if last else self.lease_until(time.time())),
        )

    def retrying(self, i: int, exc: BaseException) -> Checkpoint:
        return replace(
            self.cp,
            attempt=self.cp.attempt + 1,
            error=_error(i, self.cp.attempt, exc),
            updated_at=None,
            **self.lease_until(time.time()),
        )

    def failed(self, i: int, exc: BaseException) -> Checkpoint:
        return replace(self.released(), status="failed", error=_error(i, self.cp.attempt, exc))

    def waiting(self, signal: str) -> Checkpoint:
        return replace(self.released(), status="waiting", waiting_for=signal)

    def woken(self) -> Checkpoint:
        """Back from a wait whose signal came meanwhile: the step's next attempt, a new
        round of retries, under our lease again."""
        return replace(
            self.cp,
            status="running",
            waiting_for=None,
            attempt=self.cp.attempt + 1,
            first_attempt=self.cp.attempt + 1,
            updated_at=None,
            **self.lease_until(time.time()),
        )

    def released(self) -> Checkpoint:
        """The lease given back (cancelled, interrupted, stopping): the run stays as it is."""
        return replace(self.cp, owner=None, lease_expires=None, updated_at=None)

    def stopped(self) -> Checkpoint:
        """Released at a step boundary: the next step did not start after all, so the
        attempt counted for it (by the claim, or by the previous step's save) is undone."""
        return replace(self.released(), attempt=self.cp.attempt - 1)

    def lost_lease(self, exc: BaseException) -> bool:
        """Whether ``exc`` says this run lost its lease (not, say, a nested run's)."""
        return isinstance(exc, LeaseLostError) and getattr(exc, "run_id", None) == self.run_id

    def lost(self) -> LeaseLostError:
        log.warning("run %r: lost its lease to another worker; step not saved", self.run_id)
        return LeaseLostError(
            f"run {self.run_id!r}: another worker took over this run's lease while step "
            f"{self.cp.step + 1} ran (it expired: a step or a pause outlived the lease "
            "without a heartbeat, or the store was unreachable); this step's result was "
            "not saved. Raise lease=, or keep steps async under run_async",
            run_id=self.run_id,
        )

    def suspended(self, i: int, step: Step, signal: str) -> RunWaiting:
        log.info("run %r is waiting for signal %r in step %d", self.run_id, signal, i)
        return RunWaiting(
            f"run {self.run_id!r} is waiting for signal {signal!r} in step {i} "
            f"{step.name!r}; its lease is released. Deliver it with send_signal() or "
            f"'durable-steps runs signal {self.run_id} {signal}', then run it again "
            "(or let recover() do it)",
            run_id=self.run_id,
            signal=signal,
        )

    def annotate(self, exc: BaseException, i: int, step: Step) -> None:
        kept = f"steps 0..{i - 1} stay checkpointed" if i else "no step had completed"
        exc.add_note(
            f"durable-steps: run {self.run_id!r} failed in step {i} {step.name!r} (attempt "
            f"{self.cp.attempt}); {kept}; running it again resumes at this step"
        )


def _error(i: int, attempt: int, exc: BaseException) -> dict[str, Any]:
    kind = type(exc)
    name, module = kind.__qualname__, kind.__module__
    if module == DurableError.__module__:
        module = "durable_steps._errors"  # the path stored checkpoints of earlier versions name
    if module != "builtins":
        name = f"{module}.{name}"
    return {
        "type": name,
        # Lone surrogates (a file name decoded with surrogateescape) cannot be stored as
        # JSON text: escape them, so that the failure is recorded all the same.
        "message": str(exc)[:2000].encode("utf-8", "backslashreplace").decode(),
        "step": i,
        "attempt": attempt,
        "at": time.time(),
    }
