"""FileStore: checkpoints as one log per run in a local directory.

Layout::

    PATH/runs/<slug>-<hash>.json       the run's file: a log of records, or one whole JSON
                                       document if an earlier version wrote it
    PATH/runs/.tmp-<slug>-<hash>.json  that file's next version while it is written
    PATH/locks/<00..ff>.lock           lock stripes that serialise the writers of a run
    PATH/history/<slug>-<hash>/<n>.log the run's logs that compactions superseded (its
                                       history: ``history``)

The run file's format, the torn-tail rule, compaction, what a save syncs and
what is promised: ``runfile``; reading a file's head and tail: ``runfile_tail``.
Durable new files, private modes, bytes at an offset and the ``StoreError`` an
``OSError`` becomes: ``fileio``. Listing, and files that no run claims: ``listing``.
The files kept open between saves: ``open_files``. Locks, syncs and renames per
operating system: ``platform``.

A save (``_save_locked``) appends its record, or writes a new snapshot file when
the run has no log yet or when its log has outgrown ``compact_at``. It
touches its run's file and one lock file, whatever the number of runs. The
temporary file has one name per run file, used only under that run's lock, so a
crashed save's leftover is replaced by the run's next new file or removed by a
runs_listing.

The store remembers, per run, what it last read or wrote (``writer.Known``: etag,
file length, first record's length, step names, signals): a save on top of that
etag writes only the step names and signals that are new, and trusts the file's end
from its TAIL alone. When in doubt (another writer, another process), it writes
them whole and checks the last record in full. What a save writes under the lock is
``writer``'s. History and retention (``run_history``, ``load_at``, ``delete_expired``,
``prune_orphans``): ``retention``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ...seam.checkpoint import Checkpoint, RunInfo, evolve, head_of
from ...seam.codec import Codec
from ...seam.document import from_document, head_document, to_document
from ...seam.encoded import opened, room, sealed
from ...seam.errors import (
    CorruptCheckpointError,
    StoreError,
    conflict,
    delete_conflict,
)
from ...seam.etags import new_etag
from ...seam.history import keep
from ...seam.items import Item, checked, item_json
from ...seam.lease import owner_gone
from ...seam.metering import wrote
from ...seam.rules import RunFilter, check_run_id, head_etag, state_limit
from . import history as kept_logs
from . import listing as runs_listing
from . import platform
from .due_index import DueIndex, due_at
from .expiry import ExpiryIndex
from .fileio import (
    GONE,
    INTACT,
    WRITTEN,
    NotDurableError,
    make_dir,
    open_existing,
    os_error,
    read_file,
)
from .items import ItemLogs
from .open_files import OpenFiles, Stripe
from .retention import KeptRuns
from .runfile_tail import read_head
from .wake import Procs
from .writer import Writer, parse, signals_key

_STRIPES = 256
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_REMEMBERED = 1024


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a FileStore (its ``runs/`` directory)."""
    return (Path(path) / "runs").is_dir()


class FileStore(KeptRuns):
    """Checkpoints as files under ``path`` (created if missing). ``max_state_bytes``: the
    state size limit (default ``MAX_STATE_BYTES``). ``history`` / ``keep_last``: what
    is kept of each run's completed steps (``seam.history``); ``finished_ttl``: seconds
    after a run ended when ``delete_expired`` (the worker, ``runs prune``) deletes it.
    ``codec``: state values and call results compressed and/or encrypted at rest
    (``ValueCodec``, ``seam.encoded``)."""

    kind = "FileStore"
    encodes_values = True  # its saves and loads go through seam.encoded, at their edges
    sees_gone_owners = True  # takeable sweeps procs/: a dead process's runs are due now

    def __init__(
        self,
        path: str | os.PathLike[str] = ".durable",
        *,
        max_state_bytes: int | None = None,
        history: str = "steps",
        keep_last: int | None = None,
        finished_ttl: int | None = None,
        codec: Codec | None = None,
    ) -> None:
        self.path = Path(path)
        self.max_state_bytes = state_limit(max_state_bytes)
        self.history = keep(history, keep_last)
        self.finished_ttl = finished_ttl
        self.codec = codec  # read by each save and load, so a later store.codec = ... holds
        self._runs = self.path / "runs"
        self._locks = self.path / "locks"
        self._files: dict[str, tuple[Path, int]] = {}  # run id -> its file and stripe
        self._writer = Writer(self.path, self.history)
        self._stripes = [str(self._locks / f"{i:02x}.lock") for i in range(_STRIPES)]
        with self._io("open the store", None, self.path, ""):
            fresh = not self._runs.is_dir()
            for d in (self.path, self._runs, self._locks):
                make_dir(d)
            self._due = DueIndex(self.path / "due", empty_store=fresh)
            self._expiry = ExpiryIndex(self.path, finished_ttl, empty_store=fresh)
        self._open_files = OpenFiles(self._stripes)
        self._items = ItemLogs(self.path / "items")
        self._procs = Procs(self.path / "procs")
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
        return self._load(run_id, values=True)

    def _load(self, run_id: str, *, values: bool) -> Checkpoint | None:
        """The run's checkpoint; ``values``: decoded (else as stored: no key needed)."""
        target = self.file_for(run_id)
        with self._io("load", run_id, target, ""):
            data = read_file(target)
        if data is None:
            return self._load_listed(run_id)
        doc, etag, known = parse(data, run_id, str(target))
        cp = from_document(doc, run_id, etag, str(target))
        if values:
            cp = opened(self.codec, cp)
        if known is not None:
            known = known._replace(steps=cp.steps, signals=signals_key(cp.signals))
            self._writer.remember(run_id, known)
        return cp

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        plain, codec = checkpoint, self.codec
        # bad state fails here, before any I/O; from here on, values as stored
        checkpoint = sealed(codec, checkpoint, self.max_state_bytes)
        etag = new_etag()
        doc = to_document(checkpoint, etag=etag)
        signals = signals_key(checkpoint.signals)
        target, stripe = self._target(checkpoint.run_id)
        try:
            with self._open_files.hold(stripe) as held:
                assert held is not None
                bucket = self._due.note(target.name, _due(checkpoint), checkpoint.etag)
                expires = self._expiry.note(target.name, checkpoint, doc["updated_at"])
                limit = room(codec, self.max_state_bytes)
                written = self._writer.save(held, target, checkpoint, doc, signals, limit=limit)
                self._due.noted(target.name, bucket, etag)
                self._expiry.noted(target.name, expires, etag)
        except OSError as exc:
            raise self._failed(exc, "save", checkpoint.run_id, target, INTACT) from exc
        wrote(written)
        self._told(checkpoint)
        return evolve(plain, etag=etag, updated_at=doc["updated_at"], started_at=doc["started_at"])

    def _told(self, checkpoint: Checkpoint) -> None:
        """After a save: the processes that use the store told what it means to them
        (``wake``): a run takeable now wakes the idle workers; a lease held says this
        process holds leases (once)."""
        due = _due(checkpoint)
        with contextlib.suppress(OSError):  # a hint: the poll and the lease stay
            if due is not None and due <= time.time():
                self._procs.notify()
            elif checkpoint.owner is not None and checkpoint.lease_expires is not None:
                self._procs.register()

    def load_head(self, run_id: str) -> Checkpoint | None:
        """The run's checkpoint but its data (``HeadStore``): the last record, and its
        step names and signals where that record says they lie (``head_place``); the
        file is read as ``load`` reads it where it says nothing (an earlier version's).
        Its values are not decoded: no key is needed."""
        target = self.file_for(run_id)
        with self._io("load", run_id, target, ""):
            found = read_head(target)  # the last record and where it says the head is
        if found is not None:
            with contextlib.suppress(CorruptCheckpointError):  # (then: the file, whole)
                return head_of(from_document(found[0], run_id, found[1], str(target)))
        cp = self._load(run_id, values=False)
        return None if cp is None else head_of(cp)

    def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        """Every field but the data, on top of the stored version (``HeadStore``): one
        record of the fields, the step names and the signals -- no state, no journal --
        appended and synced as a save's is. A file of an earlier version is saved whole
        (read first), as its next save would."""
        head_etag(checkpoint)
        doc = head_document(checkpoint, etag=new_etag())
        target, stripe = self._target(checkpoint.run_id)
        try:
            with self._open_files.hold(stripe) as held:
                assert held is not None
                bucket = self._due.note(target.name, _due(checkpoint), checkpoint.etag)
                expires = self._expiry.note(target.name, checkpoint, doc["updated_at"])
                written = self._writer.save_head(held, target, checkpoint, doc)
                if written is not None:
                    self._due.noted(target.name, bucket, doc["etag"])
                    self._expiry.noted(target.name, expires, doc["etag"])
        except OSError as exc:
            raise self._failed(exc, "save", checkpoint.run_id, target, INTACT) from exc
        if written is None:
            stored = self.load(checkpoint.run_id)
            if stored is None or stored.etag != checkpoint.etag:
                raise conflict(checkpoint.run_id, checkpoint.etag, stored is None)
            return head_of(self.save(evolve(checkpoint, state=stored.state, calls=stored.calls)))
        wrote(written)
        self._told(checkpoint)
        return head_of(
            evolve(
                checkpoint,
                etag=doc["etag"],
                updated_at=doc["updated_at"],
                started_at=doc["started_at"],
            )
        )

    # -- delete and list ----------------------------------------------------------------

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """Remove the run's checkpoint; False if it had none. With ``etag``, only if the
        run is still at that etag (else ``ConflictError``). ``run_id`` may also be the
        name under which ``list_runs`` reported a file it could not read."""
        target = self.file_for(run_id)
        with self._io("delete", run_id, target, " Nothing was deleted."):
            if not os.path.lexists(target):
                listed = runs_listing.unreadable_file(self._dir(), run_id)
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
                    if etag is not None and self._writer.end(fd, size, run_id, target).etag != etag:
                        raise delete_conflict(run_id)
                finally:
                    os.close(fd)
                platform.current.remove(str(target))
                with contextlib.suppress(FileNotFoundError):
                    platform.current.remove(str(target.with_name(f".tmp-{target.name}")))
                kept_logs.remove(self.path, target)  # its history goes with it
                try:
                    platform.current.sync_dir(str(self._runs))
                    self._items.remove(target.stem)
                except OSError as exc:
                    what = f"delete run {run_id!r}"
                    raise os_error(exc, what, target, self.path, GONE) from exc
        self._writer.forget(run_id)
        self._due.forget(target.name)
        self._expiry.forget(target.name)
        return True

    def listing(self, filters: RunFilter) -> Iterator[RunInfo]:
        """The runs, read one file at a time: of each, the last record's fields (never
        its state). A file it cannot read is an entry with ``error`` set, named by its
        file name (which ``load`` and ``delete`` accept). Removes stale temp files."""
        with self._io("list the runs in", None, self._runs, ""):
            entries = sorted(os.scandir(self._runs), key=lambda e: e.name)
        return runs_listing.run_infos(self._dir(), entries, filters)

    # -- discovery: the index of runs to take, ``due_index`` ----------------------------

    def takeable(self, workflows: Sequence[str], *, at: float) -> Iterator[RunInfo]:
        """The runs a worker may take at ``at`` (``Store.takeable``): the index's due
        entries, each checked against its run's file; entries that disagree are moved
        (under the run's lock). An incomplete index is rebuilt first (a full listing)."""
        names = set(workflows)
        with self._io("look for runs to take in", None, self._due.root, ""):
            if not self._due.complete():
                self._due.rebuild(self.listing(RunFilter()), lambda r: self.file_for(r).name)
            self._procs.sweep(self._orphans_due)  # a dead process's runs: due now
            d = self._dir()
            for info in self._due.look(
                at,
                lambda name: runs_listing.entry_of(d, self._runs / name),
                lambda name: self._try_lock(self._runs / name),
            ):
                if info.workflow in names:
                    yield info

    def _orphans_due(self) -> int:
        """Every running run whose lease owner is visibly gone, noted due now (one
        listing: a process of this store died); how many."""
        n = 0
        for info in self.listing(RunFilter(status="running")):
            if info.owner is not None and owner_gone(info.owner):
                self._due.due_now(self.file_for(info.run_id).name)
                n += 1
        return n

    def wake_on_start(self, port: int) -> bool:
        """``Store.wake_on_start``: a datagram to 127.0.0.1:``port`` each time a save
        makes a run takeable now (``wake``)."""
        with self._io("register a worker with", None, self._procs.root, ""):
            self._procs.register(port)
        return True

    def processes(self) -> list[str] | None:
        """``Store.processes``: the processes registered in ``procs/`` (``wake``)."""
        with self._io("list the processes of", None, self._procs.root, ""):
            return self._procs.owners()

    def run_info(self, run_id: str) -> RunInfo | None:
        """One run as ``list_runs`` lists it (its last record's fields, never its state);
        None when it has no checkpoint. An unreadable one: ``CorruptCheckpointError``."""
        target = self.file_for(run_id)
        info = runs_listing.entry_of(self._dir(), target)
        if info is not None and info.error is not None:
            raise CorruptCheckpointError(info.error, run_id=run_id)
        return info

    def _load_listed(self, name: str) -> Checkpoint | None:
        with self._io("load", name, self._runs / name, ""):
            path = runs_listing.unreadable_file(self._dir(), name)
        if path is None:
            return None
        with self._io("load", name, path, ""):
            data = read_file(path) or b""
        runs_listing.decode_file(self._dir(), path, data)  # raises what makes it unreadable
        return None

    # -- per-run items (streams, events; ``seam.items``, ``items``) -----------------------

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._put_item(run_id, kind, key, value, create=True)

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._put_item(run_id, kind, key, value, create=False)

    def _put_item(self, run_id: str, kind: str, key: str, value: Any, *, create: bool) -> None:
        raw = item_json(run_id, kind, key, value)
        log = self._items.log_for(self.file_for(run_id).stem, kind)
        with self._io(f"write a {kind} item of", run_id, log, " Nothing was written."):
            wrote(self._items.append(run_id, kind, log, key, raw, create=create))

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        checked(run_id, kind, after)
        log = self._items.log_for(self.file_for(run_id).stem, kind)
        with self._io(f"read {kind} items of", run_id, log, ""):
            return self._items.read(run_id, log, after, limit)

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        checked(run_id, kind)
        log = self._items.log_for(self.file_for(run_id).stem, kind)
        with self._io(f"delete {kind} items of", run_id, log, ""):
            self._items.delete(run_id, log, keys)

    # -- the rest -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the files kept open between saves (the store stays usable: it opens
        them again when needed)."""
        self._open_files.close()

    def _dir(self) -> runs_listing.RunsDir:
        """What the listing needs of this store (made per call: kept, it would make the
        store part of a reference cycle, and only a garbage collection would close it)."""
        return runs_listing.RunsDir(self.path, self._runs, self.file_for, self._try_lock)

    def _try_lock(self, file: Path) -> AbstractContextManager[Stripe | None]:
        return self._lock(file, wait=False)

    def _lock(self, file: Path, *, wait: bool = True) -> AbstractContextManager[Stripe | None]:
        """The run file's stripe lock, held across threads and processes; yields None
        only when ``wait`` is False and another writer holds it."""
        match = runs_listing.STRIPE.search(file.name)
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


def _due(cp: Checkpoint) -> float | None:
    return due_at(cp.status, cp.lease_expires, cp.wake_at, cp.deadline)
