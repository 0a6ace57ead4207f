"""What a FileStore save writes under its run's stripe lock, and what the store knows
of each run's file meanwhile (``Known``: etag, file length, first record's length,
step names, signals, sizes, journal). ``FileStore`` holds the lock and the files
(``open_files``); a ``Writer`` reads the file's end (``runfile_tail``), compares the
etag, and appends a record or writes a new snapshot file (``runfile``, ``fileio``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ...seam.checkpoint import Checkpoint
from ...seam.document import dumps, from_document
from ...seam.errors import conflict
from ...seam.history import Keep
from ...seam.rules import check_size
from ...seam.state import delta_since, is_checked
from . import fileio, platform, runfile, runfile_tail
from . import history as kept_logs
from .fileio import UNSURE, atomic_write, os_error
from .head_place import Place, meta_bytes, of_meta
from .open_files import RunFile, Stripe
from .runfile import HEAD

REMEMBERED = 1024
"""Runs a store remembers (the most recently read or written)."""


class Known(NamedTuple):
    """What this store last read or wrote of a run's file."""

    etag: str
    end: int
    base: int
    steps: tuple[str, ...]
    signals: object  # frozen signals as they are, others as JSON (see signals_key)
    sizes: runfile.Sizes | None
    calls: tuple[Any, ...] | None = None  # the journal as written (None: unknown)
    place: Place | None = None  # where the head's step names and signals lie (head_place)


class End(NamedTuple):
    """The end of a run's file as a writer finds it under the lock."""

    etag: str | None
    end: int | None  # None: a whole document of an earlier version, not a log
    size: int
    base: int
    sizes: runfile.Sizes | None = None
    place: Place | None = None


class Writer:
    """The writes of one FileStore (in ``store``, whose path its messages name) and
    what it knows of the runs it last read or wrote."""

    def __init__(self, store: Path, history: Keep | None = None) -> None:
        self.store = store
        self.history = history or Keep()
        self._known: dict[str, Known] = {}
        self._lock = threading.Lock()

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._known.pop(run_id, None)

    def save_head(
        self, stripe: Stripe, target: Path, cp: Checkpoint, doc: dict[str, Any]
    ) -> int | None:
        """Append the head record; None when the file is not a log whose last record
        has sizes (an earlier version's): then the save is made whole."""
        path = str(target)
        file = stripe.open_run(path)
        try:
            end = None if file is None else self.end(file.fd, file.size, cp.run_id, target, file)
            if (end and end.etag) != cp.etag:
                raise conflict(cp.run_id, cp.etag, end is None)
            if file is None or end is None or end.end is None or end.sizes is None:
                return None
            record, sizes, place = runfile.head_record(doc, end.sizes, end.end, end.place)
            self.append(file.fd, record, end, cp.run_id, target)
            new_end = end.end + len(record)
            stripe.appended(path, new_end, doc["etag"])
            signals = signals_key(cp.signals)
            known = Known(doc["etag"], new_end, end.base, cp.steps, signals, sizes, place=place)
            self.remember(cp.run_id, known)
            return len(record)
        finally:
            stripe.done(file)

    def save(
        self,
        stripe: Stripe,
        target: Path,
        cp: Checkpoint,
        doc: dict[str, Any],
        signals: object,
        *,
        limit: int,
    ) -> int:
        """Write ``cp`` (its document ``doc``), its values as the store was given them
        (encoded by the seam: ``seam.encoded``), its data measured against ``limit``."""
        meta = runfile.meta_of(doc)
        path = str(target)
        file = stripe.open_run(path)
        try:
            end = None if file is None else self.end(file.fd, file.size, cp.run_id, target, file)
            if (end and end.etag) != cp.etag:
                raise conflict(cp.run_id, cp.etag, end is None)
            known = self._known.get(cp.run_id)
            if known is not None and known.etag != cp.etag:
                known = None
            if file is not None and end is not None and end.end is not None:
                body, sizes, written = runfile.body(
                    doc,
                    delta_since(cp.state, cp.etag),
                    None if known is None else known.steps,
                    known is None or not (known.signals is signals or known.signals == signals),
                    end.sizes,
                    calls=None if known is None else known.calls,
                )
                # Sizes unknown (the record before is an earlier version's): a new file
                # measures them. Compact once the file would outgrow 4x the snapshot.
                if sizes is not None:
                    check_size(cp.run_id, sizes.state + sizes.calls, limit)
                    meta["sizes"] = sizes
                    m, place = meta_bytes(meta, body, written, end.end + HEAD, end.place)
                    record = runfile.frame(m, body, doc["etag"])
                    base = runfile.snapshot_length(len(m), sizes)
                if sizes is not None and end.end + len(record) <= runfile.compact_at(base):
                    self.append(file.fd, record, end, cp.run_id, target)
                    new_end = end.end + len(record)
                    stripe.appended(path, new_end, doc["etag"])
                    self.remember(
                        cp.run_id,
                        Known(
                            doc["etag"],
                            new_end,
                            end.base,
                            cp.steps,
                            signals,
                            sizes,
                            cp.calls,
                            place,
                        ),
                    )
                    return len(record)
        finally:
            stripe.done(file)
        # A new file: the kept one is closed first (Windows refuses to replace an open file).
        stripe.forget(path)
        if self.history.on and file is not None:
            # History: the superseded log is kept, not dropped (``history``).
            kept_logs.keep_log(self.store, target, self.history, cp.step)
        body, whole, written = runfile.body(doc, None, None, True, None)
        assert whole is not None  # every part written whole is measured
        check_size(cp.run_id, whole.state + whole.calls, limit)
        meta["sizes"] = whole
        m, place = meta_bytes(meta, body, written, HEAD, None)
        snapshot = runfile.frame(m, body, doc["etag"])
        atomic_write(target, snapshot)
        size = len(snapshot)
        known = Known(doc["etag"], size, size, cp.steps, signals, whole, cp.calls, place)
        self.remember(cp.run_id, known)
        return size

    def end(
        self, fd: int, size: int, run_id: str, target: Path, file: RunFile | None = None
    ) -> End:
        """The etag and the end of the last valid record, reading the file's end only
        (all of it only after a torn save, or for an earlier version's file). Nothing
        at all when this store's last append went through ``file``, kept open since,
        and the length is still the one it left (see ``open_files``)."""
        known = self._known.get(run_id)
        if (
            known is not None
            and known.end == size
            and (
                (file is not None and file.written == (size, known.etag))
                or runfile_tail.tail_etag(fd, size) == known.etag
            )
        ):
            return End(known.etag, size, size, known.base, known.sizes, known.place)
        base = runfile_tail.first_length(fd)
        if base is None:  # an earlier version's whole document (damage is raised here)
            doc, etag, _ = parse(fileio.read_all(fd), run_id, str(target))
            return End(from_document(doc, run_id, etag, str(target)).etag, None, size, 0)
        last = runfile_tail.last_record(fd, size)
        if last is not None:
            return End(last.etag, size, size, base, *_sizes_place(last.meta))
        records = runfile.scan(fileio.read_all(fd), run_id, str(target))
        last = records[-1]
        return End(last.etag, last.end, size, base, *_sizes_place(last.meta))

    def append(self, fd: int, record: bytes, end: End, run_id: str, target: Path) -> None:
        assert end.end is not None
        try:
            if end.size > end.end:
                os.ftruncate(fd, end.end)  # the torn tail of a save that was killed
            fileio.write_at(fd, end.end, record)
            platform.current.sync_data(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, end.end)
            except OSError:
                raise os_error(exc, f"save run {run_id!r}", target, self.store, UNSURE) from exc
            raise

    def remember(self, run_id: str, known: Known) -> None:
        with self._lock:
            if run_id in self._known and next(reversed(self._known)) == run_id:
                self._known[run_id] = known  # already the most recent: stays last
                return
            self._known.pop(run_id, None)
            self._known[run_id] = known
            if len(self._known) > REMEMBERED:
                del self._known[next(iter(self._known))]


def parse(data: bytes, run_id: str, where: str) -> tuple[Any, str | None, Known | None]:
    """A run file's document and etag; for a log also what a writer needs to know."""
    doc, etag, records = runfile.parse(data, run_id, where)
    if not records:
        return doc, etag, None
    last, sizes = records[-1], runfile.sizes_of(doc)  # doc: the last record's meta and more
    known = Known(last.etag, last.end, records[0].end, (), b"", sizes, place=of_meta(doc))
    return doc, etag, known


def _sizes_place(meta: bytes) -> tuple[runfile.Sizes | None, Place | None]:
    """The sizes and the head's place a record's meta records."""
    try:
        found = json.loads(meta)
    except ValueError:
        return None, None
    return runfile.sizes_of(found), of_meta(found)


def signals_key(signals: Mapping[str, Any]) -> object:
    """What tells whether the signals changed: frozen ones (the runner's) cannot change
    in place, so they are kept as they are; others as their JSON."""
    return signals if is_checked(signals) else dumps(dict(signals))
