"""A run's timeline as a list of events: what the store knows of where its time went.

The picture (``svg``) is drawn from events alone, so that a new source of facts is a
new producer of events, not a new drawing: today every event comes from the run's
latest checkpoint (``events_of``); the run's history (``run_history``: each kept
step's completion time, attempts and size, as ``StepRecord``) comes in through
``sources.history`` and makes each completed step a bar ending at its time.

What the latest checkpoint tells, and so what is drawn:

- completed steps: their names and order, not when they ran (unless history has them);
- the running step's journal: each recorded call's name, task and the time it returned
  (``at``), a call being retried (its next attempt, no time), a sleep (its wake time),
  a wait for a signal (its deadline);
- the running step's attempts: ``attempt`` counts how often it was started,
  ``first_attempt`` where the current round of retries began, ``error`` the last
  failure (its attempt and time). An attempt that ended with no error recorded ended
  in a crash or a lost lease. When it ended is not recorded: the boundary is placed in
  the widest gap between the recorded calls around it, and marked as estimated
  (``Event.estimated``) -- a crash is a gap (the process was dead) followed by a new
  attempt;
- the last save (``updated_at``), a waiting run's wake time, the lease's holder.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durable_steps import Checkpoint, StepRecord, owner_label

STEP, CALL, RETRY, SLEEP, WAIT, ERROR, ATTEMPT, SAVED = (
    "step", "call", "retry", "sleep", "wait", "error", "attempt", "saved"
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
        out.append(
            Event(
                STEP,
                i,
                name,
                at=at,
                start=previous if at is not None else None,
                attempt=h.attempts if h is not None else None,
                size=h.size if h is not None else None,
                detail="completed",
            )
        )
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
        out += attempts(cp, journal, now)
    out.append(Event(SAVED, running, str(cp.status), at=cp.updated_at, detail=_saved(cp)))
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _journal(cp: Checkpoint, step: int) -> list[Event]:
    out = []
    for r in cp.calls:
        kind, task, i, name = r.get("kind", "call"), r.get("task", ""), r.get("i"), r["name"]
        if "result" in r:
            out.append(
                Event(CALL, step, name, at=_number(r.get("at")), task=task, index=i,
                      size=size_of(r["result"]))
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
            out.append(Event(WAIT, step, name, at=deadline, task=task, index=i))
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
