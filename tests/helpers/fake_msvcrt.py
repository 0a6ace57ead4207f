"""A stand-in for Windows' msvcrt on Linux, built on flock, that answers like the real
one: ``locking(fd, mode, nbytes)`` locks bytes from the current position, and raises
OSError(EACCES) for LK_NBLCK while another handle holds them. Every call is recorded."""

from __future__ import annotations

import errno
import fcntl
import os
import types
from collections.abc import Callable
from typing import Any


def fake_msvcrt(flock: Callable[[int, int], Any] = fcntl.flock) -> types.ModuleType:
    m = types.ModuleType("msvcrt")
    m.LK_UNLCK, m.LK_LOCK, m.LK_NBLCK, m.LK_RLCK, m.LK_NBRLCK = 0, 1, 2, 3, 4
    calls: list[tuple[int, int, int]] = []

    def locking(fd: int, mode: int, nbytes: int) -> None:
        calls.append((mode, os.lseek(fd, 0, os.SEEK_CUR), nbytes))
        if mode == m.LK_UNLCK:
            flock(fd, fcntl.LOCK_UN)
        elif mode == m.LK_NBLCK:
            try:
                flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OSError(errno.EACCES, "Permission denied") from None
        else:
            raise ValueError(f"mode {mode} is not used by durable-steps")

    m.calls, m.locking = calls, locking
    return m
