"""MemoryStore (and AsyncMemoryStore, for asyncio): checkpoints in a dict, for tests of
code that uses durable-steps.

History (``seam.history``): each save that completes a step keeps its stored
bytes and those of the version before it (whose journal is the step's as it stood
when it completed) -- objects the store made anyway, kept instead of dropped.
Retention: ``finished_ttl`` seconds after a run ended, ``delete_expired`` (the worker,
``runs prune``) deletes it with its history."""

from __future__ import annotations

import json
import secrets
import threading
import time
from bisect import bisect_right, insort
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

from ..seam import delta
from ..seam.checkpoint import EXPIRES, Checkpoint, RunInfo, evolve, head_of
from ..seam.codec import Codec
from ..seam.document import decode, dumps, head_document, info_of, to_document
from ..seam.encoded import opened, room, sealed
from ..seam.errors import CorruptCheckpointError, conflict, delete_conflict
from ..seam.history import Keep, StepRecord, index_of, keep, not_kept, with_calls
from ..seam.items import Item, checked, item_exists, item_json
from ..seam.metering import wrote
from ..seam.rules import RunFilter, check_run_id, check_size, head_etag, state_limit
from ..seam.state import delta_since
from ..seam.store import AsyncStore, Store, ThreadedStore
from .registry import Backend, Opening
from .variables import retention


class MemoryStore(Store):
    """In-process and thread-safe; gone with the process. Keeps the full contract
    (conditional saves, run-id rules, JSON-only state) so tests against it hold
    against the durable stores too."""

    kind = "MemoryStore"
    encodes_values = True  # its saves and loads go through seam.encoded, at their edges
    sees_gone_owners = True  # no other process can hold a lease on it

    def __init__(
        self,
        *,
        max_state_bytes: int | None = None,
        history: str = "steps",
        keep_last: int | None = None,
        finished_ttl: int | None = None,
        codec: Codec | None = None,
    ) -> None:
        self.max_state_bytes = state_limit(max_state_bytes)
        self.history: Keep = keep(history, keep_last)
        self.finished_ttl = finished_ttl
        self.codec = codec  # values kept encoded, as a durable store keeps them (seam.encoded)
        self._runs: dict[str, bytes] = {}  # stored as JSON, so nothing is ever aliased
        self._etags: dict[str, tuple[str, bytes]] = {}  # etag of the bytes saved
        self._lock = threading.Lock()
        # -- history: per run, each completed step's entry, its version's
        # bytes and the version's before it; and the last saved (step, attempt).
        self._kept: dict[str, list[tuple[StepRecord, bytes, bytes | None]]] = {}
        self._last: dict[str, tuple[int, int, Any]] = {}
        # per-run items: run -> kind -> (sorted keys, key -> JSON)
        self._items: dict[str, dict[str, tuple[list[str], dict[str, bytes]]]] = {}

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._runs)} runs>)"

    def load(self, run_id: str) -> Checkpoint | None:
        raw = self._runs.get(check_run_id(run_id))
        return None if raw is None else opened(self.codec, decode(raw, run_id, "memory"))

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        plain, codec = checkpoint, self.codec
        checkpoint = sealed(codec, checkpoint, self.max_state_bytes)  # values as stored
        etag = secrets.token_hex(12)
        doc = to_document(checkpoint, etag=etag)
        # The journal and the state are the document's last members: encoded apart
        # (for the size limit) and joined, the bytes are those of dumps(doc).
        calls, state = dumps(doc.pop("calls")), dumps(doc.pop("state"))
        check_size(checkpoint.run_id, len(calls) + len(state), room(codec, self.max_state_bytes))
        with self._lock:
            before = self._runs.get(checkpoint.run_id)
            self._put(checkpoint, doc, calls, state)
            self._note(checkpoint, doc, before, state)
        return evolve(plain, etag=etag, updated_at=doc["updated_at"], started_at=doc["started_at"])

    # -- history ----------------------------------------------------------------------

    def _note(
        self, cp: Checkpoint, doc: dict[str, Any], before: bytes | None, state: bytes
    ) -> None:
        """After a save (under the lock): a completed step's entry, if history is kept."""
        step, attempt, journal = self._last.get(cp.run_id, (-1, None, None))
        self._last[cp.run_id] = (cp.step, cp.attempt, cp.calls)
        if not self.history.on or cp.step <= step:
            return
        change = delta_since(cp.state, cp.etag) if before is not None else None
        if change is None:
            size = len(state)
        else:
            parts, _ = delta.encode(cp.state, change, (), (), None)
            size = len(b",".join(parts)) + 2
        entry = StepRecord(cp.step, cp.steps[-1], doc["updated_at"], attempt, size)
        # the journal the completing save dropped, and the step's attempt records
        dropped = journal if step == cp.step - 1 else None
        entry = with_calls(entry, index_of(dropped, cp.attempt_log, cp.step))
        kept = self._kept.setdefault(cp.run_id, [])
        kept.append((entry, self._runs[cp.run_id], before))
        if self.history.keep_last is not None:
            del kept[: -self.history.keep_last]

    def run_history(self, run_id: str) -> list[StepRecord] | None:
        check_run_id(run_id)
        if not self.history.on:
            return super().run_history(run_id)
        with self._lock:
            if run_id not in self._runs:
                return None
            return [entry for entry, _, _ in self._kept.get(run_id, ())]

    def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        check_run_id(run_id)
        if not self.history.on:
            return super().load_at(run_id, step)
        with self._lock:
            current = self._runs.get(run_id)
            kept = list(self._kept.get(run_id, ()))
        if current is None:
            return None
        if step == -1:  # before the first step: the version its completing save replaced
            if not kept:
                return super().load_at(run_id, step)
            first, _, before = kept[0]
            if first.step != 0 or before is None:
                raise not_kept(run_id, step, ())
            return evolve(decode(before, run_id, "memory"), etag=None)
        for n, (entry, data, _) in enumerate(kept):
            if entry.step == step:
                # The next step's journal: as it stood before the save that completed
                # it, or as it stands now.
                after = kept[n + 1][2] if n + 1 < len(kept) else current
                calls = () if after is None else decode(after, run_id, "memory").calls
                at = evolve(decode(data, run_id, "memory"), etag=None, calls=calls)
                return opened(self.codec, at)
        raise not_kept(run_id, step, (entry.step for entry, _, _ in kept))

    def delete_expired(self, now: float | None = None) -> int:
        """Delete the runs completed more than ``finished_ttl`` seconds ago (``EXPIRES``)."""
        if self.finished_ttl is None:
            return 0
        cutoff = (time.time() if now is None else now) - self.finished_ttl
        gone = 0
        for info in list(self.listing(RunFilter(updated_before=cutoff))):
            if info.status in EXPIRES and self.delete(info.run_id, etag=info.etag):
                gone += 1
        return gone

    def load_head(self, run_id: str) -> Checkpoint | None:
        """The run's checkpoint but its data (``HeadStore``): no key needed."""
        raw = self._runs.get(check_run_id(run_id))
        return None if raw is None else head_of(decode(raw, run_id, "memory"))

    def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        """Save every field but the data on top of the stored version (``HeadStore``)."""
        head_etag(checkpoint)
        etag = secrets.token_hex(12)
        doc = head_document(checkpoint, etag=etag)
        with self._lock:
            raw = self._runs.get(checkpoint.run_id)
            if raw is None:
                raise conflict(checkpoint.run_id, checkpoint.etag, True)
            stored = decode(raw, checkpoint.run_id, "memory")
            self._put(checkpoint, doc, dumps(list(stored.calls)), dumps(stored.state))
        return head_of(
            evolve(
                checkpoint, etag=etag, updated_at=doc["updated_at"], started_at=doc["started_at"]
            )
        )

    def _put(self, cp: Checkpoint, doc: dict[str, Any], calls: bytes, state: bytes) -> None:
        """Store ``doc`` (but its data) with the journal and state given as JSON, if the
        stored etag is ``cp.etag``. Under the lock."""
        current = self._etag(cp.run_id)
        if current != cp.etag:
            raise conflict(cp.run_id, cp.etag, current is None)
        data = b'%s,"calls":%s,"state":%s}' % (dumps(doc)[:-1], calls, state)
        self._runs[cp.run_id] = data
        self._etags[cp.run_id] = (doc["etag"], data)
        wrote(len(data))

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """Remove the run; False if it had none. With ``etag``, only if unchanged."""
        check_run_id(run_id)
        with self._lock:
            if etag is not None and self._etag(run_id) not in (None, etag):
                raise delete_conflict(run_id)
            self._etags.pop(run_id, None)
            self._kept.pop(run_id, None)  # its history goes with it
            self._last.pop(run_id, None)
            self._items.pop(run_id, None)
            return self._runs.pop(run_id, None) is not None

    def listing(self, filters: RunFilter) -> Iterator[RunInfo]:
        infos = (_info(run_id, raw) for run_id, raw in sorted(self._runs.copy().items()))
        return islice((i for i in infos if filters.matches(i)), filters.limit)

    def run_info(self, run_id: str) -> RunInfo | None:
        """The run as ``list_runs`` lists it; None when it has no checkpoint."""
        raw = self._runs.get(check_run_id(run_id))
        return None if raw is None else info_of(decode(raw, run_id, "memory"), len(raw))

    # -- per-run items (streams, events; ``seam.items``) ----------------------------------

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._put_item(run_id, kind, key, item_json(run_id, kind, key, value), create=True)

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._put_item(run_id, kind, key, item_json(run_id, kind, key, value), create=False)

    def _put_item(self, run_id: str, kind: str, key: str, raw: bytes, *, create: bool) -> None:
        with self._lock:
            keys, values = self._items.setdefault(run_id, {}).setdefault(kind, ([], {}))
            if key in values:
                if create:
                    raise item_exists(run_id, kind, key)
            else:
                insort(keys, key)
            values[key] = raw
        wrote(len(raw))

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        checked(run_id, kind, after)
        with self._lock:
            keys, values = self._items.get(run_id, {}).get(kind, ([], {}))
            start = 0 if after is None else bisect_right(keys, after)
            end = len(keys) if limit is None else start + limit
            found = [(k, values[k]) for k in keys[start:end]]
        return [Item(k, json.loads(raw)) for k, raw in found]

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        checked(run_id, kind)
        with self._lock:
            kept, values = self._items.get(run_id, {}).get(kind, ([], {}))
            gone = {k for k in keys if values.pop(k, None) is not None}
            if gone:
                kept[:] = [k for k in kept if k not in gone]

    def close(self) -> None:
        """Nothing to release; present so every store closes alike."""

    def _etag(self, run_id: str) -> str | None:
        raw = self._runs.get(run_id)
        known = self._etags.get(run_id)
        if known is not None and known[1] is raw:
            return known[0]
        # (bytes put there by a test's raw writer: read them the long way)
        return None if raw is None else decode(raw, run_id, "memory").etag


def _info(run_id: str, raw: bytes) -> RunInfo:
    """The listing entry of a stored run; one that cannot be read is an entry with
    ``error`` set, as in every store (a listing never stops at a bad checkpoint)."""
    try:
        return info_of(decode(raw, run_id, "memory"), len(raw))
    except CorruptCheckpointError as exc:
        return RunInfo(run_id, -1, None, False, None, len(raw), None, str(exc))


class AsyncMemoryStore(ThreadedStore[MemoryStore]):
    """MemoryStore for asyncio. Its work is a dict update, so it runs on the loop."""

    def __init__(
        self,
        *,
        max_state_bytes: int | None = None,
        history: str = "steps",
        keep_last: int | None = None,
        finished_ttl: int | None = None,
        codec: Codec | None = None,
    ) -> None:
        store = MemoryStore(
            max_state_bytes=max_state_bytes,
            history=history,
            keep_last=keep_last,
            finished_ttl=finished_ttl,
            codec=codec,
        )
        super().__init__(store, threads=False)


# -- the backend, as the registry knows it: ``memory:`` (``DURABLE_STORE=memory``) --------


def open_store(o: Opening) -> Store:
    """A new, empty ``MemoryStore``."""
    return MemoryStore(max_state_bytes=o.max_state_bytes, codec=o.codec, **retention(o.env))


def open_async_store(o: Opening) -> AsyncStore:
    """A new, empty ``AsyncMemoryStore``."""
    kept = retention(o.env)
    return AsyncMemoryStore(max_state_bytes=o.max_state_bytes, codec=o.codec, **kept)


BACKEND = Backend(
    "memory",
    open_store,
    open_async_store,
    encodes_values=True,
    url_from_env=lambda env: "memory:",
    describe=lambda o: {},
)
