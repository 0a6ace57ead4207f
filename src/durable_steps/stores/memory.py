"""MemoryStore (and AsyncMemoryStore, for asyncio): checkpoints in a dict, for tests of
code that uses durable-steps."""

from __future__ import annotations

import json
import secrets
import threading
from bisect import bisect_right, insort
from collections.abc import Iterator
from itertools import islice
from typing import Any

from ..seam.checkpoint import Checkpoint, RunInfo, evolve, head_of
from ..seam.document import decode, dumps, head_document, info_of, to_document
from ..seam.errors import CorruptCheckpointError, conflict, delete_conflict
from ..seam.items import Item, checked, item_exists, item_json
from ..seam.metering import wrote
from ..seam.rules import RunFilter, check_run_id, check_size, head_etag, state_limit
from ..seam.store import Store, ThreadedStore


class MemoryStore(Store):
    """In-process and thread-safe; gone with the process. Keeps the full contract
    (conditional saves, run-id rules, JSON-only state) so tests against it hold
    against the durable stores too."""

    kind = "MemoryStore"

    def __init__(self, *, max_state_bytes: int | None = None) -> None:
        self.max_state_bytes = state_limit(max_state_bytes)
        self._runs: dict[str, bytes] = {}  # stored as JSON, so nothing is ever aliased
        self._etags: dict[str, tuple[str, bytes]] = {}  # etag of the bytes saved
        self._lock = threading.Lock()
        # per-run items: run -> kind -> (sorted keys, key -> JSON)
        self._items: dict[str, dict[str, tuple[list[str], dict[str, bytes]]]] = {}

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._runs)} runs>)"

    def load(self, run_id: str) -> Checkpoint | None:
        raw = self._runs.get(check_run_id(run_id))
        return None if raw is None else decode(raw, run_id, "memory")

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        etag = secrets.token_hex(12)
        doc = to_document(checkpoint, etag=etag)
        # The journal and the state are the document's last members: encoded apart
        # (for the size limit) and joined, the bytes are those of dumps(doc).
        calls, state = dumps(doc.pop("calls")), dumps(doc.pop("state"))
        check_size(checkpoint.run_id, len(calls) + len(state), self.max_state_bytes)
        with self._lock:
            self._put(checkpoint, doc, calls, state)
        return evolve(checkpoint, etag=etag, updated_at=doc["updated_at"])

    def load_head(self, run_id: str) -> Checkpoint | None:
        """The run's checkpoint but its data (``HeadStore``)."""
        cp = self.load(run_id)
        return None if cp is None else head_of(cp)

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
        return head_of(evolve(checkpoint, etag=etag, updated_at=doc["updated_at"]))

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

    def __init__(self, *, max_state_bytes: int | None = None) -> None:
        super().__init__(MemoryStore(max_state_bytes=max_state_bytes), threads=False)
