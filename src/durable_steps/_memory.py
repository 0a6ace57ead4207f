"""MemoryStore: checkpoints in a dict, for tests of code that uses durable-steps."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from dataclasses import replace

from ._store import Checkpoint, RunInfo, check_run_id, conflict, decode, dumps, to_document


class MemoryStore:
    """In-process and thread-safe; gone with the process. Keeps the full contract
    (conditional saves, run-id rules, JSON-only state) so tests against it hold
    against the durable stores too."""

    def __init__(self) -> None:
        self._runs: dict[str, bytes] = {}  # stored as JSON, so nothing is ever aliased
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._runs)} runs>)"

    def load(self, run_id: str) -> Checkpoint | None:
        raw = self._runs.get(check_run_id(run_id))
        return None if raw is None else decode(raw, run_id, "memory")

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        etag = secrets.token_hex(12)
        doc = to_document(checkpoint, etag=etag)
        data = dumps(doc)
        with self._lock:
            raw = self._runs.get(checkpoint.run_id)
            current = None if raw is None else decode(raw, checkpoint.run_id, "memory").etag
            if current != checkpoint.etag:
                raise conflict(checkpoint.run_id, checkpoint.etag, current is None)
            self._runs[checkpoint.run_id] = data
        return replace(checkpoint, etag=etag, updated_at=doc["updated_at"])

    def delete(self, run_id: str) -> bool:
        with self._lock:
            return self._runs.pop(check_run_id(run_id), None) is not None

    def list_runs(self) -> Iterator[RunInfo]:
        for run_id, raw in sorted(self._runs.copy().items()):
            cp = decode(raw, run_id, "memory")
            last = cp.steps[-1] if cp.steps else None
            yield RunInfo(run_id, cp.step, last, cp.done, cp.updated_at, len(raw), cp.etag)

    def close(self) -> None:
        """Nothing to release; present so every store closes alike."""
