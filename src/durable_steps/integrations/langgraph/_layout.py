"""Where a thread's checkpoints, writes and channel values live among its run's items,
and how a LangGraph value becomes an item's JSON (the package's top tells the design).

Every name here is pure: keys, kinds, the encoding of one value into records and the
records back into the value. No I/O; the programs (``_programs``) do that.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from ... import (
    Compression,
    CorruptCheckpointError,
    InvalidRunIdError,
    InvalidStateError,
    ValueCodec,
)
from ...backend import Codec, Item, check_run_id, dumps, is_envelope, place

WORKFLOW = "langgraph"
"""The workflow name of a thread's run (``list_runs(workflow="langgraph")`` lists threads)."""
CHUNK = 160_000
"""Characters of a payload per item: under the 256 KB an item may hold in every store
(base64; or latin-1 text, which has few characters JSON escapes: ``encode``)."""
_HEX = "0123456789abcdef"
_INVERT = str.maketrans(_HEX + _HEX.upper(), _HEX[::-1] + _HEX[::-1])
_MAX_KIND = 255


def thread_run(thread_id: object) -> str:
    """The run that holds a thread: ``lg.`` + its id, or its hash when the id breaks
    the run-id rules (a ``/``, too long)."""
    text = str(thread_id)
    try:
        return check_run_id("lg." + text)
    except InvalidRunIdError:
        return "lg.sha256-" + hashlib.sha256(text.encode()).hexdigest()


def kind(prefix: str, *parts: str) -> str:
    """An item kind from parts of any text: each part but the last led by its length,
    so no two lists of parts give one kind; hashed when over the kind limit."""
    name = prefix + "".join(f"{len(p)}.{p}." for p in parts[:-1]) + (parts[-1] if parts else "")
    if len(name) > _MAX_KIND or any(ord(c) < 0x20 or 0xD800 <= ord(c) <= 0xDFFF for c in name):
        return prefix + "#" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()
    return name


def checkpoints_kind(ns: str) -> str:
    return kind("lg.cp.", ns)


def blobs_kind(ns: str) -> str:
    return kind("lg.b.", ns)


def extensions_kind(ns: str, channel: str) -> str:
    return kind("lg.x.", ns, channel)


NAMESPACES = "lg.ns"


def checkpoint_key(checkpoint_id: str) -> str:
    """A checkpoint's key: its id with each hex digit inverted, so that the store's
    ascending key order is LangGraph's newest-first (its ids are uuid6, time-ordered)."""
    if not checkpoint_id or checkpoint_id.strip(_HEX + _HEX.upper() + "-"):
        raise ValueError(
            f"checkpoint id {checkpoint_id!r} is not a LangGraph checkpoint id (hex digits "
            "and '-', as LangGraph's uuid6 ids are): DurableSaver keeps the ids LangGraph makes"
        )
    return checkpoint_id.lower().translate(_INVERT)


def checkpoint_id_of(key: str) -> str:
    return key.translate(_INVERT)


def blob_key(channel: str, version: object) -> str:
    return f"{channel} {version}"


def before(key: str) -> str:
    """A text that sorts just before ``key`` and after every shorter key before it: the
    ``after`` of a read whose first item is ``key`` when it exists."""
    return key[:-1] + chr(ord(key[-1]) - 1) + "\uffff"


# -- values ----------------------------------------------------------------------------------


def encode(serde: SerializerProtocol, value: Any, what: str, run_id: str) -> tuple[str, str]:
    """``value`` as LangGraph's serializer writes it (its type, its bytes as text), or
    ``InvalidStateError`` when it cannot be written without pickle."""
    try:
        kind_, data = serde.dumps_typed(value)
    except Exception as exc:
        raise InvalidStateError(
            f"thread run {run_id!r}: {what} ({type(value).__name__}) cannot be encoded by "
            f"the checkpoint serializer without pickle ({exc}); nothing was written. Keep "
            "plain data, LangChain messages, dataclasses or Pydantic models in the graph's "
            "state, or give DurableSaver a serde that encodes it",
            run_id=run_id,
        ) from exc
    if kind_ == "pickle":
        raise InvalidStateError(
            f"thread run {run_id!r}: {what} would be stored as a pickle, which DurableSaver "
            "never writes (a pickle runs code when it is read); nothing was written. Use a "
            "serializer without pickle fallback (JsonPlusSerializer() is)",
            run_id=run_id,
        )
    # Mostly text (a message, a document): its bytes as characters, about their own size
    # in JSON; else base64 (a third more). Which, the type says (``TEXT``).
    escaped = len(data) - len(data.translate(None, _ESCAPED))
    if len(data) + 5 * escaped < len(data) * 4 // 3:
        return TEXT + kind_, data.decode("latin-1")
    return kind_, base64.b64encode(data).decode()


TEXT = "l:"
"""A stored type's mark that its data is the serializer's bytes as latin-1 characters
(no mark: base64)."""
_ESCAPED = bytes(range(0x20)) + b'"\\' + bytes(range(0x7F, 0x100))
"""Bytes that JSON escapes (as ``\\u00XX`` at worst) when written as characters."""


def decode(serde: SerializerProtocol, kind_: str, text: str, run_id: str) -> Any:
    if kind_.startswith(TEXT):
        kind_, data = kind_[len(TEXT) :], text.encode("latin-1")
    else:
        data = base64.b64decode(text)
    if kind_ == "pickle":
        raise CorruptCheckpointError(
            f"thread run {run_id!r}: a stored value is a pickle, which DurableSaver never "
            "reads; delete the thread (delete_thread) or restore it from a backup",
            run_id=run_id,
        )
    return serde.loads_typed((kind_, data))


_KEYLESS = ValueCodec(compression=Compression())
"""What a saver on a store without a codec reads sealed records with: compressed ones
open, encrypted ones are ``CodecError`` naming their key id."""


def _where(run_id: str, kind_: str, key: str) -> bytes:
    """A record's authenticated data: its run, its item kind and its key, so a sealed
    payload copied to another thread, channel, version or checkpoint does not open."""
    return place(run_id, f"langgraph\x00{kind_}\x00{key}")


def seal(codec: Codec | None, run_id: str, kind_: str, key: str, text: str) -> tuple[str, bool]:
    """A record's payload (``text``, the serializer's base64) through the store's codec,
    as the store's own envelope (``seam.codec``), written as JSON text: (the payload to
    store, whether it is sealed). Unchanged without a codec, or when the codec keeps it
    plain (compression only, too small to gain)."""
    if codec is None:
        return text, False
    stored = codec.encode(text, dumps(text), _where(run_id, kind_, key))
    if stored is text or not is_envelope(stored):
        return text, False
    return dumps(stored).decode("ascii"), True


def unseal(codec: Codec | None, run_id: str, kind_: str, head: Item, text: str) -> str:
    """The serializer's base64 of a record whose stored payload is ``text``: opened
    with the codec when the record is sealed. ``CodecError`` for a key the codec lacks
    or a wrong key (naming its id); ``CorruptCheckpointError`` for a sealed payload
    that was altered or moved."""
    if not head.value.get("e"):
        return text
    try:
        stored = json.loads(text)
    except ValueError:
        stored = None
    if not is_envelope(stored):
        raise CorruptCheckpointError(
            f"thread run {run_id!r}: item {head.key!r} of {kind_!r} is marked encoded and "
            "its payload is not an encoded value; the thread's store was changed outside "
            "DurableSaver",
            run_id=run_id,
        )
    plain = (_KEYLESS if codec is None else codec).decode(
        stored, _where(run_id, kind_, head.key), run_id
    )
    if not isinstance(plain, str):
        raise CorruptCheckpointError(
            f"thread run {run_id!r}: item {head.key!r} of {kind_!r} decodes to no payload",
            run_id=run_id,
        )
    return plain


def records(
    key: str,
    meta: dict[str, Any],
    payload: str,
    *,
    codec: Codec | None = None,
    run_id: str = "",
    kind_: str = "",
) -> list[Item]:
    """One logical record as items: the head (``meta``, the first chunk, how many chunks
    and their nonce), then the other chunks -- under keys of this write alone (the
    nonce), so a second writer of the same head never overwrites the first one's chunks.
    Write the chunks first: a head is never there without them. With a ``codec`` the
    payload is sealed first (``seal``; the head says so with ``"e": 1``)."""
    payload, sealed = seal(codec, run_id, kind_, key, payload)
    if sealed:
        meta = {**meta, "e": 1}
    chunks = [payload[i : i + CHUNK] for i in range(0, len(payload), CHUNK)] or [""]
    nonce = secrets.token_hex(4)
    head = Item(key, {**meta, "d": chunks[0], "n": len(chunks), "c": nonce})
    rest = [Item(chunk_key(key, nonce, i), {"d": c}) for i, c in enumerate(chunks[1:], 1)]
    return [*rest, head]


def chunk_key(key: str, nonce: str, i: int) -> str:
    return f"{key}#{nonce}{i:05d}"


def payload(
    head: Item,
    items: Sequence[Item] | dict[str, Any],
    run_id: str,
    *,
    codec: Codec | None = None,
    kind_: str = "",
) -> str:
    """A record's whole payload from its head and its chunks (``items``: the chunks, in
    order, or every item read by key), opened with ``codec`` when it is sealed."""
    value = head.value
    n, nonce = value.get("n", 1), value.get("c", "")
    parts = [value.get("d", "")]
    by_key = items if isinstance(items, dict) else {i.key: i.value for i in items}
    for i in range(1, n):
        chunk = by_key.get(chunk_key(head.key, nonce, i))
        if not isinstance(chunk, dict) or not isinstance(chunk.get("d"), str):
            raise CorruptCheckpointError(
                f"thread run {run_id!r}: item {head.key!r} is missing its chunk {i} of {n}; "
                "the thread's store was changed outside DurableSaver",
                run_id=run_id,
            )
        parts.append(chunk["d"])
    return unseal(codec, run_id, kind_, head, "".join(parts))
