"""Wake-ups: an idle worker looks as soon as a run becomes takeable, not at its next
poll -- where its store can tell it (``Store.wake_on_start``).

The worker binds a UDP socket on 127.0.0.1 (port 0: the system picks one) on its
event loop and gives the port to its store. A store that can (FileStore: ``procs/``,
``stores/file/wake``) sends an empty datagram there each time a save on this machine
makes a run takeable now -- a start, a signal or message that makes a waiting run
runnable, a child's end that resumes its parent. The datagram carries nothing but
"look": the worker's next look is moved to now, rate-limited so that looking takes at
most half of the worker's time (a burst of starts makes one look, not one per start).
Asyncio's datagram endpoints work on Linux, macOS and Windows (selector and proactor
loops alike). A store that cannot (Cosmos DB: its saves are seen by no local process)
answers False and the worker polls every ``--interval``, as it always does: the poll
stays as the fallback for a lost datagram, and an idle worker looks no more often than
before.
"""

from __future__ import annotations

import asyncio
import contextlib

from ..seam.store import Store


class _Heard(asyncio.DatagramProtocol):
    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.event.set()


class Wakeup:
    """The worker's socket, and whether a datagram came since the last look."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.transport: asyncio.DatagramTransport | None = None

    async def open(self, store: Store) -> bool:
        """Bind the socket and register it with ``store``; False (and nothing bound)
        when the store cannot wake its workers, or the socket cannot be made."""
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _Heard(self.event), local_addr=("127.0.0.1", 0)
            )
        except OSError:
            return False  # (no loopback: the poll alone)
        port = transport.get_extra_info("sockname")[1]
        try:
            ok = await asyncio.to_thread(store.wake_on_start, port)
        except Exception:
            ok = False  # (a hint: the poll works without it)
        if not ok:
            transport.close()
            return False
        self.transport = transport
        return True

    def heard(self) -> bool:
        """Whether a datagram came since the last call (and forget it)."""
        was = self.event.is_set()
        self.event.clear()
        return was

    async def sleep(self, timeout: float) -> None:
        """Wait up to ``timeout``, less if a datagram comes."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), timeout)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None
