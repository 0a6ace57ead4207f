"""Retention in the worker: runs completed more than the store's
``finished_ttl`` ago are deleted with everything of them (history, segments or records;
streams when they come, through the store's ``delete``).

Cosmos DB expires a run's head and snapshot itself (item TTL; its ``delete_expired`` removes
what they leave once the head is gone: streams, events, kept history); the file
and memory stores have no such service, so the worker asks them (``Store.delete_expired``)
once per ``EVERY`` seconds of its loop, and once per ``--once`` pass; ``durable-steps
runs prune`` does the same from a shell or a cron job. A pass costs what became due
since the last one, not the runs the store keeps: both stores keep an
index of runs by when they expire, written by the save that ends a run
(``stores.cosmos.expiry``, ``stores.file.expiry``). A failure is logged, never stops
the worker: the next pass tries again.
"""

from __future__ import annotations

import logging
import time
from typing import TypeVar

from ..seam.errors import DurableError
from ..seam.store import Store

log = logging.getLogger("durable_steps")
T = TypeVar("T")
EVERY = 60.0
"""Seconds between two passes of a worker's retention (expiry is not urgent)."""


class Expiry:
    """The worker's retention passes over ``store``."""

    def __init__(self, store: Store, every: float = EVERY) -> None:
        self.store, self.every = store, every
        self._next = 0.0

    def before(self, look: T) -> T:
        """``look`` (the worker's listing), after a retention pass if one is due: the
        worker makes one before each of its looks at most every ``EVERY`` seconds."""
        self.due()
        return look

    def due(self) -> int:
        """Delete what has expired if a pass is due; how many runs went."""
        if self.store.finished_ttl is None or time.monotonic() < self._next:
            return 0
        self._next = time.monotonic() + self.every
        try:
            gone = self.store.delete_expired()
        except DurableError as exc:
            # A warning: expired runs not deleted are deleted at the next pass; no call runs again.
            log.warning("could not delete the runs that expired (finished_ttl): %s", exc)
            return 0
        if gone:
            log.info("deleted %d run(s) completed more than finished_ttl ago", gone)
        return gone
