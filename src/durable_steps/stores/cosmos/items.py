"""What the Cosmos DB stores send as a run's item (its head, in the ``/run`` layout;
its one item in the earlier ``/id`` layout): bodies, their size, partial updates, and
what the store remembers of the versions it wrote or read. Pure logic, shared by the
sync and async stores; what a save sends as a whole is ``plan``'s.

A body is measured as the SDK really sends it (UTF-8, or ``\\uXXXX`` escapes where the
SDK cannot send UTF-8) and carries that measure as ``size``; the 2 MB item check is
made on it before anything is sent. A read item's numbers are taken back as stored
(``as_stored``): Cosmos DB may write a whole double as an integer.

A save whose state is unchanged since the stored version it replaces (a heartbeat,
a release, the claim of a resumed run: ``delta_since`` gives an empty Delta) is sent
as a partial update when this store knows the rest of that version (the fields it
last wrote or read at that etag): one PATCH, If-Match on that etag, setting the
fields that changed. Why patch rather than replace for heartbeats: Cosmos DB bills a
patch like a write of the whole item (its partial-update FAQ: no significant RU
reduction), so RU are a wash, but on the wire a heartbeat sends ~1.25 KB however
large the item, and the client does not serialise the item every lease/3. Cosmos DB
allows 10 operations per patch; a save that needs more is a whole replace. The vNext
emulator's PATCH was reported broken (issues #232, #246: 400 "Invalid path or
method"); a refused patch (400/405/501) is sent again as a replace at once, and the
store replaces from then on.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...seam.checkpoint import Checkpoint
from ...seam.delta import Sizes
from ...seam.errors import StateTooLargeError
from ...seam.history import Keep
from ...seam.state import MAX_SAFE_INT
from .segments import MAX_BODY, MAX_ITEM_BYTES, SYSTEM_RESERVE, Chain, Measure

_ASCII, _UTF8 = json.encoder.encode_basestring_ascii, json.encoder.encode_basestring
_SCALARS = {True: "true", False: "false"}
_FINITE = math.isfinite

__all__ = ["MAX_ITEM_BYTES", "SYSTEM_RESERVE", "Items", "Known", "Write", "as_stored"]

MAX_PATCH_OPERATIONS = 10
"""Cosmos DB's limit of operations in one partial update."""
_KNOWN_RUNS = 1024


@dataclass
class Write:
    """One item write as it will be sent: a whole body, or a partial update's operations."""

    checkpoint: Checkpoint
    body: dict[str, Any]
    size: int
    """Bytes of the item's body, as sent by a whole write (``size`` itself included)."""
    fields: dict[str, str]
    """Every field but ``state``, serialised: what the item holds besides its state."""
    operations: list[dict[str, Any]] | None = None
    """Set for a partial update: the operations of the PATCH."""
    sent: int = 0
    """Bytes of the request body."""

    @property
    def run_id(self) -> str:
        return self.checkpoint.run_id

    @property
    def etag(self) -> str | None:
        return self.checkpoint.etag

    @property
    def nonce(self) -> str:
        return str(self.body["nonce"])


@dataclass
class Known:
    """What a store knows of a stored version of a run (one it wrote or read)."""

    etag: str
    fields: dict[str, str]
    """The item's fields but ``state``, serialised (a partial update compares them)."""
    size: int
    sizes: Sizes | None = None
    chain: Chain | None = None
    """What the head points to; None: the data is inline."""
    fold: int | None = None
    until: float | None = None
    """When the segments of a completed run expire (epoch seconds), if they do."""
    calls: tuple[Mapping[str, Any], ...] | None = field(default=None, repr=False)
    """The journal as stored (None: unknown)."""


class Items:
    """Item bodies for one store: how its client serialises, and what it knows of the
    versions it last wrote or read (for the last 1,024 runs)."""

    def __init__(self, escaped: bool, finished_ttl: int | None) -> None:
        self.escaped, self.finished_ttl = escaped, finished_ttl
        self.history = Keep()
        """What history the store keeps (``plan``, ``history``)."""
        self.patch = True
        self.measure = Measure(self.dump, self.length)  # reads ``escaped`` when it measures
        self._known: dict[str, Known] = {}
        self._lock = threading.Lock()

    def dump(self, value: Any) -> str:
        # A save measures each of the head's ~30 fields apart (sizes, patches), most of
        # them strings, numbers or null: json's own C string encoders and the reprs it
        # uses give the same text at a fraction of a ``json.dumps`` call each.
        kind = type(value)
        if kind is str:
            return _ASCII(value) if self.escaped else _UTF8(value)
        if value is None:
            return "null"
        if kind is int or kind is bool:
            return _SCALARS[value] if kind is bool else int.__repr__(value)
        if kind is float and _FINITE(value):
            return float.__repr__(value)
        return json.dumps(value, ensure_ascii=self.escaped, separators=(",", ":"))

    def length(self, text: str) -> int:
        return len(text) if self.escaped else len(text.encode())

    def write(
        self, cp: Checkpoint, body: dict[str, Any], *, partial: bool, too_large: str
    ) -> Write:
        """The write of ``body`` (complete but for ``size``): a partial update of the
        version known at ``cp.etag`` when ``partial`` and this store can, else whole.
        Over the item limit: ``StateTooLargeError`` saying ``too_large`` (what to do)."""
        fields = {k: self.dump(v) for k, v in body.items() if k != "state"}
        write = None
        if partial and self.patch and cp.etag is not None:
            write = self._partial(cp, body, fields)
        if write is None:
            unsized = 1 + sum(self._piece(k, v) for k, v in fields.items())
            if "state" in body:
                unsized += self._piece("state", self.dump(body["state"]))
            write = Write(cp, body, self._with_size(unsized), fields)
            write.sent = write.size
        return self._sized(write, too_large)

    def partial(
        self, cp: Checkpoint, body: dict[str, Any], kept: tuple[str, ...], *, too_large: str
    ) -> Write | None:
        """``body``, which lacks the ``kept`` fields (they stay as stored), as a partial
        update of the version known at ``cp.etag``; None when it cannot be one (a version
        this store does not know, more changes than a patch holds, a store that
        replaces): then the whole item must be written."""
        known = self.known_at(cp.run_id, cp.etag)
        if not self.patch or known is None:
            return None
        stored = {k: known.fields[k] for k in kept if k in known.fields}
        fields = stored | {k: self.dump(v) for k, v in body.items()}
        write = self._partial(cp, body, fields)
        return None if write is None else self._sized(write, too_large)

    def _sized(self, write: Write, too_large: str) -> Write:
        """``write`` with its size in its body, refused over the item limit."""
        cp, body, fields = write.checkpoint, write.body, write.fields
        body["size"] = write.size
        fields["size"] = str(write.size)
        if write.size > MAX_BODY:
            raise StateTooLargeError(
                f"run {cp.run_id!r}: its item would be {write.size:,} bytes as sent, over "
                f"Cosmos DB's {MAX_ITEM_BYTES:,}-byte item limit; nothing was sent and the "
                f"previous checkpoint stays. {too_large}",
                run_id=cp.run_id,
                size=write.size + SYSTEM_RESERVE,
                limit=MAX_ITEM_BYTES,
            )
        return write

    def _partial(
        self, cp: Checkpoint, body: dict[str, Any], fields: dict[str, str]
    ) -> Write | None:
        """The write as a partial update of the version known at ``cp.etag``, if this
        store knows it and the changes fit in one patch."""
        known = self.known_at(cp.run_id, cp.etag)
        if known is None:
            return None
        old, old_size = known.fields, known.size
        changed = [k for k, v in fields.items() if old.get(k) != v]
        gone = [k for k in old if k not in fields and k != "size"]
        if len(changed) + len(gone) + 1 > MAX_PATCH_OPERATIONS:
            return None
        unsized = old_size - self._piece("size", old["size"])
        unsized += sum(self._piece(k, fields[k]) for k in changed)
        unsized -= sum(self._piece(k, old[k]) for k in [*changed, *gone] if k in old)
        size = self._with_size(unsized)
        operations = [{"op": "set", "path": _path(k), "value": body[k]} for k in changed]
        operations += [{"op": "remove", "path": _path(k)} for k in gone]
        if str(size) != old["size"]:
            operations.append({"op": "set", "path": "/size", "value": size})
        write = Write(cp, body, size, fields, operations)
        write.sent = self.length(self.dump({"operations": operations}))
        return write

    def _piece(self, key: str, value: str) -> int:
        """Bytes of ``"key":value`` and its comma in a body (a body is ``{``, its pieces
        separated by commas, and ``}``: 1 + the sum of this over its fields)."""
        return self.measure.piece(key, self.length(value))

    def _with_size(self, unsized: int) -> int:
        """The bytes of a body of ``unsized`` bytes once its own ``size`` is in it."""
        size = unsized
        while size != unsized + self._piece("size", str(size)):
            size = unsized + self._piece("size", str(size))
        return size

    # -- the versions this store knows ---------------------------------------------------

    def known_at(self, run_id: str, etag: str | None) -> Known | None:
        """What this store knows of ``run_id`` at ``etag``; None if not that version."""
        with self._lock:
            known = self._known.get(run_id)
        return known if known is not None and etag is not None and known.etag == etag else None

    def remember(self, run_id: str, known: Known) -> None:
        with self._lock:
            self._known.pop(run_id, None)
            self._known[run_id] = known
            if len(self._known) > _KNOWN_RUNS:
                del self._known[next(iter(self._known))]

    def read(self, run_id: str, item: dict[str, Any], **known: Any) -> None:
        """Remember a head as read (its fields but the state; ``known``: the rest)."""
        size, etag = item.get("size"), item.get("_etag")
        if isinstance(size, int) and not isinstance(size, bool) and isinstance(etag, str):
            # The service's own properties start with "_" (ours never do): not ours to patch.
            fields = {k: self.dump(v) for k, v in item.items() if k != "state" and k[:1] != "_"}
            self.remember(run_id, Known(etag, fields, size, **known))
        else:
            self.forget(run_id)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._known.pop(run_id, None)


def as_stored(item: dict[str, Any]) -> dict[str, Any]:
    """A read item's state, journal and signals with every integer beyond +-(2**53 - 1)
    turned back into the float it was. Cosmos DB keeps numbers as doubles and may write
    a whole one as an integer (1e20 as 100000000000000000000); the state rules refuse
    such integers, so no save of ours stored one, and leaving it an int would make the
    run impossible to resume. (1.0 coming back as 1 is equal in Python and left alone.)
    In place: the item was just parsed from the answer."""
    for key in ("state", "signals", "calls"):
        if isinstance(item.get(key), dict | list):
            _unround(item[key])
    return item


def _unround(value: dict[str, Any] | list[Any]) -> None:
    for k, v in value.items() if isinstance(value, dict) else enumerate(value):
        if type(v) is int and not -MAX_SAFE_INT <= v <= MAX_SAFE_INT:
            value[k] = float(v)  # type: ignore[index]
        elif isinstance(v, dict | list):
            _unround(v)


def _path(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")  # a JSON pointer (RFC 6901)
