"""What the fleet pages and the JSON API use of the console: a ``Protocol``.

``app.py`` builds its routes from ``fleet.py`` and ``api.py`` and hands them the
console; were they to name ``app.Console`` back, the three modules would import one
another. They name this instead, which ``Console`` satisfies by its shape."""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import HTMLResponse

from durable_steps import Checkpoint, Fleet, Store

from .listing import Listings
from .security import Secrets


class Snapshots(Protocol):
    """The latest snapshot of each part of the fleet (``fleet.FleetView``)."""

    def get(self, part: str, max_age: float = ...) -> Fleet: ...


class Loaded(Protocol):
    """Checkpoints as the console loaded them (``app.Loaded``)."""

    def get(self, run_id: str) -> Checkpoint: ...


class Host(Protocol):
    """The console's state and its page rendering, as the handlers use them."""

    @property
    def store(self) -> Store: ...
    @property
    def secrets(self) -> Secrets: ...
    @property
    def listings(self) -> Listings: ...
    @property
    def loaded(self) -> Loaded: ...
    @property
    def fleet(self) -> Snapshots: ...

    def page(
        self, name: str, status: int = 200, request: Request | None = None, **context: Any
    ) -> HTMLResponse: ...

    def read_only_for(self, request: Request) -> bool: ...
