"""A FileStore's history and retention: the completed steps its runs keep, read back
(``run_history``, ``load_at``: the logs compactions superseded, ``history``), the runs
that expire (``delete_expired``: the expiry index, ``expiry``) and the history nothing
claims (``prune_orphans``). ``FileStore`` inherits them; what they need of it -- its
files, their locks, the ``StoreError`` an ``OSError`` becomes -- is declared here.
"""

from __future__ import annotations

import contextlib
import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path

from ...seam.checkpoint import Checkpoint
from ...seam.encoded import opened
from ...seam.errors import ConflictError
from ...seam.history import Keep, StepRecord, Walk, checkpoint_at
from ...seam.rules import RunFilter
from ...seam.store import ORPHAN_AGE, Store
from . import history as kept_logs
from . import listing as runs_listing
from .expiry import ExpiryIndex
from .open_files import Stripe


class KeptRuns(Store):
    """History and retention, on top of a FileStore's files (see the top)."""

    path: Path
    history: Keep
    _runs: Path
    _expiry: ExpiryIndex

    @abstractmethod
    def file_for(self, run_id: str) -> Path: ...

    @abstractmethod
    def _dir(self) -> runs_listing.RunsDir: ...

    @abstractmethod
    def _try_lock(self, file: Path) -> AbstractContextManager[Stripe | None]: ...

    @abstractmethod
    def _io(
        self, doing: str, run_id: str | None, path: Path, outcome: str
    ) -> AbstractContextManager[None]: ...

    def _walk(self, run_id: str, want: int | None) -> Walk | None:
        target = self.file_for(run_id)
        walk = Walk(want)
        with self._io("read the history of", run_id, target, ""):
            found = kept_logs.versions(self.path, target, run_id)
            if found is None:
                return None
            for version in found:
                walk.add(version)
        return walk

    def run_history(self, run_id: str) -> list[StepRecord] | None:
        """The run's completed steps, from its log and the logs compactions kept."""
        if not self.history.on:
            return super().run_history(run_id)
        walk = self._walk(run_id, None)
        return None if walk is None else walk.entries

    def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        """The checkpoint after a kept step (``Store.load_at``), replayed from the logs,
        its values decoded (``seam.encoded``)."""
        if not self.history.on:
            return super().load_at(run_id, step)
        walk = self._walk(run_id, step)
        if walk is None:
            return None
        return opened(self.codec, checkpoint_at(run_id, *walk.at(run_id)))

    def delete_expired(self, now: float | None = None) -> int:
        """Delete the runs completed more than ``finished_ttl`` seconds ago (their
        history too), found in the expiry index (``expiry``); how many. A run changed
        meanwhile is left for the next pass."""
        gone, d = 0, self._dir()
        with self._io("delete the expired runs in", None, self.path / "expiry", ""):
            for info in list(
                self._expiry.due(
                    time.time() if now is None else now,
                    lambda: self.listing(RunFilter()),
                    lambda r: self.file_for(r).name,
                    lambda name: runs_listing.entry_of(d, self._runs / name),
                    lambda name: self._try_lock(self._runs / name),
                )
            ):
                with contextlib.suppress(ConflictError):
                    gone += self.delete(info.run_id, etag=info.etag)
        return gone

    def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        """Remove history directories that no run file claims (a delete that crashed
        between the run's file and its history), older than ``older_than`` seconds."""
        gone = 0
        cutoff = time.time() - older_than
        with self._io("prune the history in", None, self.path, ""):
            for d in kept_logs.orphans(self.path, self._runs):
                if d.stat().st_mtime <= cutoff:
                    kept_logs.remove(self.path, self._runs / f"{d.name}.json")
                    gone += 1
        return gone
