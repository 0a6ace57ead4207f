"""Published events, the setting side: a value a run sets under a key, for outside readers.

``set_event(key, value)`` (``await set_event_async(...)`` under ``run_async``), inside
a step or a call's function, publishes ``value`` (JSON, at most 256 KiB) under
``key``: progress, a status for a UI, an intermediate answer. Outside, ``get_event``
and ``get_events`` (``runs.events``) read it. A later ``set_event`` of the same key
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
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Generator
from typing import Any

from ..seam.items import Item
from ..seam.rules import check_name
from .journal import Journal
from .requests import PutItem, ReadItems, Request, execute, execute_async
from .step import current_step
from .tasks import join

KIND = "events"
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
