"""The fleet's pages: the workers, the queues and the schedules of the store.

Each page is drawn from a snapshot of its part (``durable_steps.fleet``: a listing of
the running runs -- or of the waiting ones, for schedules -- metadata only, and the few
queue and schedule records), kept for ``FRESH`` seconds, so a page and its JSON
(``api``) asked for together cost one listing; each page says when its snapshot was
taken and what it cost. The pages refresh
themselves as the runs list does (every ``EVERY`` seconds while *live* is checked).
"""

from __future__ import annotations

import threading
import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from durable_steps import Fleet, Store, fleet

from .host import Host

FRESH = 3.0
"""Seconds a snapshot serves the pages before the next is taken."""
EVERY = 5
"""Seconds between a fleet page's refreshes."""


class FleetView:
    """The latest snapshot of each part of the fleet, taken again when older than
    ``FRESH``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._last: dict[str, Fleet] = {}
        self._lock = threading.Lock()

    def get(self, part: str, max_age: float = FRESH) -> Fleet:
        with self._lock:  # one listing at a time, however many pages ask
            last = self._last.get(part)
            if last is None or time.time() - last.taken_at > max_age:
                last = self._last[part] = fleet(self.store, parts=(part,))
            return last


class Pages:
    def __init__(self, console: Host) -> None:
        self.c = console

    def _page(self, request: Request, name: str) -> Response:
        fragment = request.query_params.get("fragment") == "1"
        template = f"{name}_table.html" if fragment else "fleet.html"
        snapshot = self.c.fleet.get(name)
        return self.c.page(template, 200, request, fleet=snapshot, EVERY=EVERY, section=name)

    def workers(self, request: Request) -> Response:
        return self._page(request, "workers")

    def queues(self, request: Request) -> Response:
        return self._page(request, "queues")

    def schedules(self, request: Request) -> Response:
        return self._page(request, "schedules")


def routes(console: Host) -> list[Route]:
    p = Pages(console)
    return [
        Route("/workers", p.workers),
        Route("/queues", p.queues),
        Route("/schedules", p.schedules),
    ]
