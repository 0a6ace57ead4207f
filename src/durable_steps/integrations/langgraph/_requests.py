"""The requests the saver's programs (``_programs``) yield, and the drivers of
``_saver`` carry out against a store: the whole vocabulary between them."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

from ...backend import Item


class Read(NamedTuple):
    run_id: str
    kind: str
    after: str | None = None
    limit: int | None = None


class Append(NamedTuple):
    """Create-only; ``quiet``: an item there already is no error (the result says False)."""

    run_id: str
    item: Item
    kind: str
    quiet: bool = False


class Put(NamedTuple):
    run_id: str
    item: Item
    kind: str


class Touch(NamedTuple):
    """The thread's run (its head: what listing, deleting and ``finished_ttl`` see):
    created when missing; its time (``updated_at``) moved to now when older than
    ``TOUCH``. A writer that meets another's write there meanwhile leaves it."""

    run_id: str
    thread_id: str


class DeleteRun(NamedTuple):
    run_id: str


class ListThreads(NamedTuple):
    """The thread ids of every thread's run."""


Request = Read | Append | Put | Touch | DeleteRun | ListThreads
Program = Generator[Request, Any, Any]
