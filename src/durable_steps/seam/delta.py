"""A checkpoint's data as a store writes it: whole, or as its change since the version
the store holds -- the one format that the file log's records and Cosmos DB's
segments share, with the exact sizes a snapshot would have after it.

A checkpoint's *data* is its state (a JSON object) and the journal of its running
step (``calls``: a list of records, each a JSON object keyed by its task's scope
``task`` and its index ``i`` there: ``state.call_key``). Every
other field is small, and each store writes it whole.

A change is a set of JSON members, which a store joins into an object:

- ``"state": {...}`` the whole state; or ``"set": {...}`` (keys set to new values)
  and ``"extend": {...}`` (key -> items appended to a list): the ``state.Delta``
  the runner knows, since nothing is ever removed from a state;
- ``"calls": [...]`` every record; or ``"calls+": [...]`` the records added since,
  where a record of a key already there replaces it (a retried call's attempt
  count by its result). A completed step drops its records: ``"calls": []``.

``apply`` replays such an object onto a state and a journal. ``Sizes`` are the bytes
that the state and the journal, each as compact JSON, take in a snapshot after the
change: exact without encoding the state (a replaced value's old length is the one
noted when it was written, ``state.note_lengths``); None where a part that is not
written whole had no known size before.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .document import dumps
from .state import CallRecords, Delta, call_key, is_record, note_lengths, noted_length


class Sizes(NamedTuple):
    """Bytes of the state's JSON and of the journal's (a list of records) in a snapshot."""

    state: int
    calls: int


NO_CALLS = 2
"""The bytes of an empty journal: ``[]``."""


def encode(
    state: Mapping[str, Any],
    delta: Delta | None,
    calls: Sequence[Mapping[str, Any]],
    known_calls: Sequence[Mapping[str, Any]] | None,
    sizes: Sizes | None,
) -> tuple[list[bytes], Sizes | None]:
    """The members that turn the stored data into ``state`` and ``calls``, and the
    sizes after. ``delta``: the state's change since the stored version (None: write
    it whole); ``known_calls``: the journal as stored (None: unknown, write it
    whole); ``sizes``: as stored (None: unknown). The values are as the store is
    given them (with a codec, already encoded: ``seam.encoded``), and so are the sizes."""
    parts: list[bytes] = []
    state_size: int | None
    if delta is None:
        whole = dumps(state)
        parts.append(b'"state":' + whole)
        state_size = len(whole)
    else:
        grown: int | None = 0
        if delta.set:
            part, grown = set_member(delta.set, delta.before, state)
            parts.append(b'"set":' + part)
        if delta.extended:
            part, more = extend_member(delta.extended, state)
            parts.append(b'"extend":' + part)
            grown = None if grown is None else grown + more
        state_size = None if sizes is None or grown is None else sizes.state + grown
    part, calls_size = _calls(calls, known_calls, None if sizes is None else sizes.calls)
    if part:
        parts.append(part)
    after = None if state_size is None or calls_size is None else Sizes(state_size, calls_size)
    return parts, after


def _calls(
    calls: Sequence[Mapping[str, Any]],
    known: Sequence[Mapping[str, Any]] | None,
    size: int | None,
) -> tuple[bytes, int | None]:
    """The journal's member (empty when unchanged) and its size after."""
    if calls is known:
        return b"", size
    if known is not None and isinstance(calls, CallRecords) and calls.base is known:
        # The runner's journal says what it added to the one stored: no pass over it.
        return added_member(calls.added, calls.replaced, len(calls.base), len(calls), size)
    if known is not None:
        by_key = {call_key(r): r for r in calls}
        if all(call_key(r) in by_key for r in known):  # nothing dropped: records added
            # A record kept is the very object in both -- or, after a load (the runner
            # freezes a loaded journal anew), an equal one.
            kept = {k for r in known if (got := by_key[k := call_key(r)]) is r or got == r}
            new = [r for r in calls if call_key(r) not in kept]
            if not new:
                return b"", size
            replaced = [r for r in known if call_key(r) not in kept]
            return added_member(new, replaced, len(known), len(calls), size)
    whole = dumps(list(calls))
    return b'"calls":' + whole, len(whole)


def added_member(
    new: Sequence[Mapping[str, Any]],
    replaced: Sequence[Mapping[str, Any]],
    known: int,
    total: int,
    size: int | None,
) -> tuple[bytes, int | None]:
    """``calls+`` of the ``new`` records, and the journal's size after: the ``known``
    records' bytes, less those ``new`` ones replaced, plus theirs, ``total`` in all."""
    if not new:
        return b"", size
    added = dumps(list(new))
    if size is None:
        return b'"calls+":' + added, None
    items = size - NO_CALLS - max(known - 1, 0)  # the bytes of the records
    items -= sum(len(dumps(r)) for r in replaced)
    items += len(added) - NO_CALLS - (len(new) - 1)
    return b'"calls+":' + added, items + NO_CALLS + max(total - 1, 0)


def apply(
    state: dict[str, Any] | None, calls: dict[tuple[str, int], Any], change: dict[str, Any]
) -> dict[str, Any] | None:
    """Apply one change (see the top) to ``state`` (returned: a whole ``state`` replaces
    it) and ``calls`` (key -> record, in place). TypeError or ValueError names what
    is wrong with a change that does not fit."""
    if "state" in change:
        state = change["state"]
        if not isinstance(state, dict):
            raise TypeError("its state is not a JSON object")
    elif "set" in change or "extend" in change:
        if not isinstance(state, dict):
            raise TypeError("it changes a state that nothing before it holds")
        state.update(_object(change, "set"))
        for key, items in _object(change, "extend").items():
            if not isinstance(state.get(key), list) or not isinstance(items, list):
                raise TypeError(f"it extends {key!r}, which is not a list")
            state[key].extend(items)
    if "calls" in change:
        calls.clear()
    for key in ("calls", "calls+"):
        records = change.get(key, [])
        if not isinstance(records, list):
            raise TypeError(f"{key} is not a list")
        for record in records:
            if not is_record(record):
                raise TypeError(f"{key} holds something that is not a call record")
            calls[call_key(record)] = record
    return state


def journal(calls: dict[tuple[str, int], Any]) -> list[Any]:
    """``apply``'s records as a checkpoint holds them: in the order of their keys."""
    return [calls[k] for k in sorted(calls)]


def _object(change: dict[str, Any], key: str) -> dict[str, Any]:
    value = change.get(key, {})
    if not isinstance(value, dict):
        raise TypeError(f"{key} is not a JSON object")
    return value


def set_member(
    values: dict[str, Any], before: Mapping[str, Any] | None, state: Mapping[str, Any]
) -> tuple[bytes, int | None]:
    """``set``'s JSON object, and how many bytes longer it makes the state's JSON (None:
    unknown, without the state it applies to). The length of each new value's JSON is
    noted on ``state``, so that when a later step replaces it, its length is known
    without encoding it again (``state.note_lengths``)."""
    entries, lengths = [], {}
    grown, keys = 0, 0 if before is None else len(before)
    for key, value in values.items():
        name, encoded = _value(key), _value(value)
        entries.append(b"%s:%s" % (name, encoded))
        lengths[key] = len(encoded)
        if before is None:
            continue
        old = before.get(key, _MISSING)
        if old is _MISSING:  # a new member, after a comma unless it is the first
            grown += len(name) + 1 + len(encoded) + (keys > 0)
            keys += 1
        else:
            was = noted_length(before, key)
            grown += len(encoded) - (len(_value(old)) if was is None else was)
    note_lengths(state, lengths)
    return b"{" + b",".join(entries) + b"}", None if before is None else grown


def _value(value: Any) -> bytes:
    """``dumps`` of one value; a string straight through the C escaper (most values)."""
    if type(value) is str:
        return _escape(value).encode()
    return dumps(value)


def extend_member(lists: dict[str, list[Any]], state: Mapping[str, Any]) -> tuple[bytes, int]:
    """``extend``'s JSON object, and how many bytes longer it makes the state's JSON:
    each list gains its new items, after a comma unless it was empty."""
    entries = []
    grown = 0
    for key, items in lists.items():
        added = dumps(items)
        entries.append(b"%s:%s" % (_value(key), added))
        if items:
            grown += len(added) - 2 + (len(state[key]) > len(items))
    return b"{" + b",".join(entries) + b"}", grown


_MISSING = object()
_escape = json.encoder.encode_basestring  # what the JSON encoder uses, with ensure_ascii off
