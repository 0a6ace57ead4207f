"""A completed step's call index: what its history entry keeps of its journal.

A step's journal (``Checkpoint.calls``) is dropped by the save that completes the
step, yet a code-first run's history *is* its calls. So each store, where it writes
a completed step's history entry, keeps a compact index of the journal as it stood
just before (the records the store already holds): for each operation, in the order
they were made (by the time recorded; unfinished ones last), its name, key, scope
and index, kind, when it was recorded, the bytes of its result's JSON and the step
attempt that recorded it -- never the result itself, so a history entry leaks no
step's data and stays small.

Cost: built once per completed step, from records in memory (never per call's
save, which is unchanged). Bounded: the last ``LIMIT`` operations, with a count of
those left out. A finished call's record carries when its last try began (``t0``,
written in the same save as its result: no write of its own), so ``CallEntry.start``
is that (None for other operations and older records) and ``end`` the record's time.
Beside the calls, the step's attempt records (``seam.attempts``) as its completing
save carried them: ``"a"``.

Stored form (JSON, on the entry): ``{"c": [[name, key, scope, i, kind, start, end,
size, attempt], ...], "n": left_out, "a": [attempt record, ...]}``; an entry written
before indexes existed has none and loads as ``calls=None``; a malformed one is read
leniently (fields not of their type become None) since it only describes, never replays.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

LIMIT = 1000


@dataclass(frozen=True)
class CallEntry:
    """One durable operation of a completed step, as its history entry indexes it."""

    name: str
    key: str | None
    """Its explicit key (None: placed by its index)."""
    scope: str
    """The task that made it ("" the step's own)."""
    index: int | None
    kind: str
    """``call``, ``sleep``, ``wait``, ``receive``, ... as recorded."""
    start: float | None
    """When it began: a record's ``t0``, where one carries it; None: not recorded."""
    end: float | None
    """When its record was made (seconds since the epoch); None: unfinished."""
    size: int | None
    """The bytes of its result's JSON (None: no result)."""
    attempt: int | None
    """The step attempt that recorded it (None: a record of an earlier version)."""

    @property
    def label(self) -> str:
        """``name``, ``name[key]`` or ``name#i`` (``scope/i`` in a task)."""
        if self.key is not None:
            return f"{self.name}[{self.key}]"
        where = f"{self.scope}/{self.index}" if self.scope else str(self.index)
        return f"{self.name}#{where}"


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: object) -> int | None:
    return v if type(v) is int else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def build(
    records: Iterable[Mapping[str, Any]] | None, tries: list[list[Any]] | None = None
) -> dict[str, Any] | None:
    """The stored index of a step's journal (None: the journal is not known), with the
    step's attempt records (``seam.attempts``: ``"a"``) where given."""
    if records is None:
        return {"a": tries} if tries else None
    rows = []
    for r in records:
        at = _num(r.get("at"))
        size = None
        if "result" in r:
            size = len(json.dumps(r["result"], separators=(",", ":")).encode())
        rows.append(
            [
                str(r.get("name", "")),
                _str(r.get("key")),
                str(r.get("task", "")),
                _int(r.get("i")),
                str(r.get("kind", "call")),
                _num(r.get("t0")),
                at,
                size,
                _int(r.get("step_attempt")),
            ]
        )
    rows.sort(key=lambda row: math.inf if row[6] is None else row[6])
    left_out = max(0, len(rows) - LIMIT)
    out: dict[str, Any] = {"c": rows[left_out:], "n": left_out}
    if tries:
        out["a"] = tries
    return out


def read(stored: object) -> tuple[tuple[CallEntry, ...] | None, int]:
    """The entries of a stored index and the count left out ((None, 0): none kept)."""
    if not isinstance(stored, Mapping) or not isinstance(stored.get("c"), list):
        return None, 0
    out = []
    for row in stored["c"]:
        if not isinstance(row, list) or len(row) < 9:
            continue
        name, key, scope, i, kind, start, end, size, attempt = row[:9]
        out.append(
            CallEntry(
                str(name),
                _str(key),
                str(scope or ""),
                _int(i),
                str(kind),
                _num(start),
                _num(end),
                _int(size),
                _int(attempt),
            )
        )
    return tuple(out), _int(stored.get("n")) or 0
