"""FileStore: checkpoints as one journal per run in a local directory.

Layout::

    PATH/runs/<slug>-<hash>.json       the run's file: a journal, or one whole JSON
                                       document if an earlier version wrote it
    PATH/runs/.tmp-<slug>-<hash>.json  that file's next version while it is written
    PATH/locks/<00..ff>.lock           lock stripes that serialise the writers of a run

The run file's format, the torn-tail rule, compaction, what a save syncs and
what is promised: ``journal``; reading a file's head and tail: ``journal_tail``.
Durable new files, private modes, bytes at an offset and the ``StoreError`` an
``OSError`` becomes: ``fileio``. Listing, and files that no run claims: ``listing``.
The files kept open between saves: ``open_files``. Locks, syncs and renames per
operating system: ``platform``.

A save (``_save_locked``) appends its record, or writes a new snapshot file when
the run has no journal yet or when the journal has outgrown ``compact_at``. It
touches its run's file and one lock file, whatever the number of runs. The
temporary file has one name per run file, used only under that run's lock, so a
crashed save's leftover is replaced by the run's next new file or removed by a
listing.

The store remembers, per run, what it last read or wrote (``_Known``: etag, file
length, first record's length, step names, signals): a save on top of that etag
writes only the step names and signals that are new, and trusts the file's end
from its TAIL alone. When in doubt (another writer, another process), it writes
them whole and checks the last record in full.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple

from ...seam.document import dumps, from_document, to_document
from ...seam.errors import CorruptCheckpointError, StoreError
from ...seam.etags import new_etag
from ...seam.metering import wrote
from ...seam.state import delta_since, is_checked
from ...seam.store import (
    Checkpoint,
    RunInfo,
    check_filters,
    check_run_id,
    check_size,
    conflict,
    delete_conflict,
    evolve,
    state_limit,
)
from . import fileio, journal, journal_tail, listing, platform
from .fileio import (
    GONE,
    INTACT,
    UNSURE,
    WRITTEN,
    NotDurableError,
    atomic_write,
    make_dir,
    open_existing,
    os_error,
    read_file,
)
from .open_files import OpenFiles, RunFile, Stripe

_STRIPES = 256
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_REMEMBERED = 1024


class _Known(NamedTuple):
    """What this store last read or wrote of a run's file."""

    etag: str
    end: int
    base: int
    steps: tuple[str, ...]
    signals: object  # frozen signals as they are, others as JSON (see _signals_key)
    sizes: journal.Sizes | None
    calls: tuple[Any, ...] | None = None  # the journal as written (None: unknown)


class _End(NamedTuple):
    """The end of a run's file as a writer finds it under the lock."""

    etag: str | None
    end: int | None  # None: a whole document of an earlier version, not a journal
    size: int
    base: int
    sizes: journal.Sizes | None = None


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a FileStore (its ``runs/`` directory)."""
    return (Path(path) / "runs").is_dir()


class FileStore:
    """Checkpoints as files under ``path`` (created if missing). ``max_state_bytes``: the
    state size limit (default ``MAX_STATE_BYTES``)."""

    def __init__(
        self,
        path: str | os.PathLike[str] = ".durable",
        *,
        max_state_bytes: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.max_state_bytes = state_limit(max_state_bytes)
        self._runs = self.path / "runs"
        self._locks = self.path / "locks"
        self._known: dict[str, _Known] = {}
        self._files: dict[str, tuple[Path, int]] = {}  # run id -> its file and stripe
        self._known_lock = threading.Lock()
        self._stripes = [str(self._locks / f"{i:02x}.lock") for i in range(_STRIPES)]
        with self._io("open the store", None, self.path, ""):
            for d in (self.path, self._runs, self._locks):
                make_dir(d)
        self._open_files = OpenFiles(self._stripes)
        weakref.finalize(self, self._open_files.close)  # a store dropped unclosed closes its files

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    def file_for(self, run_id: str) -> Path:
        """The run's file: a readable slug plus a hash, so any valid run id (unicode,
        ``..``, 255 characters, ids differing only in case) maps to its own short
        name strictly inside the store, on case-insensitive file systems too."""
        return self._target(run_id)[0]

    def _target(self, run_id: str) -> tuple[Path, int]:
        """The run's file and its lock stripe (the hash's last byte), remembered."""
        target = self._files.get(run_id)
        if target is None:
            digest = hashlib.sha256(check_run_id(run_id).encode()).hexdigest()[:40]
            slug = _UNSAFE.sub("_", run_id.lower()).strip("_")[:48]
            path = self._runs / (f"{slug}-{digest}.json" if slug else f"{digest}.json")
            target = path, int(digest[-2:], 16) % _STRIPES
            if len(self._files) >= _REMEMBERED:
                self._files.clear()
            self._files[run_id] = target
        return target

    # -- load and save ------------------------------------------------------------------

    def load(self, run_id: str) -> Checkpoint | None:
        target = self.file_for(run_id)
        with self._io("load", run_id, target, ""):
            data = read_file(target)
        if data is None:
            return self._load_listed(run_id)
        doc, etag, known = _parse(data, run_id, str(target))
        cp = from_document(doc, run_id, etag, str(target))
        if known is not None:
            self._remember(run_id, known._replace(steps=cp.steps, signals=_signals_key(cp.signals)))
        return cp

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        etag = new_etag()
        doc = to_document(checkpoint, etag=etag)  # bad state fails here, before any I/O
        signals = _signals_key(checkpoint.signals)
        target, stripe = self._target(checkpoint.run_id)
        try:
            with self._open_files.hold(stripe) as held:
                assert held is not None
                written = self._save_locked(held, target, checkpoint, doc, signals)
        except OSError as exc:
            raise self._failed(exc, "save", checkpoint.run_id, target, INTACT) from exc
        wrote(written)
        return evolve(checkpoint, etag=etag, updated_at=doc["updated_at"])

    def _save_locked(
        self, stripe: Stripe, target: Path, cp: Checkpoint, doc: dict[str, Any], signals: object
    ) -> int:
        meta = journal.meta_of(doc)
        path = str(target)
        file = stripe.open_run(path)
        try:
            end = None if file is None else self._end(file.fd, file.size, cp.run_id, target, file)
            if (end and end.etag) != cp.etag:
                raise conflict(cp.run_id, cp.etag, end is None)
            known = self._known.get(cp.run_id)
            if known is not None and known.etag != cp.etag:
                known = None
            if file is not None and end is not None and end.end is not None:
                body, sizes = journal.body(
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
                    check_size(cp.run_id, sizes.state + sizes.calls, self.max_state_bytes)
                    meta["sizes"] = sizes
                    m = dumps(meta)
                    record = journal.frame(m, body, doc["etag"])
                    base = journal.snapshot_length(len(m), sizes)
                if sizes is not None and end.end + len(record) <= journal.compact_at(base):
                    self._append(file.fd, record, end, cp.run_id, target)
                    new_end = end.end + len(record)
                    stripe.appended(path, new_end, doc["etag"])
                    self._remember(
                        cp.run_id,
                        _Known(doc["etag"], new_end, end.base, cp.steps, signals, sizes, cp.calls),
                    )
                    return len(record)
        finally:
            stripe.done(file)
        # A new file: the kept one is closed first (Windows refuses to replace an open file).
        stripe.forget(path)
        body, whole = journal.body(doc, None, None, True, None)
        assert whole is not None  # every part written whole is measured
        check_size(cp.run_id, whole.state + whole.calls, self.max_state_bytes)
        meta["sizes"] = whole
        snapshot = journal.frame(dumps(meta), body, doc["etag"])
        atomic_write(target, snapshot)
        size = len(snapshot)
        self._remember(
            cp.run_id, _Known(doc["etag"], size, size, cp.steps, signals, whole, cp.calls)
        )
        return size

    def _end(
        self, fd: int, size: int, run_id: str, target: Path, file: RunFile | None = None
    ) -> _End:
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
                or journal_tail.tail_etag(fd, size) == known.etag
            )
        ):
            return _End(known.etag, size, size, known.base, known.sizes)
        base = journal_tail.first_length(fd)
        if base is None:  # an earlier version's whole document (damage is raised here)
            doc, etag, _ = _parse(fileio.read_all(fd), run_id, str(target))
            return _End(from_document(doc, run_id, etag, str(target)).etag, None, size, 0)
        last = journal_tail.last_record(fd, size)
        if last is not None:
            return _End(last.etag, size, size, base, journal.sizes_of(last.meta))
        records = journal.scan(fileio.read_all(fd), run_id, str(target))
        last = records[-1]
        return _End(last.etag, last.end, size, base, journal.sizes_of(last.meta))

    def _append(self, fd: int, record: bytes, end: _End, run_id: str, target: Path) -> None:
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
                raise os_error(exc, f"save run {run_id!r}", target, self.path, UNSURE) from exc
            raise

    # -- delete and list ----------------------------------------------------------------

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """Remove the run's checkpoint; False if it had none. With ``etag``, only if the
        run is still at that etag (else ``ConflictError``). ``run_id`` may also be the
        name under which ``list_runs`` reported a file it could not read."""
        target = self.file_for(run_id)
        with self._io("delete", run_id, target, " Nothing was deleted."):
            if not os.path.lexists(target):
                listed = listing.unreadable_file(self._dir(), run_id)
                if listed is None:
                    return False
                target = listed
            with self._lock(target) as stripe:
                assert stripe is not None
                stripe.forget(str(target))
                fd = open_existing(target, os.O_RDONLY)
                if fd is None:
                    return False
                try:
                    size = os.fstat(fd).st_size
                    if etag is not None and self._end(fd, size, run_id, target).etag != etag:
                        raise delete_conflict(run_id)
                finally:
                    os.close(fd)
                platform.current.remove(str(target))
                with contextlib.suppress(FileNotFoundError):
                    platform.current.remove(str(target.with_name(f".tmp-{target.name}")))
                try:
                    platform.current.sync_dir(str(self._runs))
                except OSError as exc:
                    what = f"delete run {run_id!r}"
                    raise os_error(exc, what, target, self.path, GONE) from exc
        with self._known_lock:
            self._known.pop(run_id, None)
        return True

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        updated_before: float | None = None,
        due_before: float | None = None,
        limit: int | None = None,
    ) -> Iterator[RunInfo]:
        """The runs, read one file at a time: of each, the last record's fields (never
        its state). A file it cannot read is an entry with ``error`` set, named by its
        file name (which ``load`` and ``delete`` accept). Removes stale temp files."""
        check_filters(status, limit)
        with self._io("list the runs in", None, self._runs, ""):
            entries = sorted(os.scandir(self._runs), key=lambda e: e.name)
        return listing.run_infos(
            self._dir(),
            entries,
            status=status,
            workflow=workflow,
            updated_before=updated_before,
            due_before=due_before,
            limit=limit,
        )

    def run_info(self, run_id: str) -> RunInfo | None:
        """One run as ``list_runs`` lists it (its last record's fields, never its state);
        None when it has no checkpoint. An unreadable one: ``CorruptCheckpointError``."""
        target = self.file_for(run_id)
        info = listing.entry_of(self._dir(), target)
        if info is not None and info.error is not None:
            raise CorruptCheckpointError(info.error, run_id=run_id)
        return info

    def _load_listed(self, name: str) -> Checkpoint | None:
        with self._io("load", name, self._runs / name, ""):
            path = listing.unreadable_file(self._dir(), name)
        if path is None:
            return None
        with self._io("load", name, path, ""):
            data = read_file(path) or b""
        listing.decode_file(self._dir(), path, data)  # raises what makes it unreadable, naming it
        return None

    # -- the rest -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the files kept open between saves (the store stays usable: it opens
        them again when needed)."""
        self._open_files.close()

    def __enter__(self) -> FileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _remember(self, run_id: str, known: _Known) -> None:
        with self._known_lock:
            if run_id in self._known and next(reversed(self._known)) == run_id:
                self._known[run_id] = known  # already the most recent: stays last
                return
            self._known.pop(run_id, None)
            self._known[run_id] = known
            if len(self._known) > _REMEMBERED:
                del self._known[next(iter(self._known))]

    def _dir(self) -> listing.RunsDir:
        """What the listing needs of this store (made per call: kept, it would make the
        store part of a reference cycle, and only a garbage collection would close it)."""
        return listing.RunsDir(self.path, self._runs, self.file_for, self._try_lock)

    def _try_lock(self, file: Path) -> AbstractContextManager[Stripe | None]:
        return self._lock(file, wait=False)

    def _lock(self, file: Path, *, wait: bool = True) -> AbstractContextManager[Stripe | None]:
        """The run file's stripe lock, held across threads and processes; yields None
        only when ``wait`` is False and another writer holds it."""
        match = listing.STRIPE.search(file.name)
        return self._open_files.hold(int(match[1], 16) % _STRIPES if match else 0, wait=wait)

    @contextlib.contextmanager
    def _io(self, doing: str, run_id: str | None, path: Path, outcome: str) -> Iterator[None]:
        """Around file-system calls: an OSError becomes the StoreError that says what
        was being done, where, what to do, and what became of the checkpoint."""
        try:
            yield
        except OSError as exc:
            raise self._failed(exc, doing, run_id, path, outcome) from exc

    def _failed(
        self, exc: OSError, doing: str, run_id: str | None, path: Path, outcome: str
    ) -> StoreError:
        what = doing if run_id is None else f"{doing} run {run_id!r}"
        if isinstance(exc, NotDurableError):
            outcome = WRITTEN
        return os_error(exc, what, path, self.path, outcome)


def _parse(data: bytes, run_id: str, where: str) -> tuple[Any, str | None, _Known | None]:
    """A run file's document and etag; for a journal also what a writer needs to know."""
    doc, etag, records = journal.parse(data, run_id, where)
    if not records:
        return doc, etag, None
    last, sizes = records[-1], journal.sizes_of(doc)  # doc: the last record's meta and more
    return doc, etag, _Known(last.etag, last.end, records[0].end, (), b"", sizes)


def _signals_key(signals: Mapping[str, Any]) -> object:
    """What tells whether the signals changed: frozen ones (the runner's) cannot change
    in place, so they are kept as they are; others as their JSON."""
    return signals if is_checked(signals) else dumps(dict(signals))
