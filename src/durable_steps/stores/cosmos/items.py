"""What the Cosmos DB stores send and read: item bodies, their size, partial updates,
and the projected listing query. Pure logic, shared by the sync and async stores.

An item is the checkpoint document (``document.to_document``) plus ``id`` (the run id,
also the partition key), ``ttl`` once a run completes (with ``finished_ttl``),
``nonce`` (random per save: a save whose answer was lost recognises its own write by
it) and ``size``: the bytes of the body as sent, measured with the serialisation the
SDK really uses (UTF-8, or ``\\uXXXX`` escapes where the SDK cannot send UTF-8). The
2 MB check is made on that measure before anything is sent. A read item's numbers are
taken back as stored (``as_stored``): Cosmos DB may write a whole double as an integer.

A save whose state is unchanged since the stored version it replaces (a heartbeat,
a release, the claim of a resumed run: ``delta_since`` gives an empty Delta) is sent
as a partial update when this store knows the rest of that version (the fields it
last wrote or read at that etag): one PATCH, If-Match on that etag, setting the
fields that changed. Why patch rather than replace for heartbeats: Cosmos DB bills a
patch like a write of the whole item (its partial-update FAQ: no significant RU
reduction; about 5 RU at 1 KB and 625 RU at 1 MB by Microsoft's table), so RU are a
wash, but measured on the wire a heartbeat at 1 MB of state sends ~1.25 KB instead of
~1 MB (at 1 KB: 1.25 KB instead of 2.4 KB), and the client does not serialise the
state every lease/3. Cosmos DB allows 10 operations per patch; a save that needs more
is a whole replace. The vNext emulator's PATCH was reported broken (issues #232,
#246: 400 "Invalid path or method"); a refused patch (400/405/501) is sent again as
a replace at once, and the store replaces from then on.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...seam.document import SCHEMA, to_document
from ...seam.errors import StateTooLargeError
from ...seam.state import MAX_SAFE_INT, delta_since
from ...seam.store import STATUSES, Checkpoint, RunInfo, check_filters

MAX_ITEM_BYTES = 2 * 1024 * 1024
"""Cosmos DB's item limit, system properties (_rid, _etag, _ts, ...) included."""
SYSTEM_RESERVE = 1024
"""Room left for the system properties the service adds to every item."""
MAX_PATCH_OPERATIONS = 10
"""Cosmos DB's limit of operations in one partial update."""
PAGE = 1000
"""Listing rows per page: a projected row is a few hundred bytes."""
_KNOWN_RUNS = 1024


@dataclass
class Write:
    """One save as it will be sent: a whole body, or the operations of a partial update."""

    checkpoint: Checkpoint
    body: dict[str, Any]
    nonce: str
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


class Items:
    """Item bodies for one store: how its client serialises, and what it knows of the
    items it last wrote or read (their fields at an etag, for the last 1,024 runs)."""

    def __init__(self, escaped: bool, finished_ttl: int | None) -> None:
        self.escaped, self.finished_ttl = escaped, finished_ttl
        self.patch = True
        self._known: dict[str, tuple[str, dict[str, str], int]] = {}
        self._lock = threading.Lock()

    def dump(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=self.escaped, separators=(",", ":"))

    def length(self, text: str) -> int:
        return len(text) if self.escaped else len(text.encode())

    def plan(self, cp: Checkpoint, *, patch: bool = True) -> Write:
        body = to_document(cp)  # validates the checkpoint
        body["id"] = cp.run_id
        if self.finished_ttl is not None and cp.done:
            body["ttl"] = self.finished_ttl  # Cosmos DB deletes the item this long after
        body["nonce"] = secrets.token_hex(8)
        fields = {k: self.dump(v) for k, v in body.items() if k != "state"}
        write = None
        if patch and self.patch and cp.etag is not None:
            delta = delta_since(cp.state, cp.etag)
            if delta is not None and not delta:
                write = self._partial(cp, body, fields)
        if write is None:
            state = self._piece("state", self.dump(body["state"]))
            unsized = 1 + state + sum(self._piece(k, v) for k, v in fields.items())
            write = Write(cp, body, body["nonce"], self._with_size(unsized), fields)
            write.sent = write.size
        body["size"] = write.size
        fields["size"] = str(write.size)
        if write.size + SYSTEM_RESERVE > MAX_ITEM_BYTES:
            raise StateTooLargeError(
                f"run {cp.run_id!r}: the checkpoint is {write.size:,} bytes as sent, over "
                f"Cosmos DB's {MAX_ITEM_BYTES:,}-byte item limit; nothing was sent and the "
                "previous checkpoint stays. Keep large data (documents, blobs) in Blob Storage; "
                "put its URL in the state",
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
        with self._lock:
            known = self._known.get(cp.run_id)
        if known is None or known[0] != cp.etag:
            return None
        _, old, old_size = known
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
        write = Write(cp, body, body["nonce"], size, fields, operations)
        write.sent = self.length(self.dump({"operations": operations}))
        return write

    def _piece(self, key: str, value: str) -> int:
        """Bytes of ``"key":value`` and its comma in a body (a body is ``{``, its pieces
        separated by commas, and ``}``: 1 + the sum of this over its fields)."""
        return self.length(self.dump(key)) + 1 + self.length(value) + 1

    def _with_size(self, unsized: int) -> int:
        """The bytes of a body of ``unsized`` bytes once its own ``size`` is in it."""
        size = unsized
        while size != unsized + self._piece("size", str(size)):
            size = unsized + self._piece("size", str(size))
        return size

    def known(self, run_id: str, etag: str, fields: dict[str, str], size: int) -> None:
        with self._lock:
            self._known.pop(run_id, None)
            self._known[run_id] = (etag, fields, size)
            if len(self._known) > _KNOWN_RUNS:
                del self._known[next(iter(self._known))]

    def read(self, item: dict[str, Any]) -> None:
        """Remember a loaded item's fields (the state excepted), for a partial update."""
        size, etag = item.get("size"), item.get("_etag")
        if isinstance(size, int) and not isinstance(size, bool) and isinstance(etag, str):
            # The service's own properties start with "_" (ours never do): not ours to patch.
            fields = {k: self.dump(v) for k, v in item.items() if k != "state" and k[:1] != "_"}
            self.known(str(item.get("id")), etag, fields, size)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._known.pop(run_id, None)


def as_stored(item: dict[str, Any]) -> dict[str, Any]:
    """A read item's state and signals with every integer beyond +-(2**53 - 1) turned back
    into the float it was. Cosmos DB keeps numbers as doubles and may write a whole one
    as an integer (1e20 as 100000000000000000000); the state rules refuse such integers,
    so no save of ours stored one, and leaving it an int would make the run impossible
    to resume. (1.0 coming back as 1 is equal in Python and left alone.) In place: the
    item was just parsed from the answer."""
    for key in ("state", "signals"):
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


# -- listing -------------------------------------------------------------------------


@dataclass
class Listing:
    """One call of ``list_runs``: a projected, parameterised query (the filters and the
    limit are the service's work; no state and no step list travel, only the fields a
    RunInfo holds) and what has been yielded so far."""

    text: str
    parameters: list[dict[str, Any]]
    limit: int | None
    filtered: bool
    yielded: int = 0

    @property
    def page_size(self) -> int:
        return min(self.limit or PAGE, PAGE)

    @property
    def done(self) -> bool:
        return self.limit is not None and self.yielded >= self.limit

    def accept(self, rows: Iterable[dict[str, Any]]) -> Iterator[RunInfo]:
        """The RunInfos of a page's rows, up to the limit. An unreadable run is listed
        (with ``error``) only when nothing is filtered, as in every store."""
        for row in rows:
            if self.done:
                return
            info = run_info(row)
            if info.error is None or not self.filtered:
                self.yielded += 1
                yield info


_PROJECTION = (
    "c.id, c.run_id, c.schema, c.status, c.done, c.step, "
    "ARRAY_SLICE(c.steps, -1) AS step_name, ARRAY_LENGTH(c.steps) AS steps, c.workflow, "
    "c.updated_at, c.owner, c.lease_expires, c.waiting_for, c.wake_at, c.attempt, c.size, "
    "c._etag, c._ts"
)


def listing(
    status: str | None,
    workflow: str | None,
    updated_before: float | None,
    limit: int | None,
    due_before: float | None = None,
) -> Listing:
    check_filters(status, limit)
    where: list[str] = []
    parameters: list[dict[str, Any]] = []
    if status is not None:
        parameters.append({"name": "@status", "value": status})
        # Schema 1 items have no status: ``done`` says completed, else running.
        legacy = {
            "completed": " OR (NOT IS_DEFINED(c.status) AND c.done = true)",
            "running": " OR (NOT IS_DEFINED(c.status) AND (NOT IS_DEFINED(c.done) OR "
            "c.done = false))",
        }.get(status, "")
        where.append(f"(c.status = @status{legacy})")
    if workflow is not None:
        parameters.append({"name": "@workflow", "value": workflow})
        where.append("c.workflow = @workflow")
    if due_before is not None:
        parameters.append({"name": "@due", "value": due_before})
        where.append("(IS_NUMBER(c.wake_at) AND c.wake_at <= @due)")
    if updated_before is not None:
        parameters.append({"name": "@before", "value": updated_before})
        where.append("(NOT IS_NUMBER(c.updated_at) OR c.updated_at < @before)")
    top = ""
    if limit is not None:
        parameters.append({"name": "@limit", "value": limit})
        top = "TOP @limit "
    # Built from constant fragments only; every value travels as a parameter.
    text = f"SELECT {top}{_PROJECTION} FROM c"  # noqa: S608
    if where:
        text += " WHERE " + " AND ".join(where)
    return Listing(text, parameters, limit, bool(where))


def run_info(row: dict[str, Any]) -> RunInfo:
    """A listing row as a RunInfo; a row that no checkpoint of ours could give is
    reported with ``error`` set, never raised (one bad item never hides the others)."""
    run_id = str(row.get("id"))
    etag, stored_size = row.get("_etag"), row.get("size")
    size = stored_size if type(stored_size) is int else 0
    try:
        return _checked(row, run_id, etag, size)
    except ValueError as exc:
        error = (
            f"checkpoint of run {run_id!r} in Cosmos DB is unreadable: {exc}. Restore it "
            "or delete the run to start over"
        )
        return RunInfo(run_id, -1, None, False, row.get("_ts"), size, etag, error)


def _is(value: Any, kind: Any) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _checked(row: dict[str, Any], run_id: str, etag: Any, size: int) -> RunInfo:
    schema: Any = row.get("schema")
    if _is(schema, int) and schema > SCHEMA:
        raise ValueError(f"it was written with schema {schema}; upgrade durable-steps")
    if schema not in (1, 2, SCHEMA) or isinstance(schema, bool):
        raise ValueError(f"schema is {schema!r}, expected 1 to {SCHEMA}")
    if row.get("run_id") != run_id:
        raise ValueError(f"it belongs to run {row.get('run_id')!r}")
    step: Any = row.get("step")
    names, count = row.get("step_name"), row.get("steps")
    if not _is(step, int) or step < -1 or count != step + 1:
        raise ValueError(f"step {step!r} does not match {count!r} completed step names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("steps is not a list of names")
    status = row.get("status") if schema != 1 else None
    if schema == 1:
        status = "completed" if row.get("done") is True else "running"
    if status not in STATUSES:
        raise ValueError(f"status is {status!r}")
    for key, kind in (("workflow", str), ("owner", str), ("waiting_for", str)):
        if row.get(key) is not None and not isinstance(row.get(key), kind):
            raise ValueError(f"{key} is {row.get(key)!r}")
    for key in ("updated_at", "lease_expires", "wake_at"):
        if row.get(key) is not None and not _is(row.get(key), int | float):
            raise ValueError(f"{key} is not a number")
    attempt = row.get("attempt", 1)
    if not _is(attempt, int) or not isinstance(etag, str):
        raise ValueError("attempt or etag has the wrong type")
    return RunInfo(
        run_id=run_id,
        step=step,
        step_name=names[-1] if names else None,
        done=status == "completed",
        updated_at=row.get("updated_at"),
        size=size,
        etag=etag,
        status=status,
        workflow=row.get("workflow"),
        lease_expires=row.get("lease_expires"),
        owner=row.get("owner"),
        waiting_for=row.get("waiting_for"),
        wake_at=row.get("wake_at"),
        attempt=attempt,
    )
