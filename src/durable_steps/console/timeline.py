"""A run's timeline as a list of events: what the store knows of where its time went.

The picture (``svg``) is drawn from events alone, so that a new source of facts is a
new producer of events, not a new drawing. The sources: the run's latest checkpoint,
and its history (``run_history``: each kept step's completion time, attempts, size,
call index and attempt records, as ``StepRecord``) through ``sources.history``.

What is drawn, where the engine recorded it (``seam.attempts``, ``seam.callindex``):

- each attempt of a step at its real times: when it began (its claim, a retry, a
  wake-up) and how it ended -- completed, failed (its error), suspended to wait,
  released (a stopping worker), cancelled, or lost (the next claim found no ending: a
  crash or a lost lease; it ended after its last save, ``estimated``);
- the time between two attempts, and after the last one of a failed or waiting run,
  as what it was (``IDLE``): a retry's pause, a failed run until it was resumed, a
  wait, a crashed run until a worker took it again -- never as a long attempt;
- each completed step as a bar from its first attempt's start to its completion, and
  its calls (from its call index) from their start to their end;
- the running step's journal: each recorded call (its start and end), a call being
  retried, a sleep (its wake time), a wait for a signal or a message (its deadline).

A run recorded before attempt logs existed has none: its running step's attempts are
then placed as before (``attempts``): ``attempt`` counts how often the step was
started, ``error`` is the last failure; an attempt that ended with no error recorded
ended in a crash or a lost lease, its boundary placed in the widest gap between the
recorded calls around it and marked as estimated.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durable_steps import Attempt, CallEntry, Checkpoint, StepRecord, owner_label

STEP, CALL, RETRY, SLEEP, WAIT, ERROR, ATTEMPT, SAVED, IDLE = (
    "step", "call", "retry", "sleep", "wait", "error", "attempt", "saved", "idle"
)  # fmt: skip


@dataclass(frozen=True)
class Event:
    """One thing that happened to a run (or is to happen: a wake time).

    ``at`` is when it happened or ended, ``start`` when it began where that is known;
    None: not known. ``task`` names the task inside a step that made a call ("" for
    the step itself)."""

    kind: str
    step: int
    name: str = ""
    at: float | None = None
    start: float | None = None
    task: str = ""
    index: int | None = None
    attempt: int | None = None
    size: int | None = None
    detail: str = ""
    estimated: bool = False
    """True when ``start`` or ``at`` is placed, not recorded (an attempt's boundary)."""
    how: str = ""
    """An attempt's ending (``seam.attempts.HOWS``, ``running``), or what an ``IDLE``
    period followed (the ending of the attempt before it)."""


def size_of(value: Any) -> int:
    return len(json.dumps(value).encode())


def events_of(
    cp: Checkpoint, history: Sequence[StepRecord] = (), now: float | None = None
) -> list[Event]:
    """The events of a run, from its latest checkpoint and its history (if kept)."""
    done = {h.step: h for h in history}
    out: list[Event] = []
    previous: float | None = None
    for i, name in enumerate(cp.steps):
        h = done.get(i)
        at = h.at if h is not None else None
        log = h.attempt_log if h is not None else ()
        began = log[0].began if log else None
        start = began if began is not None else previous if at is not None else None
        out.append(
            Event(
                STEP,
                i,
                name,
                at=at,
                start=start,
                attempt=h.attempts if h is not None else None,
                size=h.size if h is not None else None,
                detail="completed",
            )
        )
        if h is not None:
            out += logged(i, log)
            out += _indexed(i, h.calls or ())
        previous = at
    running = cp.step + 1
    if cp.status != "completed":
        journal = list(_journal(cp, running))
        out += journal
        if cp.error is not None and cp.error.get("step") == running:
            e = cp.error
            out.append(
                Event(
                    ERROR,
                    running,
                    str(e.get("type")),
                    at=_number(e.get("at")),
                    attempt=e.get("attempt"),
                    detail=str(e.get("message", "")),
                )
            )
        log = cp.attempts_of(running)
        out += logged(running, log, cp, now) if log else attempts(cp, journal, now)
    out.append(Event(SAVED, running, str(cp.status), at=cp.updated_at, detail=_saved(cp)))
    return out


def logged(
    step: int, log: Sequence[Attempt], cp: Checkpoint | None = None, now: float | None = None
) -> list[Event]:
    """The attempts of a step as the engine recorded them, and the periods between
    (and after the last, for a run that does not run now) when nothing ran."""
    out: list[Event] = []
    for n, a in enumerate(log):
        last = n == len(log) - 1
        end, estimated, how, detail = _ending(a, cp if last else None, now)
        out.append(
            Event(ATTEMPT, step, f"attempt {a.number}", at=end, start=a.began,
                  attempt=a.number, detail=detail, estimated=estimated, how=how)
        )  # fmt: skip
        after = log[n + 1].began if not last else _idle_until(cp, now)
        if end is not None and after is not None and after > end:
            out.append(
                Event(IDLE, step, how, at=after, start=end, attempt=a.number,
                      detail=_idle(how, after - end, last, cp), how=how)
            )  # fmt: skip
    return out


def _ending(
    a: Attempt, cp: Checkpoint | None, now: float | None
) -> tuple[float | None, bool, str, str]:
    """When attempt ``a`` ended, whether that is estimated, how, and in words; ``cp``:
    the run, when ``a`` is its running step's last attempt."""
    if a.how is not None:
        words = {"lost": _LOST, "failed": f"failed: {a.error_type}: {a.error_message}"}
        lost = a.how == "lost"
        return a.seen if lost else a.ended, lost, a.how, words.get(a.how) or _ENDED[a.how]
    if cp is None:  # an open record in a completed step's history: not expected
        return a.ended, True, "lost", "ended without a record"
    if cp.status == "cancelled":
        return cp.updated_at, False, "cancelled", "cancelled while it ran (cancel_run)"
    if cp.status == "running" and cp.owner is not None:
        return now or cp.updated_at, False, "running", f"running: held by {owner_label(cp.owner)}"
    return (
        cp.updated_at,
        True,
        "lost",
        "stopped without a record (a crash or a lost lease): runs again as the next attempt",
    )


_LOST = (
    "ended without a record: its process crashed or lost its lease (it ended after its "
    "last save; the next claim found it so)"
)
_ENDED = {
    "completed": "completed",
    "waiting": "suspended: the step waits (a signal, a message or a timer), no worker held",
    "released": "released: its worker stopped (shutdown, SIGTERM) and gave the run back; "
    "it runs again as the same attempt",
    "cancelled": "cancelled",
}


def _idle_until(cp: Checkpoint | None, now: float | None) -> float | None:
    """How long a run that does not run now has not run: until now (None: it runs,
    or it is not the run's latest attempt)."""
    if cp is None or now is None or cp.status not in ("failed", "waiting", "cancelled"):
        return None
    return now


def _idle(how: str, seconds: float, last: bool, cp: Checkpoint | None) -> str:
    took = span(seconds)
    if last and cp is not None:
        now = {
            "failed": f"failed: not running for {took} (resume_run runs it again)",
            "waiting": f"{_saved(cp)}: for {took} so far",
        }
        return now.get(str(cp.status), f"cancelled: not running for {took}")
    between = {
        "failed": f"not running for {took} after the failure (a retry's pause, or until resumed)",
        "waiting": f"waited {took} without a worker",
        "lost": f"not running for {took}: no worker held it until the next claim",
    }
    return between.get(how, f"not running for {took}")


def span(seconds: float) -> str:
    """A duration in words: ms, s, min or h."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _indexed(step: int, calls: Sequence[CallEntry]) -> list[Event]:
    """The calls of a completed step, from its call index (never their results)."""
    return [
        Event(CALL, step, c.name, at=c.end, start=c.start, task=c.scope, index=c.index,
              attempt=c.attempt, size=c.size, detail=c.label)
        for c in calls
        if c.end is not None
    ]  # fmt: skip


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _journal(cp: Checkpoint, step: int) -> list[Event]:
    out = []
    for r in cp.calls:
        kind, task, i, name = r.get("kind", "call"), r.get("task", ""), r.get("i"), r["name"]
        if "result" in r:
            out.append(
                Event(CALL, step, name, at=_number(r.get("at")), start=_number(r.get("t0")),
                      task=task, index=i, size=size_of(r["result"]),
                      attempt=r.get("step_attempt"))
            )  # fmt: skip
        elif kind == "call":
            attempt = r.get("attempt")
            out.append(
                Event(RETRY, step, name, task=task, index=i, attempt=attempt,
                      detail=f"failed; attempt {attempt} next")
            )  # fmt: skip
        elif kind == "sleep":
            out.append(Event(SLEEP, step, name, at=_number(r.get("wake_at")), task=task, index=i))
        else:
            deadline = _number(r.get("deadline"))
            out.append(Event(WAIT, step, name, at=deadline, task=task, index=i, detail=kind))
    return out


def _saved(cp: Checkpoint) -> str:
    if cp.status == "cancelled":
        return f"cancelled{f': {cp.cancel_reason}' if cp.cancel_reason else ''}"
    if cp.status == "waiting":
        if cp.receiving:  # the mailbox (runner.mailbox)
            return f"waits for a message on {cp.receiving}"
        return f"waits for signal {cp.waiting_for}" if cp.waiting_for else "asleep"
    return str(cp.status)


def attempts(cp: Checkpoint, journal: Sequence[Event], now: float | None) -> list[Event]:
    """The running step's attempts, each with how it ended and (where the record
    allows) when: see the top of the module."""
    n = cp.attempt
    if n < 1:
        return []
    error = cp.error if cp.error is not None and cp.error.get("step") == cp.step + 1 else None
    failed_at = _number(error.get("at")) if error else None
    failed = error.get("attempt") if error else None
    ends: dict[int, tuple[float | None, bool]] = {}
    times = sorted(e.at for e in journal if e.kind == CALL and e.at is not None)
    unknown = list(range(1, n))
    groups = [(unknown, times)]
    if failed is not None and failed_at is not None and 1 <= failed < n:
        # The one recorded boundary splits the others: earlier ones before it, later after.
        ends[failed] = (failed_at, False)
        groups = [
            ([k for k in unknown if k < failed], [*(t for t in times if t < failed_at), failed_at]),
            ([k for k in unknown if k > failed], [failed_at, *(t for t in times if t > failed_at)]),
        ]
    for numbers, around in groups:
        for k, at in zip(numbers, _gaps(around, len(numbers)), strict=False):
            ends[k] = (at, True)
    out = []
    start: float | None = times[0] if times else None
    start_estimated = False  # (the first call's time: the step began before it)
    for k in range(1, n + 1):
        end, estimated = ends.get(k, (None, False))
        if k == n:
            end, estimated = _current_end(cp, failed_at if failed == n else None, now), False
        out.append(
            Event(
                ATTEMPT,
                cp.step + 1,
                f"attempt {k}",
                at=end,
                start=start,
                attempt=k,
                detail=_how_ended(cp, k, failed),
                estimated=estimated or start_estimated,
            )
        )
        start, start_estimated = end, estimated
    return out


def _gaps(times: list[float], count: int) -> list[float]:
    """``count`` moments for unrecorded attempt boundaries: the middles of the widest
    gaps between consecutive recorded times, in time order (fewer when there are fewer
    gaps: those boundaries are not placed)."""
    gaps = [(b - a, (a + b) / 2) for a, b in itertools.pairwise(times)]
    return sorted(middle for _, middle in sorted(gaps, reverse=True)[:count])


def _current_end(cp: Checkpoint, failed_at: float | None, now: float | None) -> float | None:
    if failed_at is not None:
        return failed_at
    if cp.status == "running" and cp.owner is not None and now is not None:
        return now  # its worker holds it: it runs on
    return cp.updated_at


def _how_ended(cp: Checkpoint, k: int, failed: int | None) -> str:
    if k == cp.attempt:
        return _NOW.get(str(cp.status), "") or (
            f"running: held by {owner_label(cp.owner)}"
            if cp.owner is not None
            else "stopped without a record (a crash or a lost lease): runs again as the next "
            "attempt"
        )
    if k == failed:
        return "failed; retried"
    if k < cp.first_attempt:
        return "ended a round: a failure or a wait (only the last error is kept)"
    if failed is not None and k < failed:
        return "failed or crashed (only the last error is kept)"
    return "ended without a record: a crash or a lost lease"


_NOW = {
    "failed": "failed for good: its retries are used up",
    "waiting": "suspended: waits without a worker",
    "cancelled": "cancelled",
}
