"""Dead workers of this machine, seen by every live worker's look on any store.

A worker's lease names its process (``seam.lease``: host, boot, pid, start time), so
a worker on the same machine can tell that the holder of a lease died -- if it looks
at that lease. FileStore looks for every worker (``procs/``: a dead process's runs
are noted due at the next look, ``stores/file/wake``). A store whose filter runs
elsewhere (Cosmos DB: a query on status and lease expiry, ``Store.sees_gone_owners``
False) cannot: its filter leaves a dead worker's runs until their leases expire.

So the workers of such a store register on the machine, not in the store: one small
file per worker process in a directory of the machine's temporary directory
(``durable-steps-<uid>/workers``), holding an owner id of the process
(``default_owner``: its pid and start time). Each look lists that directory -- a few
entries, read once each, and one read of /proc per entry (``owner_gone``); no store
I/O -- so the steady look's cost stays what the store's filter answers. A process
newly seen gone makes this worker's next look a full one (``recovery.candidates``:
every running run of its workflows, which takes a lease whose holder is visibly
gone) -- once per death and per worker, so that every live worker takes its share,
however busy the first one to notice is. The file of a dead process is removed by a
worker whose full look was not cut short by its free slots (it saw every run the
dead one held: nothing is left for the others to find); a process that stops
normally removes its own.

Only the workers of such stores register and act on a death (FileStore's own
registry does it for its workers), and only those with default owner ids: a stable
``--owner``'s runs are taken back by its restart, or at their leases' expiry.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from ..seam.lease import default_owner, owner_gone


def registry() -> Path:
    """The directory where this machine's workers (of this user) register."""
    uid = getattr(os, "getuid", lambda: 0)()
    return Path(tempfile.gettempdir()) / f"durable-steps-{uid}" / "workers"


class LocalWorkers:
    """This worker's entry in the machine's registry, and the deaths it has seen."""

    def __init__(self, where: Path | None = None) -> None:
        self.where = registry() if where is None else where
        self.mine: Path | None = None
        self.known: dict[str, str] = {}
        """Entry name -> the owner id it holds (entries never change: read once)."""
        self.seen: set[str] = set()
        """Entries this worker has already acted on."""
        self.pending: list[Path] = []
        """Entries of processes gone since the last full look."""

    def register(self) -> None:
        """Write this process's entry (best effort: without it, a death of this worker
        is seen at its leases' expiry, as before)."""
        try:
            self.where.mkdir(parents=True, exist_ok=True)
            path = self.where / f"{os.getpid()}.{secrets.token_hex(4)}"
            tmp = path.with_name("." + path.name)
            tmp.write_text(default_owner())
            os.replace(tmp, path)  # (whole or absent: a reader never sees half of it)
            self.mine = path
        except OSError:
            self.mine = None

    def close(self) -> None:
        """Remove this process's entry (it stops: nothing of it is left to take)."""
        if self.mine is not None:
            with contextlib.suppress(OSError):
                self.mine.unlink()
            self.mine = None

    def newly_gone(self) -> bool:
        """Whether a registered process died since this worker last looked (and note
        it, for ``handled``)."""
        try:
            entries = [e.name for e in os.scandir(self.where) if not e.name.startswith(".")]
        except OSError:
            return False
        found = False
        for name in entries:
            if name in self.seen or (self.mine is not None and name == self.mine.name):
                continue
            owner = self.known.get(name)
            if owner is None:
                try:
                    owner = (self.where / name).read_text()
                except OSError:
                    continue  # (removed meanwhile)
                self.known[name] = owner
            if owner_gone(owner):
                self.seen.add(name)
                self.pending.append(self.where / name)
                found = True
        live = set(entries)
        self.known = {k: v for k, v in self.known.items() if k in live}
        self.seen &= live
        return found

    def handled(self, complete: bool) -> None:
        """After the full look a death asked for: ``complete`` (not cut short by the
        free slots) removes the dead processes' entries -- their runs were all seen."""
        if complete:
            for path in self.pending:
                with contextlib.suppress(OSError):
                    path.unlink()
        self.pending.clear()
