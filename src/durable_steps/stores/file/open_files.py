"""The files a FileStore keeps open between saves: stripe lock files and run files.

Opening and closing a lock file and a run file cost a save more than its own
bookkeeping, so a store keeps open the lock files of the stripes it used last
(at most ``KEPT``) and, with each, the run file it last saved in that stripe.
What makes that safe:

- Threads. ``flock`` excludes open file descriptions, not threads that share one,
  so each stripe also has a ``threading.Lock``: a thread takes it, then the
  stripe's file lock. A stripe's kept files are used, and closed, only by the
  thread that holds that mutex (an evicted stripe whose mutex is busy is skipped),
  so no thread ever closes a descriptor that another is writing through.
- Other processes. A kept run file is used only while it still is the file at its
  path: under the lock, ``stat`` of the path must give the descriptor's device and
  inode. A compaction, a migration or a delete replaces or removes the path's file,
  and then the kept one is closed and the path opened afresh. Holding the
  descriptor keeps its inode allocated, so no later file can reuse its number.
- Forks. A child shares its parent's open file descriptions, and with them their
  flock locks: using them, parent and child would both "hold" a stripe. A child
  therefore closes every kept file at once (``os.register_at_fork``), takes new
  mutexes, and opens its own.
- Windows refuses to replace or delete a file that is held open, so nothing is
  kept open there between saves (``platform``'s ``keeps_files_open``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple

from . import platform
from .fileio import create_private, open_existing

KEPT = 16
"""Stripes whose files stay open (a lock file and at most one run file each)."""


class RunFile(NamedTuple):
    """A run's file open under its stripe's lock."""

    fd: int
    size: int
    written: tuple[int, str] | None
    """The file's length and etag just after this store's last append through this
    very descriptor, kept open since: if the length is still that, so is the etag."""
    kept: bool
    """Kept open by the stripe (closed by it); otherwise ``done`` closes it."""


class _Kept:
    """One stripe's kept files; touched only by the holder of its mutex."""

    __slots__ = ("lock_fd", "run_fd", "run_inode", "run_path", "written")

    def __init__(self) -> None:
        self.lock_fd: int | None = None
        self.run_path: str | None = None
        self.run_fd = -1
        self.run_inode = (0, 0)
        self.written: tuple[int, str] | None = None

    def forget_run(self) -> None:
        if self.run_path is not None:
            fd, self.run_fd, self.run_path, self.written = self.run_fd, -1, None, None
            os.close(fd)

    def close(self) -> None:
        self.forget_run()
        if self.lock_fd is not None:
            fd, self.lock_fd = self.lock_fd, None
            os.close(fd)


class Stripe:
    """A held stripe lock, and the run files that may be opened under it."""

    __slots__ = ("_kept",)

    def __init__(self, kept: _Kept) -> None:
        self._kept = kept

    def open_run(self, path: str) -> RunFile | None:
        """The run file at ``path``, opened read-write (None: there is none). Pass it
        to ``done`` when finished with it (it stays open if it is kept)."""
        kept = self._kept
        if kept.run_path == path:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_dev, st.st_ino) == kept.run_inode:
                return RunFile(kept.run_fd, st.st_size, kept.written, True)
            kept.forget_run()
        fd = open_existing(path, os.O_RDWR)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if not platform.current.keeps_files_open:
            return RunFile(fd, st.st_size, None, False)
        kept.forget_run()
        kept.run_path, kept.run_fd, kept.run_inode = path, fd, (st.st_dev, st.st_ino)
        return RunFile(fd, st.st_size, None, True)

    @staticmethod
    def done(file: RunFile | None) -> None:
        """Finished with ``file``: closed, unless the stripe keeps it."""
        if file is not None and not file.kept:
            os.close(file.fd)

    def appended(self, path: str, size: int, etag: str) -> None:
        """Note that this store's append through the kept file of ``path`` made it
        ``size`` bytes long, ending with ``etag``."""
        if self._kept.run_path == path:
            self._kept.written = (size, etag)

    def forget(self, path: str) -> None:
        """Close the kept file of ``path``: it is about to be replaced or removed (on
        Windows that needs every handle closed; elsewhere the handle would be stale)."""
        if self._kept.run_path == path:
            self._kept.forget_run()


class OpenFiles:
    """One store's stripe locks: a mutex each, and the kept files of the last ``KEPT``."""

    def __init__(self, lock_paths: list[str]) -> None:
        self._paths = lock_paths
        self._reset()
        _ALL.add(self)

    def _reset(self) -> None:
        self._mutexes = [threading.Lock() for _ in self._paths]
        self._kept: OrderedDict[int, _Kept] = OrderedDict()  # least recently used first
        self._kept_lock = threading.Lock()

    def hold(self, stripe: int, *, wait: bool = True) -> _Hold:
        """Stripe ``stripe`` locked against other threads and processes, as a context
        manager; it gives None only when ``wait`` is False and another writer holds it."""
        return _Hold(self, stripe, wait)

    def _acquire(self, stripe: int, wait: bool) -> _Kept | None:
        mutex = self._mutexes[stripe]
        if not mutex.acquire(blocking=wait):
            return None
        try:
            kept = self._touch(stripe)
            if kept.lock_fd is None:
                path = self._paths[stripe]
                fd = open_existing(path, os.O_RDWR)  # fd 0 is a valid descriptor
                kept.lock_fd = create_private(path) if fd is None else fd
            current = platform.current
            if wait:
                current.lock(kept.lock_fd)
            elif not current.try_lock(kept.lock_fd):
                mutex.release()
                return None
        except BaseException:
            mutex.release()
            raise
        return kept

    def _release(self, stripe: int, kept: _Kept) -> None:
        current = platform.current
        try:
            assert kept.lock_fd is not None
            current.unlock(kept.lock_fd)
            if not current.keeps_files_open:
                kept.close()
        except BaseException:
            kept.close()  # closing releases the lock too
            raise
        finally:
            self._mutexes[stripe].release()

    def close(self) -> None:
        """Close every kept file (each under its stripe's mutex)."""
        with self._kept_lock:
            stripes = list(self._kept)
        for stripe in stripes:
            with self._mutexes[stripe], self._kept_lock:
                kept = self._kept.pop(stripe, None)
            if kept is not None:
                kept.close()

    def _touch(self, stripe: int) -> _Kept:
        """The kept files of ``stripe`` (whose mutex the caller holds), now the most
        recently used; beyond ``KEPT`` stripes, the least recently used idle ones are
        closed."""
        evicted = []
        with self._kept_lock:
            kept = self._kept.get(stripe)
            if kept is None:
                kept = self._kept[stripe] = _Kept()
            else:
                self._kept.move_to_end(stripe)
            if len(self._kept) > KEPT:
                for old in list(self._kept)[: len(self._kept) - KEPT]:
                    if self._mutexes[old].acquire(blocking=False):  # idle: nobody uses it
                        evicted.append((old, self._kept.pop(old)))
        for old, files in evicted:
            try:
                files.close()
            finally:
                self._mutexes[old].release()
        return kept

    def _after_fork(self) -> None:
        """In a child: drop the parent's descriptors (closing ours does not release the
        parent's locks) and mutexes (another thread may have held one at the fork)."""
        for kept in self._kept.values():
            with contextlib.suppress(OSError):
                kept.close()
        self._reset()


class _Hold:
    """``OpenFiles.hold``: a class rather than a generator, for a save's few microseconds."""

    __slots__ = ("_kept", "_open_files", "_stripe", "_wait")

    def __init__(self, files: OpenFiles, stripe: int, wait: bool) -> None:
        self._open_files, self._stripe, self._wait = files, stripe, wait
        self._kept: _Kept | None = None

    def __enter__(self) -> Stripe | None:
        self._kept = self._open_files._acquire(self._stripe, self._wait)
        return None if self._kept is None else Stripe(self._kept)

    def __exit__(self, *exc: object) -> None:
        if self._kept is not None:
            self._open_files._release(self._stripe, self._kept)


_ALL: weakref.WeakSet[OpenFiles] = weakref.WeakSet()


def _after_fork() -> None:
    for files in list(_ALL):
        files._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
