"""What the console reads of a run beside its checkpoint: its history, published events,
mailbox and output streams -- each through the public call that the command line makes.

- ``history``: ``run_history`` -- each kept step's index, name, completion time,
  attempts and update size (``StepRecord``); the timeline (``timeline.events_of``)
  draws each completed step as a bar ending at its time. The state after a kept step
  is a value root (``step-K``, ``root_value``) loaded with ``load_at`` when a link asks
  for it, and kept in a small cache (``After``): a kept step's state does not change.
- ``events``: ``get_events`` -- the values the run published (``set_event``), by key;
  a value root too (``events``), so a large value folds like the state.
- ``mailbox``: ``pending_messages`` -- the messages waiting, oldest first, every topic
  (one read of the run's head, never its state).
- ``streams``: ``list_streams`` -- each stream with its length and closed flag;
  ``stream_chunks`` gives the entries of one after an offset with
  ``read_stream(follow=False)``: what is there now, never waiting for more. The page
  polls after the last offset it showed (``static/console.js``), so no request blocks
  on a stream that is still open. It learns when to stop from ``done``: the stream was
  closed (``stream_info`` from the last offset: about three reads), or the run ended
  (read *before* the entries, so none written before the end is missed).

A panel whose read fails shows the error's message in its place (``Panel``): the rest
of the run's page stays usable.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from durable_steps import (
    Checkpoint,
    PendingMessage,
    StepRecord,
    Store,
    StreamInfo,
    StreamReset,
    get_events,
    list_streams,
    load_at,
    pending_messages,
    read_stream,
    run_history,
    stream_info,
)

from . import values

T = TypeVar("T")
ENDED = ("completed", "failed", "cancelled")
STEP_ROOT = "step-"
"""A value root ``step-K``: the state after kept step K."""

EMPTY = {
    "history": "No completed step is kept for this run yet.",
    "events": "This run has published no events (set_event).",
    "mailbox": "No message is waiting for this run (send_message, or the action below).",
    "streams": "This run has written no stream (write_stream).",
}


@dataclass(frozen=True)
class Panel(Generic[T]):
    """A panel of the run page: its rows, or why there are none."""

    rows: list[T]
    empty: str = ""
    error: str = ""


def panel(what: str, read: Callable[[], Sequence[T]]) -> Panel[T]:
    """A panel's rows from ``read`` (one of the functions below, bound to a run)."""
    try:
        rows = list(read())
    except Exception as exc:  # a feature's failure must not take the run's page down
        return Panel([], error=f"could not read the {what}: {type(exc).__name__}: {exc}")
    return Panel(rows, empty="" if rows else EMPTY[what])


def history(store: Store, run_id: str) -> list[StepRecord]:
    """The run's kept steps, oldest first."""
    return run_history(store, run_id)


def events(store: Store, run_id: str) -> list[tuple[str, Any]]:
    """The events the run published, ``(key, value)`` by key."""
    return sorted(get_events(store, run_id).items())


def mailbox(store: Store, run_id: str) -> list[PendingMessage]:
    """The messages waiting for the run, oldest first."""
    return pending_messages(store, run_id)


def streams(store: Store, run_id: str) -> list[StreamInfo]:
    """The run's output streams."""
    return list_streams(store, run_id)


@dataclass(frozen=True)
class Chunks:
    """Entries of a stream after an offset, as the page polls them."""

    entries: list[dict[str, Any]]
    """``{"offset": n, "chunk": C}``, or ``{"offset": n, "reset": since, "call": id}``."""
    length: int
    """Entries in the stream now (the next offset), as far as this read saw."""
    closed: bool
    done: bool
    """Nothing more will come: the stream is closed or the run ended."""


def stream_chunks(store: Store, run_id: str, name: str, after: int, limit: int) -> Chunks:
    """Up to ``limit`` entries of stream ``name`` after offset ``after`` (-1: from the
    start) -- what is there now, never waiting for more."""
    info = store.run_info(run_id)
    ended = info is not None and info.status in ENDED  # before the entries: none missed
    found = itertools.islice(read_stream(store, run_id, name, after=after, follow=False), limit)
    entries = [_entry(offset, chunk) for offset, chunk in found]
    last = entries[-1]["offset"] if entries else after
    if len(entries) == limit:  # more may be there already: no need to ask yet
        return Chunks(entries, last + 1, False, False)
    now = stream_info(store, run_id, name, known=last)
    return Chunks(entries, now.length, now.closed, now.closed or ended)


def _entry(offset: int, chunk: Any) -> dict[str, Any]:
    if isinstance(chunk, StreamReset):
        return {"offset": offset, "reset": chunk.since, "call": chunk.call}
    return {"offset": offset, "chunk": chunk}


class After:
    """The states after kept steps that pages unfolded (a few): each is loaded once
    with ``load_at``, then its folds read it here."""

    def __init__(self, store: Store, keep: int = 4) -> None:
        self.store, self.keep = store, keep
        self._states: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str, step: int) -> dict[str, Any]:
        with self._lock:
            state = self._states.get((run_id, step))
        if state is None:
            state = load_at(self.store, run_id, step)
            with self._lock:
                self._states[run_id, step] = state
                while len(self._states) > self.keep:
                    self._states.popitem(last=False)
        return state


def root_value(store: Store, after: After, cp: Checkpoint, root: str) -> Any:
    """The value a root names: the checkpoint's (``values.ROOTS``), the run's events,
    or the state after kept step K (``step-K``)."""
    if root == "events":
        return get_events(store, cp.run_id)
    if root.startswith(STEP_ROOT):
        step = root.removeprefix(STEP_ROOT)
        if not step.isdigit():
            raise values.PathError(f"{root!r} is not a root: step-K takes a step's index")
        return after.get(cp.run_id, int(step))
    return values.root_value(cp, root)
