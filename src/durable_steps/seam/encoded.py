"""A checkpoint's data through a store's codec (``seam.codec``): which values are
encoded, the place each one is authenticated with, and back -- the one place where
values are encoded, for every store: a store is given a checkpoint whose values are
encoded already (``sealed``) and its loads are decoded here (``opened``), so no store,
ours or another package's, holds plaintext by omission, and none holds a codec in its
write path.

The codec works value by value because saves do: a save writes only its update, so an
update's values are encoded and nothing else is touched.

- A top-level state value that is a list is encoded item by item (place
  ``item:I:KEY``): an ``extend`` of an agent's conversation encodes the appended items
  only and still costs them, however long the list grows.
- Any other top-level state value is encoded whole (place ``state:KEY``).
- A journal record's ``result`` is encoded (place ``call:I:TASK``); the record's index,
  name, time and attempts stay clear.

The state's keys, the step names, status, lease, timers, signals (names and payloads:
a signal is sent by whoever holds the run id, often without the key) and the last error
stay clear, so listing, ``run_info``, leases and the operator's tools need no key.

An encoded delta. The runner's state remembers the state it was made from and the
change between them (``state.FrozenState``), and its journal the records it added
(``state.CallRecords``). ``sealed`` keeps beside each plain state and journal its
encoded twin (``_sealed``): the next one's twin is the previous twin plus the change,
encoded -- with the same shape of remembering (a ``Delta`` of encoded values, a
``CallRecords`` of encoded records), and marked stored when the plain one is. So a store
is given an encoded change to write (``delta_since``, ``CallRecords.base``), exactly
as it would be given a plain one; a value the update did not touch is never encoded
again, and a store that writes the whole state (another package's) still costs the
encoding of the change only. A state without a twin (a run just created, or made
other than by the runner) is encoded whole, once.

Sizes. The state size limit is the plain JSON's, codec or not: ``sealed`` checks it
on the plain data -- measured as the stores measure a change (``seam.delta``), from the
twin's noted plain size -- and a store given encoded values measures, compacts and
splits what it stores, under ``room(codec, limit)``: encoded values are larger than
plain ones (base64 is 4/3, and each envelope names its key and nonce).

On load every value is looked at (``opened``): envelopes are decoded (compressed ones
need no key; encrypted ones need theirs: ``CodecError`` without it), plain values are
taken as they are -- so a run written before the codec was turned on loads, and a store
reads a mix. The stored values are kept as the loaded state's twin. A plain value
shaped like an envelope is refused at save (``InvalidStateError``), codec or not, since
it would read back as one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import delta
from .checkpoint import Checkpoint, evolve
from .codec import Codec, Compression, ValueCodec, is_envelope, place, refuse_envelope
from .document import dumps, to_document
from .rules import check_size
from .state import (
    CallRecords,
    Delta,
    FrozenState,
    Opened,
    call_key,
    call_records,
    forget_base,
    is_checked,
    stored_state,
)

_KEYLESS = ValueCodec(compression=Compression())
"""What a store without a codec reads envelopes with: compressed values open, encrypted
ones are ``CodecError`` (no key)."""
ROOM = 4
"""How many times the plain limit a store given encoded values measures against."""


def room(codec: Codec | None, limit: int) -> int:
    """The limit a store applies to what it is given (see the top): the plain one
    without a codec (its values are plain), ``ROOM`` times it with one."""
    return limit if codec is None else ROOM * limit


class Coder:
    """One run's values through ``codec`` (None: plain, checked only)."""

    __slots__ = ("codec", "run_id")

    def __init__(self, codec: Codec | None, run_id: str) -> None:
        self.codec, self.run_id = codec, run_id

    def value(self, key: str, value: Any) -> Any:
        """The stored form of the top-level value ``value`` (a list: item by item)."""
        if isinstance(value, list):
            return self.items(key, value, 0)
        refuse_envelope(value, self.run_id, key)
        if self.codec is None:
            return value
        return self.codec.encode(value, dumps(value), place(self.run_id, f"state:{key}"))

    def items(self, key: str, items: Sequence[Any], start: int) -> list[Any]:
        """The stored form of ``items``, the first at index ``start`` of list ``key``."""
        for item in items:
            refuse_envelope(item, self.run_id, key)
        if self.codec is None:
            return list(items)
        return [
            self.codec.encode(item, dumps(item), place(self.run_id, f"item:{i}:{key}"))
            for i, item in enumerate(items, start)
        ]

    def record(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.codec is None or "result" not in record:
            return record
        result = record["result"]
        where = place(self.run_id, f"call:{record['i']}:{record.get('task', '')}")
        stored = self.codec.encode(result, dumps(result), where)
        return record if stored is result else {**record, "result": stored}


def sealed(
    codec: Codec | None, cp: Checkpoint, limit: int, *, plain_below: bool = True
) -> Checkpoint:
    """``cp`` as a store is given it: its values encoded (its change only, when the
    state and journal it was made from were sealed before), the plain size checked
    against ``limit``. ``plain_below``: without a codec the store measures the plain
    data it is given against ``limit`` itself (the built-in stores: ``room``); False:
    the store measures against ``ROOM`` times it whatever the codec (``CodedStore``),
    so the plain size is checked here in any case. ``InvalidStateError``,
    ``StateTooLargeError``: before any I/O."""
    if not is_checked(cp.state) or (cp.calls and not is_checked(cp.calls)):
        to_document(cp)  # every check of a save, on the plain checkpoint, first
    coder = Coder(codec, cp.run_id)
    if codec is None and plain_below:
        _check(coder, cp.state)
        return cp
    state, state_size = _state_twin(coder, cp.state)
    calls, calls_size = _calls_twin(coder, cp.calls)
    check_size(cp.run_id, state_size + calls_size, limit)
    return evolve(cp, state=state, calls=calls)


def _check(coder: Coder, state: Mapping[str, Any]) -> None:
    """Without a codec, the values a save may write checked only: a plain value shaped
    like an envelope would read back as one. A state that says its change: that change's
    values (the others were checked when they were set)."""
    change = state._delta if isinstance(state, FrozenState) else None
    if change is None:
        for key, value in state.items():
            coder.value(key, value)
        return
    for key, value in change.set.items():
        coder.value(key, value)
    for key, items in change.extended.items():
        coder.items(key, items, 0)


def _mirror(plain: FrozenState, twin: FrozenState) -> None:
    """The twin marked as stored where its plain state is (``state.mark_stored``)."""
    twin._stored_as = plain._stored_as
    if plain._parent is None:
        twin._parent = twin._delta = None


def _state_twin(coder: Coder, state: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    """The encoded state, and the plain state's JSON size."""
    if not isinstance(state, FrozenState):  # nothing to remember it by: whole
        return {k: coder.value(k, v) for k, v in state.items()}, len(dumps(state))
    twin = state._sealed
    if twin is None or twin._codec is not coder.codec:
        twin = _changed_twin(coder, state)
    if twin is None:
        twin = stored_state({k: coder.value(k, v) for k, v in state.items()})
        twin._plain, twin._codec = len(dumps(state)), coder.codec
        state._sealed = twin
    _mirror(state, twin)
    if twin._plain is None:  # loaded: measured once
        twin._plain = len(dumps(state))
    return twin, twin._plain


def _changed_twin(coder: Coder, state: FrozenState) -> FrozenState | None:
    """The twin of ``state`` made from its parent's twin and the change between them,
    encoded; None when the parent has none."""
    parent, change = state._parent, state._delta
    before = None if parent is None else parent._sealed
    if parent is None or change is None or before is None or before._codec is not coder.codec:
        return None
    _mirror(parent, before)
    if before._plain is None:
        before._plain = len(dumps(parent))
    grown = 0
    set_ = {k: coder.value(k, v) for k, v in change.set.items()}
    if change.set:
        _, more = delta.set_member(change.set, parent, state)
        assert more is not None  # (measured against the parent it applies to)
        grown += more
    extended = {}
    for key, items in change.extended.items():
        extended[key] = coder.items(key, items, len(state[key]) - len(items))
    if change.extended:
        grown += delta.extend_member(change.extended, state)[1]
    values = {**before, **set_}
    for key, items in extended.items():
        values[key] = [*before[key], *items]
    twin = stored_state(values)
    twin._parent, twin._delta = before, Delta(set_, extended, before)
    twin._plain, twin._codec = before._plain + grown, coder.codec
    state._sealed = twin
    return twin


def _calls_twin(
    coder: Coder, calls: Sequence[Mapping[str, Any]]
) -> tuple[Sequence[Mapping[str, Any]], int]:
    """The encoded journal, and the plain journal's JSON size."""
    if not isinstance(calls, CallRecords):
        return tuple(coder.record(r) for r in calls), len(dumps(list(calls)))
    twin = calls.sealed
    if twin is None or twin.codec is not coder.codec:
        base = calls.base
        before = base.sealed if isinstance(base, CallRecords) else None
        if before is not None and before.codec is not coder.codec:
            before = None
        if before is not None and base is not None and before.plain is not None:
            added = tuple(coder.record(r) for r in calls.added)
            keys = {call_key(r) for r in added}
            replaced = tuple(r for r in before if call_key(r) in keys) if calls.replaced else ()
            if not replaced and (not before or call_key(before[-1]) < min(keys, default=("",))):
                items: Sequence[Mapping[str, Any]] = before + added
            else:
                kept = (r for r in before if call_key(r) not in keys)
                items = sorted([*kept, *added], key=call_key)
            twin = call_records(items, before, added, replaced)
            size = delta.added_member(
                calls.added, calls.replaced, len(base), len(calls), before.plain
            )[1]
            forget_base(before)  # its own base is needed no more
        else:
            twin = call_records(coder.record(r) for r in calls)
            size = len(dumps(list(calls)))
        twin.plain, twin.codec = size, coder.codec
        calls.sealed = twin
    assert twin.plain is not None
    return twin, twin.plain


def opened(codec: Codec | None, cp: Checkpoint) -> Checkpoint:
    """``cp`` as loaded from a store, its values decoded (``decoded``); the values as
    stored kept as its state's twin, so that the next save encodes its change only."""
    out = decoded(codec, cp)
    if out is cp or codec is None:
        return out
    twin = stored_state(dict(cp.state))
    twin._stored_as, twin._codec = cp.etag, codec
    state = Opened(out.state)
    state._sealed = twin
    return evolve(out, state=state)


def decoded(codec: Codec | None, cp: Checkpoint) -> Checkpoint:
    """``cp`` as loaded, its values decoded (``cp`` itself when none is encoded).
    ``CodecError``: a value encrypted with a key the codec lacks; tampered ones are
    ``CorruptCheckpointError``. Raised here, at load, before anything can be written."""
    reader = _KEYLESS if codec is None else codec
    state = decode_state(reader, cp.run_id, cp.state)
    calls = decode_records(reader, cp.run_id, cp.calls)
    if state is cp.state and calls is cp.calls:
        return cp
    return evolve(cp, state=state, calls=calls)


def decode_state(codec: Codec, run_id: str, state: Mapping[str, Any]) -> Any:
    out: dict[str, Any] | None = None
    for key, value in state.items():
        new = value
        if isinstance(value, list):
            if any(is_envelope(item) for item in value):
                new = [
                    codec.decode(item, place(run_id, f"item:{i}:{key}"), run_id)
                    for i, item in enumerate(value)
                ]
        elif is_envelope(value):
            new = codec.decode(value, place(run_id, f"state:{key}"), run_id)
        if new is not value:
            if out is None:
                out = dict(state)
            out[key] = new
    return state if out is None else out


def decode_records(
    codec: Codec, run_id: str, records: Sequence[Mapping[str, Any]]
) -> Sequence[Mapping[str, Any]]:
    if not any(is_envelope(r.get("result")) for r in records):
        return records
    out: list[Mapping[str, Any]] = []
    for record in records:
        if is_envelope(record.get("result")):
            where = place(run_id, f"call:{record['i']}:{record.get('task', '')}")
            out.append({**record, "result": codec.decode(record["result"], where, run_id)})
        else:
            out.append(record)
    return tuple(out)
