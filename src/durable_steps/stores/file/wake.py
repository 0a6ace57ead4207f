"""The processes that use a FileStore: waking idle workers at once, and taking a dead
one's runs at once.

A worker's look is a poll (every ``--interval``); a user who starts a run on the same
machine waits for the next one. So each process that holds leases on the store says
so, with a file of its own:

    procs/<host>~<boot>~<pid>~<process start>      content: a UDP port on 127.0.0.1, or empty

A worker that wants to be woken (``FileStore.wake_on_start``) binds a UDP socket on
the loopback interface and writes its port there. A save that makes a run takeable
*now* -- a start, a signal or message that makes a waiting run runnable, a child's end
that resumes its parent, a released lease -- sends one empty datagram to every port
listed (``notify``): the woken worker looks at once. A datagram says only "look":
nothing in it is trusted, a lost one costs what it cost before (the poll, which stays
as the fallback), and a sender to a port nobody listens on hears nothing. UDP on
127.0.0.1 works alike on Linux, macOS and Windows (unlike FIFOs, UNIX datagram sockets
or inotify); no file is polled, so an idle worker does no more I/O than before. The
senders' list is read again only when the directory changed (its mtime: one ``stat``
per notifying save).

The same files say which processes hold leases. A lease's owner id names its process
(``seam.lease``); a look that finds a file whose process is gone (same host and boot,
no such pid and start time: ``owner_gone``) *sweeps*: it renames the file away (one
sweeper wins), lists the runs once, and notes every running run whose lease owner is
visibly gone as due now in the look index (``due_index``: a run whose owner is gone is
takeable, its lease notwithstanding) -- then wakes the workers. So every live worker's
next look takes a dead worker's runs, not only a new worker's first (full) look, and
no look reads leased runs otherwise: the cost is one listing per process death.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path

from ...seam.lease import OWNER_PREFIX, _here, _own_start, owner_gone

_SEP = "~"


def me() -> str:
    """This process's file name: host, boot, pid and its start time."""
    host, boot = _here()
    pid = os.getpid()
    return _SEP.join([host, boot, str(pid), str(_own_start(pid))])


def _gone(name: str) -> bool:
    parts = name.split(_SEP)
    return len(parts) == 4 and owner_gone(":".join([OWNER_PREFIX, *parts, "x"]))


class Procs:
    """The ``procs/`` directory of one FileStore, as this process sees it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._registered: tuple[int, str] | None = None  # (pid, content) written
        self._ports: list[int] = []
        self._seen: int | None = None  # the directory's mtime when its ports were read

    def register(self, port: int | None = None) -> None:
        """Say that this process holds leases (and, with ``port``, wants waking); again
        after a fork (another pid) or for a new port. Written once, not per save."""
        content = "" if port is None else str(port)
        pid = os.getpid()
        mine = self._registered is not None and self._registered[0] == pid
        if mine and (port is None or self._registered == (pid, content)):
            return
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.root, 0o700)
        tmp = self.root / f".{me()}.tmp"
        tmp.write_text(content)
        os.replace(tmp, self.root / me())
        if self._registered is None:
            atexit.register(self.unregister)  # a process that ends normally is no death
        self._registered = (pid, content)

    def unregister(self) -> None:
        if self._registered is not None and self._registered[0] == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.root / me())
            self._registered = None

    def notify(self) -> None:
        """Wake every registered worker (a datagram to each port); nothing if none."""
        try:
            seen = os.stat(self.root).st_mtime_ns
        except FileNotFoundError:
            return
        if seen != self._seen:
            self._seen, self._ports = seen, self._read_ports()
        if not self._ports:
            return
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # (kept: a leak)
            sock.setblocking(False)
            for port in self._ports:
                with contextlib.suppress(OSError):  # nobody there, a full buffer: the poll
                    sock.sendto(b"", ("127.0.0.1", port))

    def _read_ports(self) -> list[int]:
        ports = []
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.root):
                if entry.name.startswith("."):
                    continue
                with contextlib.suppress(OSError, ValueError):
                    text = Path(entry.path).read_text()
                    if text:
                        ports.append(int(text))
        return ports

    def owners(self) -> list[str]:
        """Each registered process as the owner-id prefix its leases carry
        (``ds1:host:boot:pid:start``)."""
        with contextlib.suppress(FileNotFoundError):
            names = [e.name for e in os.scandir(self.root) if not e.name.startswith(".")]
            return sorted(":".join([OWNER_PREFIX, *n.split(_SEP)]) for n in names)
        return []

    def sweep(self, mark: Callable[[], int]) -> int:
        """Each registered process that is gone: its file taken away (by one sweeper),
        then ``mark`` (note its runs due now; how many); the runs marked."""
        taken = []
        with contextlib.suppress(FileNotFoundError):
            for name in [e.name for e in os.scandir(self.root) if _gone(e.name)]:
                mine = self.root / f".sweep-{name}-{os.getpid()}"
                with contextlib.suppress(FileNotFoundError):  # another sweeper won it
                    os.rename(self.root / name, mine)
                    taken.append(mine)
        if not taken:
            return 0
        try:
            marked = mark()  # (one listing, however many died)
        except BaseException:
            for mine in taken:  # left for the next look to sweep
                with contextlib.suppress(OSError):
                    os.rename(mine, self.root / mine.name.removeprefix(".sweep-").rsplit("-", 1)[0])
            raise
        for mine in taken:
            with contextlib.suppress(FileNotFoundError):
                os.remove(mine)
        if marked:
            self.notify()
        return marked
