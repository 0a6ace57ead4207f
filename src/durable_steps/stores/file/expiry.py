"""FileStore's retention at a cost that does not grow with the store: the index of
ended runs, by when they expire.

``delete_expired`` used to list every run (one read of each run file's end) on each
pass -- the worker's, once a minute: 10,000 runs kept, 10,000 files opened a minute
for nothing. So a save that completes a run (``EXPIRES``; a cancelled run stays) on a store
with ``finished_ttl`` also notes when it expires -- its ``updated_at`` plus the ttl --
as an empty file in a time bucket of ``expiry/``, kept exactly as the worker's index of
runs to take (``due_index``: noted before the run's file is written, the one noted
before removed after, under the run's stripe lock; a hint that the run file decides).
A pass lists the bucket names, reads only the buckets that are due, and checks each of
those runs' file before deleting it (as it was read: a run resumed meanwhile stays,
and its entry moves). A save of a running run notes nothing: no file opened.

Stores written without the index (an earlier version, a store opened without
``finished_ttl``) are covered by one full listing: the first pass of a store whose
``expiry/.complete`` is missing rebuilds the index from it. A store opened without
``finished_ttl`` does not note the runs it ends, so a save of one removes ``.complete``
(one ``unlink``, usually of nothing): the next pass with a ttl lists everything once
more. Its other saves, and its reads, leave the index alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from ...seam.checkpoint import EXPIRES, Checkpoint, RunInfo
from .due_index import COMPLETE, DueIndex


class ExpiryIndex:
    """The ended runs of one FileStore (``path``), by when they expire; ``ttl``: its
    ``finished_ttl`` (None: nothing is noted, and the index is marked incomplete)."""

    def __init__(self, path: Path, ttl: float | None, *, empty_store: bool) -> None:
        self.ttl = ttl
        self._complete = path / "expiry" / COMPLETE
        self._index: DueIndex | None = None
        if ttl is not None:
            self._index = DueIndex(path / "expiry", empty_store=empty_store, when=self._listed)

    def at(self, status: str | None, updated_at: float | None) -> float | None:
        """When a run of this status, saved at ``updated_at``, expires; None: never."""
        if self.ttl is None or status not in EXPIRES or updated_at is None:
            return None
        return updated_at + self.ttl

    def _listed(self, info: RunInfo) -> float | None:
        return self.at(info.status, info.updated_at)

    def note(self, name: str, cp: Checkpoint, updated_at: float) -> str | None:
        """Before a save of ``cp`` (stamped ``updated_at``) writes run file ``name``: see
        ``DueIndex.note``. A run that does not end notes nothing (no file opened)."""
        if self._index is None:
            if cp.status in EXPIRES:  # not noted: the next pass with a ttl lists everything
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self._complete)
            return None
        at = self.at(cp.status, updated_at)
        return None if at is None else self._index.note(name, at, cp.etag)

    def noted(self, name: str, bucket: str | None, etag: str) -> None:
        if self._index is not None:
            self._index.noted(name, bucket, etag)

    def forget(self, name: str) -> None:
        if self._index is not None:
            self._index.forget(name)

    def due(
        self,
        now: float,
        every_run: Callable[[], Iterable[RunInfo]],
        name_of: Callable[[str], str],
        read: Callable[[str], RunInfo | None],
        lock: Callable[[str], AbstractContextManager[object]],
    ) -> Iterator[RunInfo]:
        """The runs expired by ``now``, as their files say (an incomplete index rebuilt
        first from ``every_run()``, a full listing)."""
        if self._index is None:
            return
        if not self._index.complete():
            self._index.rebuild(every_run(), name_of)
        yield from self._index.look(now, read, lock)
