"""What the console reads of features that are being built: a run's history (issue 33),
its published events, mailbox and output streams (issue 32). The one module to change
when they land.

Each function takes the store and a run id and returns what the run has, or ``None``
when this version of durable-steps keeps no such thing -- the page then shows the
panel's empty-state text (``EMPTY``), never an error. A function that fails while
reading returns nothing to the page either: the page shows the error's message in
the panel (``Panel``), and the rest of the run's page stays usable.

How each plugs in:

- ``history``: uses ``durable_steps.run_history(store, run_id)`` as soon as the package
  exports it (DESIGN: "each completed step's update, time, attempts and size"); each
  entry is read by field name (``step``, ``name``, ``at`` or ``completed_at``,
  ``attempts`` or ``attempt``, ``size``), from an object or a mapping. The timeline
  (``timeline.events_of``) draws each completed step as a bar ending at its time.
- ``events``: a run's published events as ``{key: value}`` -- ``get_event`` reads one
  key; the listing of a run's keys is to come (issue 32, item 2, "visible in runs show").
- ``mailbox``: the messages sent to a run and not yet received, oldest first.
- ``streams`` and ``stream_chunks``: a run's streams (name, chunk count, closed) and the
  chunks of one after an offset, *without following it*: the page polls for more
  (``console.js``), so a request never blocks on a stream that is still open.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import durable_steps as ds

EMPTY = {
    "history": "This version of durable-steps keeps only a run's latest checkpoint, so the "
    "times of its completed steps are not known. Once history is kept (run_history), "
    "each completed step shows here with its time, attempts and size.",
    "events": "No published events: this version of durable-steps has no set_event. "
    "Once it has, the values a run publishes show here.",
    "mailbox": "No mailbox: this version of durable-steps has no send_message. Once it "
    "has, the messages waiting for this run show here.",
    "streams": "No output streams: this version of durable-steps has no write_stream. "
    "Once it has, a run's streams show here and are followed live.",
}


@dataclass(frozen=True)
class StepDone:
    """One completed step as history keeps it."""

    step: int
    name: str
    at: float | None
    """When it completed (seconds since the epoch)."""
    attempts: int | None = None
    size: int | None = None
    """The bytes its update took."""


@dataclass(frozen=True)
class Message:
    topic: str
    payload: Any
    sent_at: float | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Stream:
    name: str
    chunks: int
    closed: bool


@dataclass(frozen=True)
class Panel:
    """A panel of the run page: its rows, or why there are none."""

    rows: list[Any]
    empty: str = ""
    error: str = ""


def _public(name: str) -> Callable[..., Any] | None:
    """A function of the public API, if this version of the package has it."""
    found = getattr(ds, name, None)
    return found if callable(found) else None


def _field(entry: Any, *names: str) -> Any:
    for name in names:
        if isinstance(entry, Mapping) and name in entry:
            return entry[name]
        if hasattr(entry, name):
            return getattr(entry, name)
    return None


def history(store: Any, run_id: str) -> list[StepDone] | None:
    """The run's completed steps with their times (None: no history is kept)."""
    run_history = _public("run_history")
    if run_history is None:
        return None
    return [
        StepDone(
            step=int(_field(e, "step")),
            name=str(_field(e, "name", "step_name")),
            at=_field(e, "at", "completed_at"),
            attempts=_field(e, "attempts", "attempt"),
            size=_field(e, "size"),
        )
        for e in run_history(store, run_id)
    ]


def events(store: Any, run_id: str) -> dict[str, Any] | None:
    """The events the run published, by key (None: no events are kept)."""
    return None


def mailbox(store: Any, run_id: str) -> list[Message] | None:
    """The messages waiting for the run, oldest first (None: no mailbox)."""
    return None


def streams(store: Any, run_id: str) -> list[Stream] | None:
    """The run's output streams (None: no streams)."""
    return None


def stream_chunks(
    store: Any, run_id: str, name: str, after: int, limit: int
) -> tuple[list[tuple[int, Any]], bool] | None:
    """Up to ``limit`` chunks of stream ``name`` after offset ``after`` as ``(offset,
    chunk)``, and whether the stream is closed -- what is there now, never waiting for
    more (None: no streams)."""
    return None


def panel(what: str, read: Callable[[], Any]) -> Panel:
    """A panel's rows from ``read`` (one of the functions above, bound to a run)."""
    try:
        found = read()
    except Exception as exc:  # a feature's failure must not take the run's page down
        return Panel([], error=f"could not read the {what}: {type(exc).__name__}: {exc}")
    if found is None:
        return Panel([], empty=EMPTY[what])
    rows = sorted(found.items()) if isinstance(found, dict) else list(found)
    return Panel(rows, empty="" if rows else f"This run has no {what} yet.")
