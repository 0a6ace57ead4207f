"""FileStore's listing, and the files in runs/ that no run can claim.

A listing reads the directory once (names only), then one file at a time: the
last record's TAIL and fields (``runfile_tail.last_meta``), never the state, so its
cost per run does not grow with the state. Only a file whose end is torn, or an
earlier version's whole document, is read in full. Filters apply as it goes, and
it stops at ``limit``. It never aborts: a directory is skipped, a file deleted
meanwhile too, and a file it cannot read (damaged, foreign, unreadable, naming
another run) is an entry with ``error`` set, under its run id where the file can
still tell it (``claimed_by``: a log whose first record's fields are intact,
naming the run the file's name was made for), else under the file's name -- which
``load`` and ``delete`` accept (``unreadable_file``), so every entry has a way
out. Temp files of crashed saves met on the way are removed under a non-blocking
try of their stripe's lock: a live writer holds it, so its file is left alone.

A listing reads only each file's last record, so damage before it (a byte flipped
mid-file) is not seen here: a ``load`` reads and checks every record (``durable-steps
runs verify`` loads every run).

The store hands the listing what it needs of it (``RunsDir``): the listing never
imports the store, which imports the listing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NamedTuple

from ...seam.checkpoint import Checkpoint, RunInfo
from ...seam.document import from_document, info_of, info_of_meta, loads
from ...seam.errors import DurableError, corrupt_error
from ...seam.rules import RunFilter
from . import fileio, platform, runfile, runfile_tail
from .fileio import os_error, read_file
from .platform import BINARY

_RUN_FILE = re.compile(r"(?:[a-z0-9_-]*-)?[0-9a-f]{40}\.json")
_META_LIMIT = 1024 * 1024
"""The longest first-record meta ``claimed_by`` reads (a meta is a few hundred bytes)."""
STRIPE = re.compile(r"([0-9a-f]{2})\.json$")
"""The last two hex digits of a run file's hash (in a temp file's name too): its stripe."""


class RunsDir(NamedTuple):
    """What a listing needs of its FileStore."""

    store: Path
    """The store's directory (named in error messages)."""
    runs: Path
    """Its ``runs/`` directory."""
    file_for: Callable[[str], Path]
    """The file of a run id."""
    try_lock: Callable[[Path], AbstractContextManager[object]]
    """A try of a file's stripe lock that does not wait: yields a false value when
    another writer holds it."""


def run_infos(d: RunsDir, entries: list[os.DirEntry[str]], filters: RunFilter) -> Iterator[RunInfo]:
    left = filters.limit
    for entry in entries:
        if left == 0:
            return
        if entry.name.startswith(".tmp-"):
            sweep(d, Path(entry.path))
            continue
        if entry.name.startswith(".") or not entry.name.endswith(".json"):
            continue
        with contextlib.suppress(OSError):  # when in doubt, entry_of looks closer
            if not entry.is_file(follow_symlinks=False):
                continue
        info = entry_of(d, Path(entry.path))
        if info is not None and filters.matches(info):
            yield info
            left = None if left is None else left - 1


def entry_of(d: RunsDir, path: Path) -> RunInfo | None:
    """The listing entry of one file; None if it is gone or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | BINARY)
    except FileNotFoundError:
        return None  # deleted while we listed
    except OSError as exc:
        return _unreadable(path.name, 0, None, os_error(exc, "read", path, d.store, ""))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        try:
            return _read_entry(d, fd, st.st_size, path)
        except OSError as exc:
            error: DurableError = os_error(exc, "read", path, d.store, "")
        except DurableError as exc:
            error = exc
        return _unreadable(claimed_by(d, path, fd) or path.name, st.st_size, st.st_mtime, error)
    finally:
        os.close(fd)


def claimed_by(d: RunsDir, path: Path, fd: int) -> str | None:
    """The run a file belongs to, as its first record's fields say, if they can be read
    and name the run whose id the file's name was made from (its hash): so a damaged
    log is reported by its run id. None when the file cannot tell."""
    try:
        meta = runfile_tail.first_meta(fd, _META_LIMIT)
        fields = json.loads(meta) if meta is not None else None
        run_id = fields.get("run_id") if isinstance(fields, dict) else None
        return run_id if isinstance(run_id, str) and d.file_for(run_id) == path else None
    except (OSError, ValueError, RecursionError, DurableError):
        return None


def _read_entry(d: RunsDir, fd: int, size: int, path: Path) -> RunInfo:
    found = None
    if runfile.is_log(fileio.read_at(fd, 0, 1)):
        found = runfile_tail.last_meta(fd, size)
    if found is None:  # a torn end, or an earlier version's file: read it all
        name = claimed_by(d, path, fd)  # (its errors name the run, if the file tells it)
        return info_of(decode_file(d, path, fileio.read_all(fd), name), size)
    meta, etag = found
    info = info_of_meta(loads(meta, path.name, str(path)), etag, size, path.name, str(path))
    _check_names(d, path, info.run_id)
    return info


def decode_file(d: RunsDir, path: Path, data: bytes, name: str | None = None) -> Checkpoint:
    """The checkpoint in a file found in runs/, whose run id only the file can tell
    (``name``: the run its errors name, if known; else the file's name)."""
    doc, etag, _ = runfile.parse(data, name or path.name, str(path))
    run_id = doc.get("run_id") if isinstance(doc, dict) else None
    _check_names(d, path, run_id)
    assert isinstance(run_id, str)
    return from_document(doc, run_id, etag, str(path))


def _check_names(d: RunsDir, path: Path, run_id: object) -> None:
    if not isinstance(run_id, str) or d.file_for(run_id) != path:
        raise corrupt_error(path.name, str(path), f"it does not name its run (it says {run_id!r})")


def unreadable_file(d: RunsDir, name: str) -> Path | None:
    """The file a listing reported as unreadable under ``name``, if any: the file of a
    readable run is never addressed by its file name."""
    path = d.runs / name
    if not _RUN_FILE.fullmatch(name):
        return None
    data = read_file(path)
    if data is None:
        return None
    try:
        decode_file(d, path, data)
    except DurableError:
        return path
    return None


def sweep(d: RunsDir, tmp: Path) -> None:
    """Remove a temp file left by a crashed save, if no writer of its stripe is busy."""
    if not STRIPE.search(tmp.name):
        return
    with contextlib.suppress(OSError), d.try_lock(tmp) as free:
        if free:
            platform.current.remove(str(tmp))


def _unreadable(name: str, size: int, mtime: float | None, error: DurableError) -> RunInfo:
    return RunInfo(name, -1, None, False, mtime, size, None, str(error))
