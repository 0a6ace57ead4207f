"""The file-system steps FileStore is made of: each durable or private as the store
needs, and the StoreError an OSError becomes (what happened, where, what to do).

- ``atomic_write``: temporary file (one name per target, ``.tmp-`` and its name, so
  a crash's leftover is overwritten by the next write of that target), write,
  fsync, rename over the target, fsync of the directory. On an error before the
  rename the temporary file is removed and the old file stays; a failing directory
  sync after it is ``NotDurableError``: written, but maybe not after a power cut.
- ``create_private`` and ``make_dir``: files 0600 and directories 0700 whatever the
  umask (a umask can only clear bits of a mode; the mode is set again after).
- ``read_at``, ``read_all`` and ``write_at``: bytes of an open file, at an offset.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from ...seam.errors import StoreError
from . import platform
from .platform import BINARY, NOFOLLOW

_ADVICE = {
    errno.ENOSPC: "the disk is full: free disk space, then retry",
    errno.EROFS: "the file system is read-only: remount it read-write, or point "
    "DURABLE_FILE_PATH at a writable directory",
    errno.EACCES: "fix the permissions: give the user running this read and write access "
    "to {store} (its files are private to the user that created them)",
    errno.EIO: "the disk reported an I/O error: check it (e.g. dmesg) before retrying",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n)",
}
_ADVICE[errno.EPERM] = _ADVICE[errno.EACCES]
if hasattr(errno, "EDQUOT"):  # not on every system
    _ADVICE[errno.EDQUOT] = "the disk quota is used up: free space or raise the quota, then retry"
INTACT = " Nothing was saved; the previous checkpoint is intact."
UNSURE = " The save may or may not be stored: load the run to see which."
WRITTEN = (
    " The checkpoint was written, but the directory could not be synced, so it may not "
    "survive a power cut: load the run to see what is stored."
)
GONE = " The run's file was removed, but after a power cut it may reappear."


def atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` as ``target`` so that a crash leaves the old file or the new, whole:
    temporary file, write, fsync, rename over ``target``, fsync of the directory."""
    tmp = target.with_name(f".tmp-{target.name}")
    current = platform.current
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY | NOFOLLOW, 0o600)
        try:
            current.private(fd)
            write_at(fd, 0, data)
            current.sync_file(fd)
        finally:
            os.close(fd)
        current.replace(str(tmp), str(target))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        current.sync_dir(str(target.parent))
    except OSError as exc:
        raise NotDurableError(exc.errno, exc.strerror, exc.filename) from exc


class NotDurableError(OSError):
    """The new file replaced the old one, but its directory could not be synced."""


def read_at(fd: int, offset: int, n: int) -> bytes:
    """Up to ``n`` bytes at ``offset`` (lseek + read: Windows has no pread)."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks = []
    while n > 0 and (chunk := os.read(fd, n)):
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_all(fd: int) -> bytes:
    """The whole file, read until its end (it may have grown since it was measured)."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    size = max(os.fstat(fd).st_size, 0) + 1
    while chunk := os.read(fd, size):
        chunks.append(chunk)
    return b"".join(chunks)


def write_at(fd: int, offset: int, data: bytes) -> None:
    """All of ``data`` at ``offset``: ``pwrite``, one system call (lseek + write where
    there is none: Windows)."""
    view = memoryview(data)
    if hasattr(os, "pwrite"):
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
        return
    os.lseek(fd, offset, os.SEEK_SET)
    while view:
        view = view[os.write(fd, view) :]


def read_file(path: Path) -> bytes | None:
    fd = open_existing(path, os.O_RDONLY)
    if fd is None:
        return None
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def open_existing(path: Path | str, flags: int) -> int | None:
    try:
        return os.open(path, flags | BINARY)
    except FileNotFoundError:
        return None


def create_private(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | BINARY | NOFOLLOW, 0o600)
    platform.current.private(fd)
    return fd


def make_dir(d: Path) -> None:
    """Create ``d`` and missing parents as 0700 whatever the umask, each durably."""
    if d.is_dir():
        return
    if not d.parent.is_dir():
        make_dir(d.parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o700)
        os.chmod(d, 0o700)
        platform.current.sync_dir(str(d.parent))


def os_error(exc: OSError, doing: str, path: Path, store: Path, outcome: str) -> StoreError:
    advice = _ADVICE.get(exc.errno or 0, "check the disk and the store's directory")
    return StoreError(
        f"FileStore could not {doing} at {exc.filename or path}: {exc.strerror or exc}; "
        f"{advice.format(store=store)}.{outcome}",
        status_code=None,
    )
