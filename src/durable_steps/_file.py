"""FileStore: one crash-safe JSON file per run in a local directory.

Layout::

    PATH/runs/<slug>-<hash>.json   one checkpoint per run (the run id is inside)
    PATH/locks/<00..ff>.lock       flock stripes that serialise writers of a run

A save reads the run's current file, compares etags, then writes a temporary
file in the same directory, flushes and fsyncs it, renames it over the old one
and fsyncs the directory, all under the run's stripe lock (held across
processes, not only threads). Readers need no lock: a rename is atomic, so they
see the old checkpoint or the new one, never a mix. The cost of a save depends
on that run's size only, never on how many runs the store holds.

POSIX only (fcntl). No promise on network file systems, whose fsync and flock
may not mean what they mean on a local disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

from ._errors import DurableError
from ._observe import wrote
from ._store import (
    Checkpoint,
    RunInfo,
    check_run_id,
    conflict,
    corrupt_error,
    decode,
    dumps,
    info_of,
    matches,
    to_document,
)

_STRIPES = 256
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_ETAG = re.compile(rb'\{"etag":"([0-9a-f]{24})"')


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` so that a crash leaves the old file or the new, whole."""
    fd, tmp = _mkstemp(target)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _mkstemp(target: Path) -> tuple[int, str]:
    # A dot name that listing ignores, in the target's own directory so that
    # os.replace is a rename within one file system.
    tmp = target.parent / f".tmp-{secrets.token_hex(8)}-{target.name}"
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), str(tmp)


class FileStore:
    """Checkpoints as files under ``path`` (created if missing)."""

    def __init__(self, path: str | os.PathLike[str] = ".durable") -> None:
        self.path = Path(path)
        self._runs = self.path / "runs"
        self._locks = self.path / "locks"
        for d in (self.path, self._runs, self._locks):
            if not d.is_dir():
                d.mkdir(parents=True, exist_ok=True)
                _fsync_dir(d.parent)

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    def file_for(self, run_id: str) -> Path:
        """The run's file: a readable slug plus a hash, so any valid run id (unicode,
        ``..``, 255 characters, ids differing only in case) maps to its own short
        name strictly inside the store, on case-insensitive file systems too."""
        digest = hashlib.sha256(check_run_id(run_id).encode()).hexdigest()[:40]
        slug = _UNSAFE.sub("_", run_id.lower()).strip("_")[:48]
        return self._runs / f"{slug}-{digest}.json" if slug else self._runs / f"{digest}.json"

    def load(self, run_id: str) -> Checkpoint | None:
        target = self.file_for(run_id)
        try:
            raw = target.read_bytes()
        except FileNotFoundError:
            return None
        return decode(raw, run_id, str(target))

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        target = self.file_for(checkpoint.run_id)
        etag = secrets.token_hex(12)
        doc = to_document(checkpoint, etag=etag)
        data = dumps(doc)  # fails on bad state before any lock or I/O
        with self._lock(target):
            self._check_etag(target, checkpoint)
            atomic_write(target, data)
        wrote(len(data))
        return replace(checkpoint, etag=etag, updated_at=doc["updated_at"])

    def delete(self, run_id: str) -> bool:
        """Remove the run's checkpoint; False if it had none."""
        target = self.file_for(run_id)
        with self._lock(target):
            try:
                target.unlink()
            except FileNotFoundError:
                return False
            _fsync_dir(target.parent)
            return True

    def list_runs(self, **filters: Any) -> Iterator[RunInfo]:
        limit = filters.pop("limit", None)
        found = (
            i
            for i in self._list()
            if matches(i, **{"status": None, "workflow": None, "updated_before": None, **filters})
        )
        return islice(found, limit)

    def _list(self) -> Iterator[RunInfo]:
        for f in sorted(self._runs.glob("[!.]*.json")):
            try:
                raw = f.read_bytes()
            except FileNotFoundError:
                continue  # deleted while we listed
            try:
                run_id = _run_id_in(raw)
                if run_id is None or self.file_for(run_id) != f:
                    raise corrupt_error(f.name, str(f), "it does not name its run")
                cp = decode(raw, run_id, str(f))
            except DurableError as exc:
                yield RunInfo(f.name, -1, None, False, f.stat().st_mtime, len(raw), None, str(exc))
                continue
            yield info_of(cp, len(raw))

    def close(self) -> None:
        """Nothing to release; present so every store closes alike."""

    def __enter__(self) -> FileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _lock(self, target: Path) -> Iterator[None]:
        stripe = int(target.stem[-2:], 16) % _STRIPES
        fd = os.open(self._locks / f"{stripe:02x}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _check_etag(self, target: Path, checkpoint: Checkpoint) -> None:
        try:
            with open(target, "rb") as f:
                head = f.read(64)
                # Our own files start {"etag":"<24 hex>"; reading the rest (a whole
                # 1 MB state) just to compare versions would double a save's cost.
                match = _ETAG.match(head)
                current = match[1].decode() if match else None
                if match is None:  # not our layout: read it all, reporting corruption
                    current = decode(head + f.read(), checkpoint.run_id, str(target)).etag
        except FileNotFoundError:
            current = None
        if current != checkpoint.etag:
            raise conflict(checkpoint.run_id, checkpoint.etag, current is None)


def _run_id_in(raw: bytes) -> str | None:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise corrupt_error("?", "a file in the store", f"not JSON ({exc})") from None
    run_id = doc.get("run_id") if isinstance(doc, dict) else None
    return run_id if isinstance(run_id, str) else None
