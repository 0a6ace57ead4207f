"""FileStore's per-run items (``seam.items``): one append-only log per run and kind.

Layout. ``items/<run file's stem>/<kind slug>-<hash>.log`` under the store: a run's
items in a directory of its own (removed with the run), one file per kind. Each item
is one record, framed as the run file's records are (``runfile.frame``: HEAD, meta,
body, TAIL with two CRCs), meta ``{"k": key}``, body the value's JSON. An upsert
(``put_item``) appends too: the later record of a key wins. A removal
(``delete_items``) appends a record ``{"k": key, "x": 1}`` per key, all in one write
and one sync: the key is gone from then on (its bytes stay until the run goes).

Writing: under an exclusive lock of the log file itself (``flock``; across threads
and processes), the file's new records since this process last looked are indexed,
a torn tail is cut off, the key is checked (create-only: ``ConflictError``), the
record is appended with one ``pwrite`` and synced (``fdatasync``). A new log's
directory is synced once. So an append costs one record and one sync whatever the
log's length.

Reading takes no lock: the records since the last look are indexed (a torn or
half-written tail is not: it is a write in flight, or the torn one the next writer
cuts off), then the keys after ``after`` are found by bisection in the index and
their bodies read by their places. The index (sorted keys, each key's record place)
is kept per file in this process, so a read after an offset never rescans the log:
a follower reads only what was appended since. A log replaced under it (the run
deleted and written again) is noticed by its inode and indexed afresh.

The torn-tail rule is the run file's: only the last record can be torn (an append
returns after its record is synced; a writer cuts a torn tail before it appends).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...seam.errors import corrupt_error
from ...seam.items import Item, item_exists
from . import platform, runfile
from .fileio import create_private, make_dir, open_existing, read_at, write_at

_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_NO_ETAG = "0" * 24


@dataclass
class _Index:
    """What this process knows of one log: where its indexed records end, its keys in
    order, and each key's body (start, end) in the file."""

    inode: int = -1
    size: int = 0
    keys: list[str] = field(default_factory=list)
    places: dict[str, tuple[int, int]] = field(default_factory=dict)


class ItemLogs:
    """The per-run item logs of one FileStore (see the top)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._indexes: dict[str, _Index] = {}
        self._lock = threading.Lock()  # one thread at a time per store updates an index
        self._made: set[str] = set()

    def run_dir(self, run_stem: str) -> Path:
        return self.root / run_stem

    def log_for(self, run_stem: str, kind: str) -> Path:
        digest = hashlib.sha256(kind.encode()).hexdigest()[:16]
        slug = _UNSAFE.sub("_", kind.lower()).strip("_")[:40]
        return self.run_dir(run_stem) / f"{slug}-{digest}.log"

    def append(
        self, run_id: str, kind: str, path: Path, key: str, raw: bytes, *, create: bool
    ) -> int:
        """Append the record of ``key``; the bytes written."""
        record = runfile.frame(json.dumps({"k": key}).encode(), raw, _NO_ETAG)
        new = str(path.parent) not in self._made
        if new:
            make_dir(path.parent)
            self._made.add(str(path.parent))

        def write(index: _Index) -> bytes:
            if create and key in index.places:
                raise item_exists(run_id, kind, key)
            return record

        def written(index: _Index, start: int) -> None:
            body_end = start + len(record) - runfile.TAIL
            self._place(index, key, body_end - len(raw), body_end)

        self._append(create_private(str(path)), str(path), run_id, write, written)
        if new:
            platform.current.sync_dir(str(path.parent))  # the log itself survives a power cut
        return len(record)

    def delete(self, run_id: str, path: Path, keys: Sequence[str]) -> None:
        """Append a removal record (meta ``{"k": key, "x": 1}``, body ``null``) for each
        of ``keys`` the log has, in one write and one sync. The log keeps their bytes
        until the run is deleted: it is append-only."""
        fd = open_existing(path, os.O_RDWR)
        if fd is None:
            return
        gone: list[str] = []

        def write(index: _Index) -> bytes:
            gone.extend(k for k in dict.fromkeys(keys) if k in index.places)
            meta = (json.dumps({"k": k, "x": 1}).encode() for k in gone)
            return b"".join(runfile.frame(m, b"null", _NO_ETAG) for m in meta)

        def written(index: _Index, start: int) -> None:
            for k in gone:
                self._forget(index, k)

        self._append(fd, str(path), run_id, write, written)

    def _append(
        self,
        fd: int,
        name: str,
        run_id: str,
        write: Callable[[_Index], bytes],
        written: Callable[[_Index, int], None],
    ) -> None:
        """Under the log's lock, with its index brought up to date: append what
        ``write`` makes of the index (nothing: no write), synced (cut off again when the
        sync fails), then tell ``written`` where it went. Closes ``fd``."""
        try:
            platform.current.lock(fd)
            try:
                with self._lock:
                    index = self._refresh(fd, name, run_id, writer=True)
                    data = write(index)
                    if not data:
                        return
                    start = index.size
                    write_at(fd, start, data)
                    try:
                        platform.current.sync_data(fd)
                    except BaseException:
                        with contextlib.suppress(OSError):
                            os.ftruncate(fd, start)
                        raise
                    written(index, start)
                    index.size = start + len(data)
            finally:
                platform.current.unlock(fd)
        finally:
            os.close(fd)

    def read(self, run_id: str, path: Path, after: str | None, limit: int | None) -> list[Item]:
        fd = open_existing(path, os.O_RDONLY)
        if fd is None:
            return []
        try:
            with self._lock:
                index = self._refresh(fd, str(path), run_id, writer=False)
                start = 0 if after is None else bisect_right(index.keys, after)
                end = len(index.keys) if limit is None else start + limit
                wanted = [(k, index.places[k]) for k in index.keys[start:end]]
            return [Item(k, json.loads(read_at(fd, a, b - a))) for k, (a, b) in wanted]
        finally:
            os.close(fd)

    def remove(self, run_stem: str) -> None:
        """Remove the run's items (its directory) and forget their indexes."""
        d = self.run_dir(run_stem)
        with self._lock:
            for name in [n for n in self._indexes if n.startswith(str(d) + os.sep)]:
                del self._indexes[name]
            self._made.discard(str(d))
        if d.is_dir():
            shutil.rmtree(d)
            platform.current.sync_dir(str(self.root))

    def _refresh(self, fd: int, name: str, run_id: str, *, writer: bool) -> _Index:
        """The log's index, brought up to the file's end (under ``self._lock``)."""
        st = os.fstat(fd)
        index = self._indexes.get(name)
        if index is None or index.inode != st.st_ino or st.st_size < index.size:
            index = self._indexes[name] = _Index(inode=st.st_ino)
        if st.st_size == index.size:
            return index
        data = read_at(fd, index.size, st.st_size - index.size)
        o = 0
        while o < len(data) and (rec := runfile.record_at(data, o)) is not None:
            try:
                meta = json.loads(rec.meta)
                key = meta["k"]
            except (ValueError, KeyError, TypeError):
                raise corrupt_error(
                    run_id, name, f"an item record at byte {index.size + o} has no key"
                ) from None
            body_end = index.size + rec.end - runfile.TAIL
            if meta.get("x"):
                self._forget(index, key)
            else:
                self._place(index, key, body_end - len(rec.body), body_end)
            o = rec.end
        index.size += o
        if o < len(data) and writer:  # a torn tail: the append that was not acknowledged
            os.ftruncate(fd, index.size)
        return index

    @staticmethod
    def _forget(index: _Index, key: str) -> None:
        if index.places.pop(key, None) is not None:
            del index.keys[bisect_left(index.keys, key)]

    @staticmethod
    def _place(index: _Index, key: str, start: int, end: int) -> None:
        if key not in index.places:
            insort(index.keys, key)
        index.places[key] = (start, end)
