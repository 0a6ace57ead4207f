"""FileStore's index of the runs a worker may take, and when.

A worker's look (``Store.takeable``) must cost what the runs it could take cost,
not what the runs live workers hold do: listing ``runs/`` reads every run file's end
(10,000 leased runs: 380 ms a look). So each save also notes *when* its run becomes
takeable -- a running run when its lease expires (at once without one), a waiting
run at its wake time or signal deadline; a finished run never -- as an empty file
in a time bucket:

    due/<bucket>/<the run file's name>        bucket = floor(due time / 10 s)
    due/.complete                             the index covers every run

A look lists the bucket directories (a few dozen names), reads only the buckets
that are due, and asks each run's file (``runs_listing.entry_of``: its last record's
fields) whether it is really takeable. Runs held by live workers sit in future
buckets, where a look never reads.

Crash safety: the index is a hint; the run file decides. A save notes its new entry
*before* it writes the run (so a crash leaves an entry early -- harmless, the look
checks the file -- never a run without one), and removes the entry it noted last
after (a crash leaves a stale one, which the look moves or removes when its bucket
comes due). Both happen under the run's stripe lock, and a look corrects an entry
only under that lock, after reading the run again: a save and a correction never
cross, so no entry of a takeable run is lost. Entries another process noted (a
signal's sender, a worker that took a run over) go stale the same way and are
cleaned the same way. An index that is missing or incomplete (a store written by an
earlier version, a ``due/`` deleted by hand) is rebuilt from a full listing by the
next look, and only then marked ``.complete``.

The same index, with another notion of "due", keeps the runs a retention pass deletes
(``expiry``: an ended run, when ``finished_ttl`` after its end is past): ``when``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from ...seam.checkpoint import RunInfo
from ...seam.lease import owner_gone
from . import platform

BUCKET = 10.0
"""Seconds of due times per bucket: a look reads at most one bucket not yet due."""
_WIDTH = 12
COMPLETE = ".complete"


def due_at(
    status: str | None,
    lease_expires: float | None,
    wake_at: float | None,
    deadline: float | None = None,
) -> float | None:
    """When a run of these fields becomes takeable by a worker -- or is to be cancelled,
    past its ``deadline`` (``runner.deadlines``); None: never by itself (a finished run,
    or one waiting for a signal without a deadline)."""
    at: float | None
    if status == "running":
        at = 0.0 if lease_expires is None else lease_expires
    elif status == "waiting":
        at = wake_at
    else:
        return None
    if deadline is not None:
        at = deadline if at is None else min(at, deadline)
    return at


def bucket_of(at: float) -> str:
    return str(max(0, math.floor(at / BUCKET))).zfill(_WIDTH)


def takeable_at(info: RunInfo) -> float | None:
    """When the listed run becomes takeable (``due_at`` of its fields): a running run
    whose lease owner is visibly gone (a dead process of this machine: ``owner_gone``)
    at once, whatever its lease says -- ``wake.Procs.sweep`` notes such runs due now,
    and this keeps them there."""
    expires, owner = info.lease_expires, info.owner
    held = info.status == "running" and expires is not None and expires > time.time()
    if held and owner is not None and owner_gone(owner):
        expires = None
    return due_at(info.status, expires, info.wake_at, info.deadline)


class DueIndex:
    """The index of one FileStore (``root``: its ``due/`` directory; ``when``: when a
    listed run is due, None: never)."""

    def __init__(
        self,
        root: Path,
        *,
        empty_store: bool,
        when: Callable[[RunInfo], float | None] = takeable_at,
    ) -> None:
        self.root, self.when = root, when
        self._noted: dict[str, tuple[str, str]] = {}  # run file -> (bucket, etag) noted last
        self._lock = threading.Lock()
        _mkdir(root)
        if empty_store:  # nothing to index: complete as it is
            self._mark_complete()

    # -- kept by saves (under the run's stripe lock) ---------------------------------------

    def note(self, name: str, at: float | None, on_top_of: str | None) -> str | None:
        """Note, before a save writes run file ``name`` on top of etag ``on_top_of``,
        that the run is takeable from ``at`` (None: never); the bucket noted. A save on
        top of this store's own last one, due in the same bucket, touches nothing (a
        steady save opens no file): nobody else wrote the run since, so no look has
        moved the entry (a look moves one only when the run says it is due elsewhere)."""
        if at is None:
            return None
        bucket = bucket_of(at)
        with self._lock:
            if on_top_of is not None and self._noted.get(name) == (bucket, on_top_of):
                return bucket
        self._touch(bucket, name)
        return bucket

    def noted(self, name: str, bucket: str | None, etag: str) -> None:
        """The save that noted ``bucket`` landed as ``etag``: the entry this store noted
        before it goes."""
        with self._lock:
            before = self._noted.pop(name, None)
            if bucket is not None:
                self._noted[name] = (bucket, etag)
        if before is not None and before[0] != bucket:
            self._remove(before[0], name)

    def forget(self, name: str) -> None:
        """Run file ``name`` was deleted: the entry this store noted goes (others, when
        their bucket comes due)."""
        with self._lock:
            before = self._noted.pop(name, None)
        if before is not None:
            self._remove(before[0], name)

    def due_now(self, name: str) -> None:
        """Note run file ``name`` as due at once (an entry early is harmless: the look
        checks the run, and moves the entry if it disagrees)."""
        self._touch(bucket_of(0.0), name)

    # -- read by looks ---------------------------------------------------------------------

    def complete(self) -> bool:
        return (self.root / COMPLETE).exists()

    def rebuild(self, runs: Iterable[RunInfo], name_of: Callable[[str], str]) -> None:
        """Note every run of a full listing, then mark the index complete."""
        for info in runs:
            if info.error is None:
                at = self.when(info)
                if at is not None:
                    self._touch(bucket_of(at), name_of(info.run_id))
        self._mark_complete()

    def due(self, at: float) -> Iterator[tuple[str, str]]:
        """(bucket, run file name) of the entries due by ``at``, earliest first."""
        last = bucket_of(at)
        with contextlib.suppress(FileNotFoundError):
            buckets = sorted(
                e.name for e in os.scandir(self.root) if e.name.isdigit() and e.name <= last
            )
            for bucket in buckets:
                with contextlib.suppress(FileNotFoundError):  # emptied meanwhile
                    names = [e.name for e in os.scandir(self.root / bucket)]
                    if not names and bucket < last:
                        with contextlib.suppress(OSError):  # a save may be filling it
                            os.rmdir(self.root / bucket)
                    # Spread: each look starts at a random place of the bucket, so that
                    # looks of several workers offer different runs first and do not race
                    # for the same claims (order within a bucket was never promised:
                    # queues order what they are offered themselves, ``by_priority``).
                    cut = random.randrange(len(names)) if names else 0
                    names = names[cut:] + names[:cut]
                    for name in names:
                        yield bucket, name

    def look(
        self,
        at: float,
        read: Callable[[str], RunInfo | None],
        lock: Callable[[str], AbstractContextManager[object]],
    ) -> Iterator[RunInfo]:
        """The runs due by ``at``, as their files say (``read``: a run file's listing
        entry; ``lock``: a try of its stripe lock); entries that disagree with their run
        are corrected on the way."""
        seen: set[str] = set()
        for bucket, name in list(self.due(at)):
            info = read(name)
            ok = info is not None and info.error is None
            due = self.when(info) if ok and info else None
            if due is None or bucket_of(due) != bucket:
                self.correct(
                    bucket, name, functools.partial(lock, name), functools.partial(read, name)
                )
            if info is None or due is None or due > at or info.run_id in seen:
                continue
            seen.add(info.run_id)
            yield info

    def correct(
        self,
        bucket: str,
        name: str,
        lock: Callable[[], AbstractContextManager[object]],
        read: Callable[[], RunInfo | None],
    ) -> None:
        """Entry ``bucket/name`` disagrees with its run: under the run's lock (a save
        in progress wins: the entry is left for a later look), read the run again, note
        it where it is due, and remove the entry if it belongs elsewhere."""
        with lock() as held:
            if not held:
                return
            info = read()
            at = None if info is None else self.when(info)
            if info is not None and info.error is not None:
                return  # unreadable: left for the operator (the listing shows it)
            if at is not None:
                if bucket_of(at) == bucket:
                    return
                self._touch(bucket_of(at), name)
            self._remove(bucket, name)

    # -- files -----------------------------------------------------------------------------

    def _touch(self, bucket: str, name: str) -> None:
        path = self.root / bucket / name
        for _ in range(2):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | platform.BINARY, 0o600)
            except FileNotFoundError:  # a new bucket (or one a look just removed, empty)
                _mkdir(path.parent)
                continue
            os.close(fd)
            return
        raise FileNotFoundError(f"cannot create {path}")

    def _remove(self, bucket: str, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.root / bucket / name)

    def _mark_complete(self) -> None:
        fd = os.open(self.root / COMPLETE, os.O_WRONLY | os.O_CREAT | platform.BINARY, 0o600)
        os.close(fd)


def _mkdir(d: Path) -> None:
    """A private directory of the index, not synced: an entry lost to a power cut is
    found again by a worker's first look, a full one (``workers.discovery``)."""
    if not d.is_dir():
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)
            os.chmod(d, 0o700)
