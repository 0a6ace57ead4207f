"""Published events, the reading side: what a run set under its keys, read outside it.

``get_event(store, run_id, key, timeout=60)`` (and ``get_event_async``) returns the
value the run set under ``key`` (``runner.events``: how it is set and stored), waiting
until it is set; ``get_events(store, run_id)`` gives every event of the run
(``durable-steps runs events``, ``runs show``).

Waiting polls the run's events (one read of the run's ``events`` items), pausing
``interval`` seconds between reads, backing off to ``max_interval``; when the run has
ended (completed, failed, cancelled) without setting the key, or ``timeout`` passes,
``TimeoutError`` says which.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ..runner.clock import now
from ..runner.errors import not_found
from ..runner.events import KIND
from ..runner.requests import Info, ReadItems, Request, Sleep, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.timers import seconds_of
from ..seam.checkpoint import RunInfo
from ..seam.items import Item
from ..seam.rules import check_name, check_run_id
from ..seam.store import AsyncStore, Store

ENDED = ("completed", "failed", "cancelled")


def _events(run_id: str) -> Generator[Request, Any, dict[str, Any]]:
    items: list[Item] = yield ReadItems(check_run_id(run_id), KIND)
    return {i.key: i.value.get("value") for i in items if isinstance(i.value, dict)}


def get_events(store: Store, run_id: str) -> dict[str, Any]:
    """Every event the run has set, by key (empty when none)."""
    return execute(_events(run_id), blocking_io(store))


async def get_events_async(store: AsyncStore, run_id: str) -> dict[str, Any]:
    """``get_events`` for async stores."""
    return await execute_on(_events(run_id), store)


def _get(
    run_id: str, key: str, timeout: float | None, interval: float, max_interval: float
) -> Generator[Request, Any, Any]:
    check_name(key, "event key")
    pause = seconds_of(interval, "get_event(interval=...)") or 0.001
    most = max(pause, seconds_of(max_interval, "get_event(max_interval=...)"))
    deadline = None if timeout is None else now() + seconds_of(timeout, "get_event(timeout=)")
    while True:
        events = yield from _events(run_id)
        if key in events:
            return events[key]
        info: RunInfo | None = yield Info(run_id)
        if info is None:
            raise not_found(run_id, "it has no events to wait for (start it first)")
        if info.status in ENDED:
            events = yield from _events(run_id)  # set just before it ended?
            if key in events:
                return events[key]
            raise TimeoutError(
                f"run {run_id!r} is {info.status} and never set event {key!r}; see "
                f"'durable-steps runs events {run_id}' for those it set"
            )
        left = None if deadline is None else deadline - now()
        if left is not None and left <= 0:
            raise TimeoutError(
                f"run {run_id!r} did not set event {key!r} within {timeout} s (it is "
                f"{info.status}); wait again, or look at it with 'durable-steps runs events'"
            )
        yield Sleep(pause if left is None else min(pause, left))
        pause = min(pause * 2, most)


def get_event(
    store: Store,
    run_id: str,
    key: str,
    *,
    timeout: float | None = 60.0,
    interval: float = 0.05,
    max_interval: float = 1.0,
) -> Any:
    """The value the run set under ``key``, waiting until it is set (``timeout``
    seconds at most, None: no limit); ``TimeoutError`` after the timeout, or at once
    when the run ended without setting it; ``RunNotFoundError`` for no such run."""
    return execute(_get(run_id, key, timeout, interval, max_interval), blocking_io(store))


async def get_event_async(
    store: AsyncStore,
    run_id: str,
    key: str,
    *,
    timeout: float | None = 60.0,
    interval: float = 0.05,
    max_interval: float = 1.0,
) -> Any:
    """``get_event`` for async stores."""
    return await execute_on(_get(run_id, key, timeout, interval, max_interval), store)
