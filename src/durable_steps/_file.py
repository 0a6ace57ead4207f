"""FileStore: one journal per run in a local directory, crash-safe and private.

Layout::

    PATH/runs/<slug>-<hash>.json       the run's file: a journal (``_journal``), or one
                                       whole JSON document if an earlier version wrote it
    PATH/runs/.tmp-<slug>-<hash>.json  that file's next version while it is written
    PATH/locks/<00..ff>.lock           lock stripes that serialise the writers of a run

A save takes the run's stripe lock (across processes, not only threads), reads
the etag from the end of the run's file and compares it (``ConflictError``, and
nothing written, on a mismatch), then either

- appends one record holding the save's changes and ``fdatasync``s the file:
  one sync per save; a torn tail left by a killed save is cut off first; or
- writes the whole checkpoint as a new file: temporary file, write, fsync,
  rename over the run's file, fsync of the directory. That is how a run's file
  is created, how an earlier version's file is migrated, and how a journal is
  compacted once it outgrows ``_journal.compact_at``.

Readers take no lock: they read what is there and the torn-tail rule leaves out
a save still being appended; a rename is atomic. The temporary file has one name
per run file, used only under that run's lock, so a crashed save's leftover is
replaced by the run's next new file and removed by a listing (under a
non-blocking try of its stripe's lock: never a live writer's). A save touches
its run's file and one lock file, whatever the number of runs.

The store remembers, per run, what it last read or wrote (etag, file length,
step names, signals): a save on top of that etag writes only the names and
signals that are new, and need not re-read the last record to trust the end.

Files are 0600 and the directories it creates 0700, whatever the umask. Every
``OSError`` leaves as ``StoreError`` naming the run, the path and what to do.
Platform differences (locks, syncs, renames) live in ``_platform``. No promise
on network file systems, whose locks and syncs may not mean what they mean on a
local disk.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from . import _journal as journal
from . import _platform
from ._errors import DurableError, StoreError
from ._observe import wrote
from ._platform import BINARY, NOFOLLOW
from ._state import delta_since, is_checked
from ._store import (
    Checkpoint,
    RunInfo,
    check_filters,
    check_run_id,
    conflict,
    corrupt_error,
    delete_conflict,
    dumps,
    from_document,
    info_of,
    info_of_meta,
    loads,
    matches,
    to_document,
)

_STRIPES = 256
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_RUN_FILE = re.compile(r"(?:[a-z0-9_-]*-)?[0-9a-f]{40}\.json")
_STRIPE = re.compile(r"([0-9a-f]{2})\.json$")
_REMEMBERED = 1024
_ADVICE = {
    errno.ENOSPC: "the disk is full: free disk space, then retry",
    errno.EDQUOT: "the disk quota is used up: free space or raise the quota, then retry",
    errno.EROFS: "the file system is read-only: remount it read-write, or point "
    "DURABLE_FILE_PATH at a writable directory",
    errno.EACCES: "fix the permissions: give the user running this read and write access "
    "to {store} (its files are private to the user that created them)",
    errno.EIO: "the disk reported an I/O error: check it (e.g. dmesg) before retrying",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n)",
}
_ADVICE[errno.EPERM] = _ADVICE[errno.EACCES]
_INTACT = " Nothing was saved; the previous checkpoint is intact."
_UNSURE = " The save may or may not be stored: load the run to see which."
_WRITTEN = (
    " The checkpoint was written, but the directory could not be synced, so it may not "
    "survive a power cut: load the run to see what is stored."
)
_GONE = " The run's file was removed, but after a power cut it may reappear."


class _Known(NamedTuple):
    """What this store last read or wrote of a run's file."""

    etag: str
    end: int
    base: int
    steps: tuple[str, ...]
    signals: object  # frozen signals as they are, others as JSON (see _signals_key)


class _End(NamedTuple):
    """The end of a run's file as a writer finds it under the lock."""

    etag: str | None
    end: int | None  # None: a whole document of an earlier version, not a journal
    size: int
    base: int


def atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` as ``target`` so that a crash leaves the old file or the new, whole:
    temporary file, write, fsync, rename over ``target``, fsync of the directory."""
    tmp = target.with_name(f".tmp-{target.name}")
    platform = _platform.current
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY | NOFOLLOW, 0o600)
        try:
            platform.private(fd)
            journal.write_at(fd, 0, data)
            platform.sync_file(fd)
        finally:
            os.close(fd)
        platform.replace(str(tmp), str(target))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        platform.sync_dir(str(target.parent))
    except OSError as exc:
        raise NotDurableError(exc.errno, exc.strerror, exc.filename) from exc


class NotDurableError(OSError):
    """The new file replaced the old one, but its directory could not be synced."""


class FileStore:
    """Checkpoints as files under ``path`` (created if missing)."""

    def __init__(self, path: str | os.PathLike[str] = ".durable") -> None:
        self.path = Path(path)
        self._runs = self.path / "runs"
        self._locks = self.path / "locks"
        self._known: dict[str, _Known] = {}
        self._files: dict[str, Path] = {}  # run id -> its file (a hash and a regex saved)
        self._known_lock = threading.Lock()
        self._stripes = [str(self._locks / f"{i:02x}.lock") for i in range(_STRIPES)]
        with self._io("open the store", None, self.path, ""):
            for d in (self.path, self._runs, self._locks):
                _make_dir(d)

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    def file_for(self, run_id: str) -> Path:
        """The run's file: a readable slug plus a hash, so any valid run id (unicode,
        ``..``, 255 characters, ids differing only in case) maps to its own short
        name strictly inside the store, on case-insensitive file systems too."""
        path = self._files.get(run_id)
        if path is None:
            digest = hashlib.sha256(check_run_id(run_id).encode()).hexdigest()[:40]
            slug = _UNSAFE.sub("_", run_id.lower()).strip("_")[:48]
            path = self._runs / (f"{slug}-{digest}.json" if slug else f"{digest}.json")
            if len(self._files) >= _REMEMBERED:
                self._files.clear()
            self._files[run_id] = path
        return path

    # -- load and save ------------------------------------------------------------------

    def load(self, run_id: str) -> Checkpoint | None:
        target = self.file_for(run_id)
        with self._io("load", run_id, target, ""):
            data = _read(target)
        if data is None:
            return self._load_listed(run_id)
        doc, etag, known = _parse(data, run_id, str(target))
        cp = from_document(doc, run_id, etag, str(target))
        if known is not None:
            self._remember(run_id, known._replace(steps=cp.steps, signals=_signals_key(cp.signals)))
        return cp

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        etag = secrets.token_hex(12)
        doc = to_document(checkpoint, etag=etag)  # bad state fails here, before any I/O
        signals = _signals_key(checkpoint.signals)
        target = self.file_for(checkpoint.run_id)
        with self._io("save", checkpoint.run_id, target, _INTACT), self._lock(target):
            written = self._save_locked(target, checkpoint, doc, signals)
        wrote(written)
        return replace(checkpoint, etag=etag, updated_at=doc["updated_at"])

    def _save_locked(
        self, target: Path, cp: Checkpoint, doc: dict[str, Any], signals: object
    ) -> int:
        meta = journal.meta_of(doc)
        fd = _open(target, os.O_RDWR)
        try:
            end = None if fd is None else self._end(fd, cp.run_id, target)
            if (end and end.etag) != cp.etag:
                raise conflict(cp.run_id, cp.etag, end is None)
            known = self._known.get(cp.run_id)
            if known is not None and known.etag != cp.etag:
                known = None
            if fd is not None and end is not None and end.end is not None:
                delta = delta_since(cp.state, cp.etag)
                body = journal.body_of(
                    doc,
                    delta,
                    None if known is None else known.steps,
                    known is None or not (known.signals is signals or known.signals == signals),
                )
                record = journal.encode(meta, body, doc["etag"])
                if end.end + len(record) <= journal.compact_at(end.base):
                    self._append(fd, record, end, cp.run_id, target)
                    new_end = end.end + len(record)
                    self._remember(
                        cp.run_id, _Known(doc["etag"], new_end, end.base, cp.steps, signals)
                    )
                    return len(record)
        finally:
            if fd is not None:
                os.close(fd)  # before a rename over it: Windows refuses to replace an open file
        snapshot = journal.encode(meta, journal.snapshot_body(doc), doc["etag"])
        atomic_write(target, snapshot)
        size = len(snapshot)
        self._remember(cp.run_id, _Known(doc["etag"], size, size, cp.steps, signals))
        return size

    def _end(self, fd: int, run_id: str, target: Path) -> _End:
        """The etag and the end of the last valid record, reading the file's end only
        (all of it only after a torn save, or for an earlier version's file)."""
        size = os.fstat(fd).st_size
        known = self._known.get(run_id)
        if known is not None and known.end == size and journal.tail_etag(fd, size) == known.etag:
            return _End(known.etag, size, size, known.base)
        base = journal.first_length(fd)
        if base is None:  # an earlier version's whole document (damage is raised here)
            doc, etag, _ = _parse(journal.read_all(fd), run_id, str(target))
            return _End(from_document(doc, run_id, etag, str(target)).etag, None, size, 0)
        last = journal.last_record(fd, size)
        if last is not None:
            return _End(last.etag, size, size, base)
        records = journal.scan(journal.read_all(fd), run_id, str(target))
        return _End(records[-1].etag, records[-1].end, size, base)

    def _append(self, fd: int, record: bytes, end: _End, run_id: str, target: Path) -> None:
        assert end.end is not None
        try:
            if end.size > end.end:
                os.ftruncate(fd, end.end)  # the torn tail of a save that was killed
            journal.write_at(fd, end.end, record)
            _platform.current.sync_data(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, end.end)
            except OSError:
                raise _os_error(exc, f"save run {run_id!r}", target, self.path, _UNSURE) from exc
            raise

    # -- delete and list ----------------------------------------------------------------

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """Remove the run's checkpoint; False if it had none. With ``etag``, only if the
        run is still at that etag (else ``ConflictError``). ``run_id`` may also be the
        name under which ``list_runs`` reported a file it could not read."""
        target = self.file_for(run_id)
        with self._io("delete", run_id, target, " Nothing was deleted."):
            if not os.path.lexists(target):
                listed = self._listed(run_id)
                if listed is None:
                    return False
                target = listed
            with self._lock(target):
                fd = _open(target, os.O_RDONLY)
                if fd is None:
                    return False
                try:
                    if etag is not None and self._end(fd, run_id, target).etag != etag:
                        raise delete_conflict(run_id)
                finally:
                    os.close(fd)
                _platform.current.remove(str(target))
                with contextlib.suppress(FileNotFoundError):
                    _platform.current.remove(str(target.with_name(f".tmp-{target.name}")))
                try:
                    _platform.current.sync_dir(str(self._runs))
                except OSError as exc:
                    what = f"delete run {run_id!r}"
                    raise _os_error(exc, what, target, self.path, _GONE) from exc
        with self._known_lock:
            self._known.pop(run_id, None)
        return True

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        updated_before: float | None = None,
        limit: int | None = None,
    ) -> Iterator[RunInfo]:
        """The runs, read one file at a time: of each, the last record's fields (never
        its state). A file it cannot read is an entry with ``error`` set, named by its
        file name (which ``load`` and ``delete`` accept). Removes stale temp files."""
        check_filters(status, limit)
        with self._io("list the runs in", None, self._runs, ""):
            entries = sorted(os.scandir(self._runs), key=lambda e: e.name)
        return self._listing(entries, status, workflow, updated_before, limit)

    def _listing(
        self,
        entries: list[os.DirEntry[str]],
        status: str | None,
        workflow: str | None,
        updated_before: float | None,
        limit: int | None,
    ) -> Iterator[RunInfo]:
        left = limit
        for entry in entries:
            if left == 0:
                return
            if entry.name.startswith(".tmp-"):
                self._sweep(Path(entry.path))
                continue
            if entry.name.startswith(".") or not entry.name.endswith(".json"):
                continue
            with contextlib.suppress(OSError):  # when in doubt, _info looks closer
                if not entry.is_file(follow_symlinks=False):
                    continue
            info = self._info(Path(entry.path))
            if info is not None and matches(info, status, workflow, updated_before):
                yield info
                left = None if left is None else left - 1

    def _info(self, path: Path) -> RunInfo | None:
        """The listing entry of one file; None if it is gone or not a regular file."""
        try:
            fd = os.open(path, os.O_RDONLY | BINARY)
        except FileNotFoundError:
            return None  # deleted while we listed
        except OSError as exc:
            return _unreadable(path, 0, None, _os_error(exc, "read", path, self.path, ""))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            try:
                return self._info_of(fd, st.st_size, path)
            except OSError as exc:
                error: DurableError = _os_error(exc, "read", path, self.path, "")
            except DurableError as exc:
                error = exc
            return _unreadable(path, st.st_size, st.st_mtime, error)
        finally:
            os.close(fd)

    def _info_of(self, fd: int, size: int, path: Path) -> RunInfo:
        found = None
        if journal.is_journal(journal.read_at(fd, 0, 1)):
            found = journal.last_meta(fd, size)
        if found is not None:
            meta, etag = found
            info = info_of_meta(loads(meta, path.name, str(path)), etag, size, path.name, str(path))
            self._check_names(path, info.run_id)
            return info
        return info_of(self._decode_file(path, journal.read_all(fd)), size)

    def _decode_file(self, path: Path, data: bytes) -> Checkpoint:
        """The checkpoint in a file found in runs/, whose run id only the file can tell."""
        doc, etag, _ = _parse(data, path.name, str(path))
        run_id = doc.get("run_id") if isinstance(doc, dict) else None
        self._check_names(path, run_id)
        assert isinstance(run_id, str)
        return from_document(doc, run_id, etag, str(path))

    def _check_names(self, path: Path, run_id: object) -> None:
        if not isinstance(run_id, str) or self.file_for(run_id) != path:
            raise corrupt_error(
                path.name, str(path), f"it does not name its run (it says {run_id!r})"
            )

    def _listed(self, name: str) -> Path | None:
        """The file that a listing reported as unreadable under this name, if any: a
        readable checkpoint of another run is never addressed by its file name."""
        path = self._runs / name
        if not _RUN_FILE.fullmatch(name):
            return None
        data = _read(path)
        if data is None:
            return None
        try:
            self._decode_file(path, data)
        except DurableError:
            return path
        return None

    def _load_listed(self, name: str) -> Checkpoint | None:
        with self._io("load", name, self._runs / name, ""):
            path = self._listed(name)
        if path is None:
            return None
        with self._io("load", name, path, ""):
            data = _read(path) or b""
        self._decode_file(path, data)  # raises what makes it unreadable, naming the file
        return None

    def _sweep(self, tmp: Path) -> None:
        """Remove a temp file left by a crashed save, if no writer of its stripe is busy."""
        if not _STRIPE.search(tmp.name):
            return
        with contextlib.suppress(OSError), self._lock(tmp, wait=False) as free:
            if free:
                _platform.current.remove(str(tmp))

    # -- the rest -----------------------------------------------------------------------

    def close(self) -> None:
        """Nothing to release; present so every store closes alike."""

    def __enter__(self) -> FileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _remember(self, run_id: str, known: _Known) -> None:
        with self._known_lock:
            self._known.pop(run_id, None)
            self._known[run_id] = known
            if len(self._known) > _REMEMBERED:
                del self._known[next(iter(self._known))]

    @contextlib.contextmanager
    def _lock(self, file: Path, *, wait: bool = True) -> Iterator[bool]:
        """The run file's stripe lock, held across processes; yields False only when
        ``wait`` is False and another writer holds it."""
        match = _STRIPE.search(file.name)
        path = self._stripes[int(match[1], 16) % _STRIPES if match else 0]
        fd = _open(path, os.O_RDWR) or _create_private(path)
        platform = _platform.current
        try:
            locked = True
            if wait:
                platform.lock(fd)
            else:
                locked = platform.try_lock(fd)
            try:
                yield locked
            finally:
                if locked:
                    platform.unlock(fd)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _io(self, doing: str, run_id: str | None, path: Path, outcome: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            what = doing if run_id is None else f"{doing} run {run_id!r}"
            if isinstance(exc, NotDurableError):
                outcome = _WRITTEN
            raise _os_error(exc, what, path, self.path, outcome) from exc


def _parse(data: bytes, run_id: str, where: str) -> tuple[Any, str | None, _Known | None]:
    """A run file's document and etag; for a journal also what a writer needs to know."""
    if not journal.is_journal(data):
        doc = loads(data, run_id, where)  # an earlier version's whole document
        etag = doc.get("etag") if isinstance(doc, dict) else None
        return doc, etag if isinstance(etag, str) else None, None
    doc, records = journal.replay(data, run_id, where)
    last = records[-1]
    return doc, last.etag, _Known(last.etag, last.end, records[0].end, (), b"")


def _signals_key(signals: Mapping[str, Any]) -> object:
    """What tells whether the signals changed: frozen ones (the runner's) cannot change
    in place, so they are kept as they are; others as their JSON."""
    return signals if is_checked(signals) else dumps(dict(signals))


def _read(path: Path) -> bytes | None:
    fd = _open(path, os.O_RDONLY)
    if fd is None:
        return None
    try:
        return journal.read_all(fd)
    finally:
        os.close(fd)


def _open(path: Path | str, flags: int) -> int | None:
    try:
        return os.open(path, flags | BINARY)
    except FileNotFoundError:
        return None


def _create_private(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | BINARY | NOFOLLOW, 0o600)
    _platform.current.private(fd)
    return fd


def _make_dir(d: Path) -> None:
    """Create ``d`` and missing parents as 0700 whatever the umask, each durably."""
    if d.is_dir():
        return
    if not d.parent.is_dir():
        _make_dir(d.parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o700)
        os.chmod(d, 0o700)
        _platform.current.sync_dir(str(d.parent))


def _unreadable(path: Path, size: int, mtime: float | None, error: DurableError) -> RunInfo:
    return RunInfo(path.name, -1, None, False, mtime, size, None, str(error))


def _os_error(exc: OSError, doing: str, path: Path, store: Path, outcome: str) -> StoreError:
    advice = _ADVICE.get(exc.errno or 0, "check the disk and the store's directory")
    return StoreError(
        f"FileStore could not {doing} at {exc.filename or path}: {exc.strerror or exc}; "
        f"{advice.format(store=store)}.{outcome}",
        status_code=None,
    )
