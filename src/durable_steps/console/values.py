"""A run's values folded: a state, a call's result or a signal's payload shown a level
and a page at a time, so that a page never carries a whole 25 MB state.

A value is addressed by a root (``state``, ``calls``: the recorded results by call,
``signals``: the payloads by name) and a path of keys and indexes into it. ``node``
gives what one fold shows: for an object or an array, a page of its entries (``PAGE``),
each with its kind, its size as JSON and, when short, its value inline; for a string
longer than ``INLINE``, a chunk of ``TEXT`` characters with the offset of the next; for
anything else, its JSON. Whatever the value's size, a fold sends at most about
``PAGE * INLINE`` + ``TEXT`` characters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durable_steps import Checkpoint

PAGE = 100
"""Entries of an object or array per fold."""
TEXT = 16_384
"""Characters of a long string per fold."""
INLINE = 160
"""A value whose JSON is at most this long is shown in place."""
ROOTS = ("state", "calls", "signals")
MAX_PATH = 200


class PathError(LookupError):
    """A path that does not lead to a value (the value changed, or a bad link)."""


@dataclass(frozen=True)
class Entry:
    key: str | int
    kind: str
    size: int
    """Bytes of its JSON."""
    inline: str | None
    """Its JSON when short, else None (it folds)."""
    count: int | None = None
    """Entries of an object or array."""


@dataclass(frozen=True)
class Node:
    root: str
    path: tuple[str | int, ...]
    kind: str
    size: int
    entries: list[Entry]
    count: int
    """Entries of an object or array (all of them, not only this page)."""
    offset: int
    text: str | None = None
    """A string's chunk, or a scalar's JSON."""
    next_offset: int | None = None
    """Where the next page or chunk starts (None: this was the last)."""


def kind_of(value: Any) -> str:
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Sequence):
        return "array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    # Not JSON: a value encrypted with a key the console lacks (the cli reads the store
    # through ``codec.Shown``), shown as its text, "<encrypted with key 'k1'>".
    return "number" if isinstance(value, int | float) else "encrypted"


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def root_value(cp: Checkpoint, root: str) -> Any:
    if root == "state":
        return cp.state
    if root == "signals":
        return dict(cp.signals)
    if root == "calls":
        return {call_name(r): r["result"] for r in cp.calls if "result" in r}
    raise PathError(f"{root!r} is not a root; use one of {', '.join(ROOTS)}")


def call_name(record: Mapping[str, Any]) -> str:
    """A recorded call's address: its index, after its task's name when a task made it;
    a keyed call's key, in brackets."""
    if "key" in record:
        return f"[{record['key']}]"
    task = record.get("task")
    return f"{task}/{record['i']}" if task else str(record["i"])


def parse_path(text: str | None) -> tuple[str | int, ...]:
    """A path as links carry it: a JSON array of keys (strings) and indexes (ints)."""
    if not text:
        return ()
    try:
        path = json.loads(text)
    except ValueError:
        raise PathError("the path is not JSON") from None
    if (
        not isinstance(path, list)
        or len(path) > MAX_PATH
        or not all(isinstance(p, str) or (type(p) is int and p >= 0) for p in path)
    ):
        raise PathError("the path must be a JSON array of keys and indexes")
    return tuple(path)


def at_path(value: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        in_object = isinstance(value, Mapping) and isinstance(step, str) and step in value
        in_array = kind_of(value) == "array" and isinstance(step, int) and step < len(value)
        if in_object or in_array:
            value = value[step]
        else:
            raise PathError(f"there is no {step!r} here (the value may have changed): reload")
    return value


def node(root: str, value: Any, path: tuple[str | int, ...], offset: int = 0) -> Node:
    """One fold of ``value`` (the root's value) at ``path``, from ``offset``."""
    here = at_path(value, path)
    kind = kind_of(here)
    text = to_json(here) if kind not in ("object", "array", "string") else None
    if kind == "string":
        chunk = here[offset : offset + TEXT]
        more = offset + TEXT if offset + TEXT < len(here) else None
        size = len(to_json(here).encode())
        return Node(root, path, kind, size, [], len(here), offset, chunk, more)
    if text is not None:
        return Node(root, path, kind, len(text.encode()), [], 0, 0, text)
    items = list(here.items()) if kind == "object" else list(enumerate(here))
    page = [_entry(k, v) for k, v in items[offset : offset + PAGE]]
    more = offset + PAGE if offset + PAGE < len(items) else None
    size = len(to_json(here).encode())
    return Node(root, path, kind, size, page, len(items), offset, None, more)


def _entry(key: str | int, value: Any) -> Entry:
    text = to_json(value)
    kind = kind_of(value)
    short = text if len(text) <= INLINE else None
    count = len(value) if kind in ("object", "array") else None
    return Entry(key, kind, len(text.encode()), short, count)


def sizes(value: Mapping[str, Any]) -> list[Entry]:
    """Every top-level key of a state with its size (for a summary)."""
    return [_entry(k, v) for k, v in value.items()]
