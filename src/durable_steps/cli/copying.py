"""One run copied to another store by ``durable-steps migrate``, its history first.

Where the source keeps history (``run_history`` lists steps before the latest), the
target gets one save per kept step, in order -- each the checkpoint ``load_at`` gives
for it, with the attempts that step took -- then the run's latest checkpoint as it is:
the target's history (what its own setting keeps) then lists the same steps, states and
times as the source's. Where the source kept only the latest checkpoint (a store with
``history="none"``, a Cosmos DB container of the earlier ``/id`` layout, a run saved
before history was kept), only that is copied, and the report says which runs.

Until its last save, a copy is leased to ``MIGRATE_OWNER`` for ``HOLD`` seconds, so no
worker of the target takes a half-copied run and runs it from a step in the middle. A
migrate that stopped (a crash, a store that failed) meets its own unfinished copy when
it runs again -- leased by that owner, its steps the first of the source's -- and
continues it from there. Everything else already in the target is compared, never
written to (``ops``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from ..seam.checkpoint import Checkpoint
from ..seam.errors import ConflictError, StepNotKeptError
from ..seam.store import Store

MIGRATE_OWNER = "durable-steps migrate"
HOLD = 24 * 3600.0
"""How long a half-copied run is leased to the migrate that copies it (seconds)."""


@dataclass
class Copied:
    """What one run's copy did: ``outcome`` ("copied", "identical", "conflicts" or None:
    the run went meanwhile), the earlier steps copied from history, and whether the
    source kept only the latest of several steps."""

    outcome: str | None
    steps: int = 0
    latest_only: bool = False


def copy_run(src: Store, dst: Store, cp: Checkpoint) -> Copied:
    """Copy ``cp`` (the source's latest checkpoint of its run) and its kept history into
    ``dst``; a run already in ``dst`` is compared (an unfinished copy is continued)."""
    there = dst.load(cp.run_id)
    if there is not None and not _unfinished_copy(there, cp):
        return Copied("identical" if _same(there, cp) else "conflicts")
    history = [h for h in (src.run_history(cp.run_id) or []) if h.step < cp.step]
    done = -1 if there is None else there.step
    versions: list[Checkpoint] = []
    for n, record in enumerate(history):
        if record.step <= done:
            continue
        try:
            at = src.load_at(cp.run_id, record.step)
        except StepNotKeptError:  # trimmed meanwhile (keep_last): the rest still copies
            continue
        if at is None:
            return Copied(None)
        following = history[n + 1].attempts if n + 1 < len(history) else None
        versions.append(
            replace(
                at,
                attempt=following or 1,
                owner=MIGRATE_OWNER,
                lease_expires=time.time() + HOLD,
            )
        )
    etag = None if there is None else there.etag
    try:
        for version in [*versions, cp]:
            etag = dst.save(replace(version, etag=etag)).etag
    except ConflictError:  # another writer (a migrate, a worker) got there first
        now = dst.load(cp.run_id)
        return Copied("identical" if now is not None and _same(now, cp) else "conflicts")
    latest_only = cp.step > 0 and not history
    return Copied("copied", len(versions), latest_only)


def _unfinished_copy(there: Checkpoint, cp: Checkpoint) -> bool:
    return (
        there.owner == MIGRATE_OWNER
        and there.step < cp.step
        and tuple(cp.steps[: len(there.steps)]) == tuple(there.steps)
    )


def _same(a: Checkpoint, b: Checkpoint) -> bool:
    def key(cp: Checkpoint) -> tuple[Any, ...]:
        return cp.state, cp.steps, cp.status, cp.workflow, dict(cp.signals)

    return key(a) == key(b)
