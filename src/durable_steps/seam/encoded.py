"""A checkpoint's data through a store's codec (``seam.codec``): which values are
encoded, the place each one is authenticated with, and back.

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

Sizes are those of the plain JSON: the state size limit, compaction and the split of
Cosmos DB items are decided as without a codec, and a codec changes no limit.

On load every value is looked at: envelopes are decoded (compressed ones need no key;
encrypted ones need theirs: ``CodecError`` without it), plain values are taken as they
are -- so a run written before the codec was turned on loads, and a store reads a mix.
A plain value shaped like an envelope is refused at save (``InvalidStateError``),
codec or not, since it would read back as one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .checkpoint import Checkpoint, evolve
from .codec import Codec, Compression, ValueCodec, is_envelope, place, refuse_envelope
from .document import dumps

_KEYLESS = ValueCodec(compression=Compression())
"""What a store without a codec reads envelopes with: compressed values open, encrypted
ones are ``CodecError`` (no key)."""


class Coder:
    """One run's values through ``codec`` as a save writes them (None: plain, checked
    only). Each method takes the plain JSON already made, so sizes stay plain."""

    __slots__ = ("codec", "run_id")

    def __init__(self, codec: Codec | None, run_id: str) -> None:
        self.codec, self.run_id = codec, run_id

    def value(self, key: str, value: Any, plain: bytes) -> bytes:
        """The stored JSON of the top-level value ``value`` (whose JSON is ``plain``)."""
        if isinstance(value, list):
            return self.items(key, value, 0, plain)
        refuse_envelope(value, self.run_id, key)
        if self.codec is None:
            return plain
        stored = self.codec.encode(value, plain, place(self.run_id, f"state:{key}"))
        return plain if stored is value else dumps(stored)

    def items(self, key: str, items: Sequence[Any], start: int, plain: bytes) -> bytes:
        """The stored JSON list of ``items`` (whose JSON is ``plain``), the first at index
        ``start`` of list ``key``."""
        for item in items:
            refuse_envelope(item, self.run_id, key)
        if self.codec is None:
            return plain
        out = []
        for i, item in enumerate(items, start):
            plain = dumps(item)
            stored = self.codec.encode(item, plain, place(self.run_id, f"item:{i}:{key}"))
            out.append(plain if stored is item else dumps(stored))
        return b"[" + b",".join(out) + b"]"

    def state(self, state: Mapping[str, Any], plain: bytes) -> bytes:
        """The stored JSON of a whole state (whose JSON is ``plain``)."""
        if self.codec is None:
            for key, value in state.items():
                self.value(key, value, b"")  # the checks only
            return plain
        members = [b"%s:%s" % (dumps(k), self.value(k, v, dumps(v))) for k, v in state.items()]
        return b"{" + b",".join(members) + b"}"

    def records(self, records: Sequence[Mapping[str, Any]], plain: bytes) -> bytes:
        """The stored JSON list of journal records (whose JSON is ``plain``)."""
        if self.codec is None:
            return plain
        return dumps([self.record(r) for r in records])

    def record(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.codec is None or "result" not in record:
            return record
        result = record["result"]
        where = place(self.run_id, f"call:{record['i']}:{record.get('task', '')}")
        stored = self.codec.encode(result, dumps(result), where)
        return record if stored is result else {**record, "result": stored}


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
