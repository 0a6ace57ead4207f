"""Published events: a value a run sets under a key, for outside readers.

``set_event(key, value)`` (``await set_event_async(...)`` under ``run_async``), inside
a step or a call's function, publishes ``value`` (JSON, at most 256 KiB) under
``key``: progress, a status for a UI, an intermediate answer. Outside,
``get_event(store, run_id, key, timeout=60)`` (and ``get_event_async``) returns it,
waiting until it is set; ``get_events(store, run_id)`` gives every event of the run
(``durable-steps runs events``, ``runs show``). A later ``set_event`` of the same key
replaces the value. Events are kept for the run's life and deleted with it.

Storage: one per-run item (``seam.items``) per key, of kind ``events``, written with
``put_item`` (an upsert): ``{"value": V, "at": place, "set_at": epoch}``.

Durable, once per place: a call's function runs once per recorded call, so the
events it sets are set once (a call in flight at a kill sets them again when it
runs again -- its newer value). Step code takes a place in the step's journal
(``journal.take``: step, task scope, index), stored with the event; when the step
runs again, a ``set_event`` is skipped when the stored event was set there or
later (a later index of the same scope and step, or a later step), so a replay
never moves an event back to an older value.

Waiting polls the run's events (one read of the run's ``events`` items), pausing
``interval`` seconds between reads, backing off to ``max_interval``; when the run has
ended (completed, failed, cancelled) without setting the key, or ``timeout`` passes,
``TimeoutError`` says which.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Generator
from typing import Any

from ..seam.checkpoint import RunInfo
from ..seam.items import Item
from ..seam.rules import check_name, check_run_id
from ..seam.store import AsyncStore, Store
from .clock import now
from .errors import not_found
from .journal import Journal
from .requests import Info, PutItem, ReadItems, Request, Sleep, execute, execute_async
from .step import current_step
from .store_io import blocking_io, execute_on
from .tasks import join
from .timers import seconds_of

KIND = "events"
ENDED = ("completed", "failed", "cancelled")
_MISSING = object()

_known: weakref.WeakKeyDictionary[object, dict[str, tuple[int, str, int]]] = (
    weakref.WeakKeyDictionary()
)
"""Per run program: the place (step, scope, index) where step code set each event."""


def _place(at: object) -> tuple[int, str, int] | None:
    if not isinstance(at, str) or at.count("/") != 2:
        return None
    step, scope, i = at.split("/")
    try:
        return int(step), scope, int(i)
    except ValueError:
        return None


def _set(journal: Journal, key: str, value: Any) -> Generator[Request, Any, None]:
    check_name(key, "event key")
    ctx = current_step()
    run_id = journal.run.run_id
    if ctx.call is None:
        taken, _ = journal.take("event", key)
        place = (ctx.index, str(taken.get("task", "")), int(taken["i"]))
        at = f"{place[0]}/{place[1]}/{place[2]}"
        known = _known.get(journal.run)
        if known is None:
            items: list[Item] = yield ReadItems(run_id, KIND)
            known = _known[journal.run] = {}
            for item in items:
                p = _place(item.value.get("at") if isinstance(item.value, dict) else None)
                if p is not None:
                    known[item.key] = p
        stored = known.get(key)
        if stored is not None and (
            stored[0] > place[0] or (stored[:2] == place[:2] and stored[2] >= place[2])
        ):
            return  # set here or later by an earlier attempt: a replay
        known[key] = place
    else:
        at = f"{ctx.index}/{join(ctx.call_scope, f'c{ctx.call[0]}')}@{ctx.attempt}"
    journal.check()
    yield PutItem(run_id, KIND, key, {"value": value, "at": at, "set_at": time.time()})


def _journal(what: str) -> Journal:
    journal = current_step().journal
    if not isinstance(journal, Journal) or journal.driver is None:
        raise RuntimeError(
            f"{what}() is only available inside a step run by run() or run_async(); outside, "
            "read events with get_event()"
        )
    return journal


def set_event(key: str, value: Any) -> None:
    """Publish ``value`` under ``key`` for the run's readers (see the top)."""
    journal = _journal("set_event")
    if journal.driven.is_async:
        raise TypeError(
            f"set_event({key!r}, ...) inside a step run by run_async(): await set_event_async()"
        )
    execute(_set(journal, key, value), journal.driven.io)


async def set_event_async(key: str, value: Any) -> None:
    """``set_event`` for steps run by ``run_async()`` (and coroutines of ``run`` steps)."""
    journal = _journal("set_event_async")
    driver = journal.driven
    if not driver.is_async:
        execute(_set(journal, key, value), driver.io)
        return
    await execute_async(_set(journal, key, value), driver.io)


# -- reading, outside ----------------------------------------------------------------------


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
