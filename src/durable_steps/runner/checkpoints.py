"""What each checkpoint of a claimed run holds, and the errors a run raises: pure
functions of the run's last checkpoint, which ``run.RunProgram`` saves.

- ``after_step``: a step returned; its updates merged, its journal dropped, the next
  step's first attempt (or the run completed and its lease released);
- ``retrying``: a step failed and is tried again: the next attempt counted first;
- ``failed``: a step failed for good: the error recorded, the lease released;
- ``waiting``: a step waits for a signal or a timer: the journal entry that says
  until when, the lease released;
- ``woken``: the awaited signal came while the step suspended: the next attempt;
- ``released`` / ``stopped``: the lease given back as the run stands (``stopped``:
  at a step boundary, the next step not started after all);
- ``with_record``: a call recorded in the running step's journal.

Every checkpoint made while a step runs keeps the step's journal (its records,
merged with any saved meanwhile: ``merge_calls``), so a step that fails, waits or
loses its lease replays its finished calls on its next attempt.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..seam import attempts, mailbox
from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import DurableError, Suspend
from ..seam.state import CallRecords, call_key, call_records, freeze

NO_LEASE: dict[str, Any] = {"owner": None, "lease_expires": None}


def after_step(
    cp: Checkpoint, i: int, name: str, state: Any, *, last: bool, held: dict[str, Any]
) -> Checkpoint:
    t = time.time()
    log = attempts.end(cp.attempt_log, "completed", t)
    # The next step's first attempt begins now; the last step's records stay alone.
    log = tuple(r for r in log if r[0] == i) if last else attempts.begin(log, i + 1, 1, t)
    return evolve(  # replace(), faster: once per step
        cp,
        step=i,
        steps=(*cp.steps, name),
        state=state,
        status="completed" if last else "running",
        attempt=1,  # the next step starts at once
        first_attempt=1,
        error=None,
        calls=(),
        attempt_log=log,
        updated_at=None,
        **(NO_LEASE if last else held),
    )


def retrying(
    cp: Checkpoint, i: int, exc: BaseException, held: dict[str, Any], pause: float = 0.0
) -> Checkpoint:
    """Step i failed and runs again after ``pause`` s: that attempt ends failed now,
    the next one begins when the pause is over (the log shows the pause between)."""
    error = error_record(i, cp.attempt, exc)
    log = attempts.end(cp.attempt_log, "failed", error["at"], error)
    log = attempts.begin(log, i, cp.attempt + 1, error["at"] + pause)
    return evolve(cp, attempt=cp.attempt + 1, error=error, attempt_log=log, updated_at=None, **held)


def released(cp: Checkpoint, how: str = "released") -> Checkpoint:
    """The lease given back (cancelled, interrupted, stopping): the run stays as it is;
    the running attempt, if any, ended as ``how``."""
    log = attempts.end(cp.attempt_log, how, time.time())
    return evolve(cp, updated_at=None, attempt_log=log, **NO_LEASE)


def stopped(cp: Checkpoint) -> Checkpoint:
    """Released at a step boundary: the next step did not start after all, so the
    attempt counted for it (by the claim, or by the previous step's save) is undone."""
    out = released(evolve(cp, attempt_log=attempts.unbegun(cp.attempt_log)))
    return evolve(out, attempt=cp.attempt - 1)


def interrupted(cp: Checkpoint) -> Checkpoint:
    """Stopped inside a step (at its next call): the lease given back, the attempt
    undone (it runs again under the same number), its record kept as released."""
    return evolve(released(cp), attempt=cp.attempt - 1)


def failed(cp: Checkpoint, i: int, exc: BaseException) -> Checkpoint:
    error = error_record(i, cp.attempt, exc)
    log = attempts.end(cp.attempt_log, "failed", error["at"], error)
    return evolve(released(cp), status="failed", error=error, attempt_log=log)


def waiting(cp: Checkpoint, wait: Suspend) -> Checkpoint:
    calls = cp.calls if wait.record is None else merge_calls(cp.calls, (wait.record,))
    return evolve(
        released(cp, "waiting"),
        status="waiting",
        waiting_for=wait.signal,
        wake_at=wait.wake_at,
        calls=calls,
        receiving=wait.topic,
    )


def woken(cp: Checkpoint, held: dict[str, Any]) -> Checkpoint:
    """Back from a wait whose signal came meanwhile: the step's next attempt, a new
    round of retries, under our lease again."""
    return evolve(
        cp,
        status="running",
        waiting_for=None,
        receiving=None,
        wake_at=None,
        attempt_log=attempts.begin(cp.attempt_log, cp.step + 1, cp.attempt + 1, time.time()),
        attempt=cp.attempt + 1,
        first_attempt=cp.attempt + 1,
        updated_at=None,
        **held,
    )


def with_record(cp: Checkpoint, record: Mapping[str, Any], held: dict[str, Any]) -> Checkpoint:
    if record.get("kind") == "receive" and "seq" in record:
        return received(cp, record, held)
    return evolve(cp, calls=journal_of(cp.calls).plus(record), updated_at=None, **held)


def received(cp: Checkpoint, record: Mapping[str, Any], held: dict[str, Any]) -> Checkpoint:
    """A receive recorded (``runner.mailbox``): its message leaves the mailbox in the
    same save that records it, so it is consumed exactly once."""
    box = mailbox.consumed(cp.mailbox, record["name"], record["seq"])
    return evolve(
        cp,
        calls=journal_of(cp.calls).plus(record),
        mailbox=freeze(box, "", cp.run_id, 0, "mailbox message"),
        updated_at=None,
        **held,
    )


def journal_of(calls: Sequence[Mapping[str, Any]]) -> CallRecords:
    return calls if isinstance(calls, CallRecords) else call_records(calls)


def merge_calls(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> CallRecords:
    """Two views of one step's journal as one, in key order: ``new`` on top of
    ``old``. Of two records of one key the later wins: a result over an attempt
    count, a higher count over a lower (calls gathered under ``run_async`` record
    concurrently, each from its own view)."""
    if isinstance(new, CallRecords) and new.base is old:
        return new  # made on top of old: nothing to merge
    merged = {call_key(r): r for r in old}
    for r in new:
        had = merged.get(key := call_key(r))
        if had is None or had is r or _later(r, had):
            merged[key] = r
    kept = {id(r) for r in old}
    added = tuple(merged[k] for k in sorted(merged) if id(merged[k]) not in kept)
    replaced = tuple(r for r in old if merged[call_key(r)] is not r)
    base = old if isinstance(old, tuple) else tuple(old)  # the stored one: stores know it
    return call_records((merged[k] for k in sorted(merged)), base, added, replaced)


def _later(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if "result" in b:
        return False
    return "result" in a or a.get("attempt", 0) >= b.get("attempt", 0)


def error_type(exc: BaseException) -> str:
    """The name a failure is recorded under: the one its type is imported by --
    ``durable_steps.StoreError`` for ours (which live in ``seam.errors`` and are all
    exported by the package), ``ValueError`` for a builtin, ``module.Class`` else."""
    kind = type(exc)
    name, module = kind.__qualname__, kind.__module__
    if module == DurableError.__module__:
        module = "durable_steps"
    return name if module == "builtins" else f"{module}.{name}"


def error_record(i: int, attempt: int, exc: BaseException) -> dict[str, Any]:
    return {
        "type": error_type(exc),
        # Lone surrogates (a file name decoded with surrogateescape) cannot be stored as
        # JSON text: escape them, so that the failure is recorded all the same.
        "message": str(exc)[:2000].encode("utf-8", "backslashreplace").decode(),
        "step": i,
        "attempt": attempt,
        "at": time.time(),
    }
