"""The attempt log: when each attempt of a step began and how it ended, as the engine
records it (``Checkpoint.attempt_log``), so that a page or a command tells what
happened instead of guessing from the last error alone.

Why in the checkpoint: every attempt already begins and ends with a save -- the claim
(or the previous step's completing save, or a retry's or a wake-up's save) begins it;
the step's completing save, a failure, a wait, a release or a cancel ends it -- so the
record costs no write of its own on any store (file, memory, Cosmos DB, or a store of
a third party: it is one more field of the head, ``seam.document``). A call's save
carries it unchanged (a few dozen bytes).

What one record says (stored compactly, a JSON list): ``[step, attempt, began, ended,
how, error type, error message, last seen]``. ``how`` is one of ``HOWS``:

- ``completed``, ``failed`` (with the error's type and message; retried or for good),
  ``waiting`` (suspended for a signal, a message or a timer), ``released`` (the lease
  given back as the run stood: a stopping worker, SIGTERM, an interrupt),
  ``cancelled``;
- ``lost``: the next claim found it with no ending -- its process crashed or lost its
  lease; ``ended`` is unknown, ``last seen`` is the last save it made;
- None: it runs now (or ended in a way a reader infers from the run: cancelled from
  outside by ``cancel_run``).

Bounded: the records of the running step and of the step completed just before (so the
completing save carries the finished step's records, which history keeps beside its
call index, ``seam.callindex``), at most ``LIMIT`` per step (the last ones). Read
leniently: a malformed record is skipped, since the log describes and never replays.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .callindex import _int, _num, _str

LIMIT = 12
"""Records kept per step: the last ones (a poison step's tenth crash stays visible)."""
HOWS = ("completed", "failed", "waiting", "released", "cancelled", "lost")

Log = tuple[list[Any], ...]


@dataclass(frozen=True)
class Attempt:
    """One attempt of a step, as the attempt log keeps it."""

    step: int
    number: int
    began: float | None
    ended: float | None
    """When it ended; None: it runs, or ended without a record (``how`` says)."""
    how: str | None
    """One of ``HOWS``; None: running (or cancelled from outside, see the run)."""
    error_type: str | None = None
    error_message: str | None = None
    seen: float | None = None
    """A lost attempt's last save: it ended after this, before the next began."""


def read(stored: Iterable[Any] | None) -> tuple[Attempt, ...]:
    """The records of a stored log, oldest first (malformed ones skipped)."""
    out = []
    for row in stored or ():
        if not isinstance(row, list | tuple) or len(row) < 5:
            continue
        step, number = _int(row[0]), _int(row[1])
        if step is None or number is None:
            continue
        rest = [*row[5:8], None, None, None][:3]
        how = _str(row[4])
        out.append(
            Attempt(
                step,
                number,
                _num(row[2]),
                _num(row[3]),
                how if how in HOWS else None,
                _str(rest[0]),
                _str(rest[1]),
                _num(rest[2]),
            )
        )
    return tuple(out)


def of_step(stored: Iterable[Any] | None, step: int) -> tuple[Attempt, ...]:
    """The records of one step."""
    return tuple(a for a in read(stored) if a.step == step)


def stored_of_step(stored: Sequence[Any] | None, step: int) -> list[list[Any]]:
    """The stored rows of one step (what history keeps of a completed step)."""
    return [list(r) for r in stored or () if isinstance(r, list | tuple) and r and r[0] == step]


def begin(log: Sequence[Any], step: int, number: int, at: float) -> Log:
    """``log`` with attempt ``number`` of ``step`` begun at ``at``: an earlier record
    left open is ``lost`` (seen last at its run's last save, unknown here: None), the
    records of steps before ``step - 1`` dropped, at most ``LIMIT`` per step kept."""
    rows = [r for r in _closed(log, "lost") if r[0] >= step - 1]
    rows.append([step, number, at, None, None])
    mine = [r for r in rows if r[0] == step]
    if len(mine) > LIMIT:
        drop = {id(r) for r in mine[: len(mine) - LIMIT]}
        rows = [r for r in rows if id(r) not in drop]
    return tuple(rows)


def lost(log: Sequence[Any], seen: float | None) -> Log:
    """The open record (if any) marked ``lost``: found by a claim with no ending."""
    rows = [list(r) for r in log]
    if rows and rows[-1][4] is None and len(rows[-1]) >= 5:
        rows[-1] = [*rows[-1][:3], None, "lost", None, None, seen]
    return tuple(rows)


def end(log: Sequence[Any], how: str, at: float, error: dict[str, Any] | None = None) -> Log:
    """The open record (if any) ended at ``at`` as ``how`` (a failure: with its error)."""
    rows = [list(r) for r in log]
    if rows and len(rows[-1]) >= 5 and rows[-1][4] is None:
        row = [*rows[-1][:3], at, how]
        if error is not None:
            row += [str(error.get("type")), str(error.get("message", ""))]
        rows[-1] = row
    return tuple(rows)


def unbegun(log: Sequence[Any]) -> Log:
    """The open record dropped: the attempt it began did not start after all (a worker
    stopping at a step boundary gives the run back before its next step)."""
    rows = list(log)
    if rows and len(rows[-1]) >= 5 and rows[-1][4] is None:
        rows.pop()
    return tuple(rows)


def _closed(log: Sequence[Any], how: str) -> list[list[Any]]:
    rows = [list(r) for r in log if isinstance(r, list | tuple) and len(r) >= 5]
    if rows and rows[-1][4] is None:
        rows[-1] = [*rows[-1][:3], None, how]
    return rows
