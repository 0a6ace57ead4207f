"""FileStore's platform seam: locks, syncs, renames and file modes, per operating system.

Everything the file store does that differs between Linux, macOS and Windows is a
method of ``current``; tests swap it to run the other systems' paths on Linux.

=============== ======================= ====================== ===========================
                Posix (Linux, BSD)      MacOS                  Windows
=============== ======================= ====================== ===========================
lock a stripe   ``flock`` (blocking)    ``flock``              ``msvcrt.locking``, polled
data to disk    ``fdatasync``           ``F_FULLFSYNC`` (1)    ``fsync`` (FlushFileBuffers)
directory sync  ``fsync`` the directory ``F_FULLFSYNC`` on it  none: NTFS has no such call
replace a file  ``os.replace``          ``os.replace``         ``os.replace``, retried (2)
private files   ``fchmod`` 0600         ``fchmod`` 0600        the directory's ACL (3)
=============== ======================= ====================== ===========================

(1) macOS's ``fsync`` leaves the data in the drive's cache (and it has no
    ``fdatasync``); ``F_FULLFSYNC`` asks the drive to flush it. Where a file system
    refuses it (some network shares), plain ``fsync``.
(2) Windows refuses to replace or delete a file that another process has open
    (a sharing violation, ``PermissionError``); readers hold a run file for a
    moment, so the call is retried for about a second before the error surfaces.
(3) Windows has no POSIX modes; files get the ACL of the directory (a user's
    profile is private to that user by default).

``msvcrt.locking`` rather than ``filelock``/``portalocker``: it is the platform's
own primitive, needs no dependency, and the polling is the same loop those
libraries run on Windows. The lock is held on one byte of a stripe file that is
never read or written.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: Posix and MacOS are not used there
    fcntl = None  # type: ignore[assignment]

BINARY = getattr(os, "O_BINARY", 0)
"""Windows opens files in text mode (newline translation) without it."""
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_F_FULLFSYNC = 51  # <sys/fcntl.h> on macOS; Python's fcntl module has it only there
_BUSY = {errno.EACCES, getattr(errno, "EDEADLOCK", errno.EDEADLK)}


class Posix:
    """Linux and other POSIX systems."""

    keeps_files_open = True
    """Whether a store may keep lock and run files open between saves (``open_files``)."""

    def lock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def try_lock(self, fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def sync_data(self, fd: int) -> None:
        """The file's data (and its size) on disk: what an append needs."""
        os.fdatasync(fd)

    def sync_file(self, fd: int) -> None:
        os.fsync(fd)

    def sync_dir(self, path: str) -> None:
        """Make a rename, creation or removal in ``path`` survive a power cut."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            self.sync_file(fd)
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        os.unlink(path)

    def private(self, fd: int) -> None:
        """Mode 0600 whatever the umask (a umask can only clear bits of os.open's mode)."""
        os.fchmod(fd, 0o600)


class MacOS(Posix):
    """macOS: F_FULLFSYNC instead of fsync, which stops at the drive's cache."""

    def sync_data(self, fd: int) -> None:
        try:
            fcntl.fcntl(fd, getattr(fcntl, "F_FULLFSYNC", _F_FULLFSYNC))
        except OSError:  # not supported by this file system: the best it offers
            os.fsync(fd)

    sync_file = sync_data


class Windows:
    """Windows: msvcrt byte-range locks, no directory sync, replace retried."""

    attempts = 25
    """Tries of a replace or delete that meets a sharing violation (over about a second)."""
    keeps_files_open = False
    """A file held open could not be replaced or removed by anyone, even this process
    (a compaction elsewhere, deleting the store's directory)."""

    def lock(self, fd: int) -> None:
        delay = 0.0005
        while not self.try_lock(fd):
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    def try_lock(self, fd: int) -> bool:
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)  # locking() works from the current position
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        return True

    def unlock(self, fd: int) -> None:
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]

    def sync_data(self, fd: int) -> None:
        os.fsync(fd)

    sync_file = sync_data

    def sync_dir(self, path: str) -> None:
        """Nothing: Windows cannot open a directory to flush it; NTFS journals renames."""

    def replace(self, src: str, dst: str) -> None:
        self._retried(os.replace, src, dst)

    def remove(self, path: str) -> None:
        self._retried(os.unlink, path)

    def private(self, fd: int) -> None:
        """Nothing: no POSIX modes; the file inherits the directory's ACL."""

    def _retried(self, call: Callable[..., Any], *args: str) -> None:
        for attempt in range(self.attempts):
            try:
                call(*args)
            except PermissionError:  # another process has the file open (for now)
                if attempt == self.attempts - 1:
                    raise
                time.sleep(min(0.001 * 2**attempt, 0.05))
            else:
                return


Platform = Posix | Windows
current: Platform = (
    Windows() if os.name == "nt" else MacOS() if sys.platform == "darwin" else Posix()
)
