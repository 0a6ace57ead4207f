"""The errors a run raises, made in one place: each names the run and says what happened
and what to do next (the classes are ``seam.errors``'; the errors every store raises
are made there too). Where a run gives up its step, it logs why."""

from __future__ import annotations

import time

from ..seam.checkpoint import Checkpoint
from ..seam.errors import (
    LeaseLostError,
    RunCancelledError,
    RunLeasedError,
    RunNotFoundError,
    RunWaiting,
    Suspend,
)
from .step import Step
from .telemetry import log


def leased(cp: Checkpoint, holder: str) -> RunLeasedError:
    expires = cp.lease_expires or time.time()
    # A warning beside the error raised: nothing ran.
    log.warning("run %r is leased by %s; nothing ran", cp.run_id, holder)
    return RunLeasedError(
        f"run {cp.run_id!r} is leased by {holder} until "
        f"{time.strftime('%H:%M:%S', time.localtime(expires))} "
        f"({expires - time.time():.0f}s from now); nothing ran and nothing was written. "
        "Another worker is running it: leave it, or run it again after the lease expires "
        "(a crashed worker's lease expires by itself)",
        run_id=cp.run_id,
        owner=holder,
        expires_at=cp.lease_expires,
    )


def cancelled(run_id: str, reason: str | None) -> RunCancelledError:
    why = f" ({reason})" if reason else ""
    return RunCancelledError(
        f"run {run_id!r} was cancelled{why}; nothing more of it runs. Start a new run "
        "(another run id) to do the work again",
        run_id=run_id,
        reason=reason,
    )


def not_found(run_id: str, what: str) -> RunNotFoundError:
    """The error of a call about a run that does not exist: ``what`` did not happen."""
    return RunNotFoundError(
        f"run {run_id!r} does not exist, so {what}; check the run id ('durable-steps runs list')",
        run_id=run_id,
    )


def still_waiting(cp: Checkpoint) -> RunWaiting:
    if cp.receiving is not None:
        what = (
            f"is still waiting for a message on topic {cp.receiving!r}; nothing ran. Send "
            "one with send_message() or 'durable-steps runs send', then run it again"
        )
        if cp.wake_at is not None:
            deadline = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(cp.wake_at))
            what += f" (or after its deadline, {deadline})"
    elif cp.waiting_for is None:
        until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(cp.wake_at or 0))
        what = f"is asleep until {until}; nothing ran. Run it again after that"
    else:
        what = (
            f"is still waiting for signal {cp.waiting_for!r}; nothing ran. Deliver it with "
            "send_signal() or 'durable-steps runs signal', then run it again"
        )
        if cp.wake_at is not None:
            deadline = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(cp.wake_at))
            what += f" (or after its deadline, {deadline})"
    return RunWaiting(
        f"run {cp.run_id!r} {what}",
        run_id=cp.run_id,
        signal=cp.waiting_for,
        wake_at=cp.wake_at,
        topic=cp.receiving,
    )


def lost(run_id: str, step: int) -> LeaseLostError:
    # A warning beside the error raised: this worker stops at once; the new holder replays what was
    # recorded.
    log.warning("run %r: lost its lease to another worker; step not saved", run_id)
    return LeaseLostError(
        f"run {run_id!r}: another worker took over this run's lease while step {step} ran "
        "(it expired: a step or a pause outlived the lease without a heartbeat, or the "
        "store was unreachable); this step's result was not saved. Raise lease=, or keep "
        "steps async under run_async",
        run_id=run_id,
    )


def deleted(run_id: str, step: int) -> LeaseLostError:
    # A warning beside the error raised: nothing more runs.
    log.warning("run %r was deleted while it ran; step not saved", run_id)
    return LeaseLostError(
        f"run {run_id!r} was deleted while step {step} ran (runs delete, prune, or the "
        "store's own expiry); this step's result was not saved and nothing more runs. Run "
        "it again to start over",
        run_id=run_id,
    )


def suspended(run_id: str, i: int, step: Step, wait: Suspend) -> RunWaiting:
    if wait.topic is not None:
        log.info("run %r is waiting for a message on %r in step %d", run_id, wait.topic, i)
        what = f"is waiting for a message on topic {wait.topic!r} in step {i} {step.name!r}"
        then = (
            f"send one with send_message() or 'durable-steps runs send {run_id} "
            f"{wait.topic} PAYLOAD': it wakes the run for the workers (or run it again)"
        )
        if wait.wake_at is not None:
            deadline = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wait.wake_at))
            then += f"; its deadline is {deadline}"
    elif wait.signal is None:
        until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wait.wake_at))
        log.info("run %r sleeps in step %d until %s", run_id, i, until)
        what = f"sleeps in step {i} {step.name!r} until {until}"
        then = "run it again after that (recover() and the worker do)"
    else:
        log.info("run %r is waiting for signal %r in step %d", run_id, wait.signal, i)
        what = f"is waiting for signal {wait.signal!r} in step {i} {step.name!r}"
        then = (
            f"deliver it with send_signal() or 'durable-steps runs signal {run_id} "
            f"{wait.signal}', then run it again (or let recover() do it)"
        )
        if wait.wake_at is not None:
            deadline = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wait.wake_at))
            then += f"; its deadline is {deadline}"
    return RunWaiting(
        f"run {run_id!r} {what}; its lease is released. {then[:1].upper()}{then[1:]}",
        run_id=run_id,
        signal=wait.signal,
        wake_at=wait.wake_at,
        topic=wait.topic,
    )


def annotate(exc: BaseException, run_id: str, i: int, step: Step, attempt: int) -> None:
    kept = f"steps 0..{i - 1} stay checkpointed" if i else "no step had completed"
    exc.add_note(
        f"durable-steps: run {run_id!r} failed in step {i} {step.name!r} (attempt "
        f"{attempt}); {kept}; running it again resumes at this step"
    )
