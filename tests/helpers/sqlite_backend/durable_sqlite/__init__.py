"""durable_sqlite: checkpoints in one SQLite file, a store backend of another package.

``sqlite:PATH``. Each run is one row: its document as every store keeps it (bytes), its
etag, and the fields a listing filters on. History (issue 33): a row per completed step,
the document that completed it and the one before (whose journal was the step's). A
save is a transaction that checks the etag first (``BEGIN IMMEDIATE``: one writer at a
time), so it is conditional and never half-written; SQLite's journal makes it durable
once committed.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from durable_steps.backend import (
    Backend,
    Checkpoint,
    Item,
    Opening,
    RunFilter,
    RunInfo,
    StepRecord,
    Store,
    ThreadedStore,
    check_run_id,
    check_size,
    conflict,
    decode,
    delete_conflict,
    dumps,
    evolve,
    head_document,
    head_etag,
    head_of,
    info_of,
    item_exists,
    item_json,
    not_kept,
    state_limit,
    to_document,
)

_TABLE = """CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, etag TEXT NOT NULL, doc BLOB NOT NULL
)"""
_HISTORY = """CREATE TABLE IF NOT EXISTS history (
    run_id TEXT, step INTEGER, name TEXT, at REAL, attempts INTEGER, size INTEGER,
    doc BLOB NOT NULL, before BLOB, PRIMARY KEY (run_id, step)
)"""
_ITEMS = """CREATE TABLE IF NOT EXISTS items (
    run_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (run_id, kind, key)
)"""


class SqliteStore(Store):
    kind = "SqliteStore"

    def __init__(self, path: str, *, max_state_bytes: int | None = None) -> None:
        self.path = path
        self.max_state_bytes = state_limit(max_state_bytes)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute(_TABLE)
        self._db.execute(_HISTORY)
        self._db.execute(_ITEMS)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def _row(self, run_id: str) -> tuple[str, bytes] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT etag, doc FROM runs WHERE run_id = ?", (check_run_id(run_id),)
            ).fetchone()
        return None if row is None else (row[0], bytes(row[1]))

    def load(self, run_id: str) -> Checkpoint | None:
        row = self._row(run_id)
        return None if row is None else decode(row[1], run_id, self.path)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        etag = secrets.token_hex(12)
        doc = to_document(checkpoint, etag=etag)
        data = dumps(doc)
        check_size(
            checkpoint.run_id,
            len(dumps(doc["state"])) + len(dumps(doc["calls"])),
            self.max_state_bytes,
        )
        self._put(checkpoint, etag, data)
        return evolve(checkpoint, etag=etag, updated_at=doc["updated_at"])

    def load_head(self, run_id: str) -> Checkpoint | None:
        cp = self.load(run_id)
        return None if cp is None else head_of(cp)

    def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        head_etag(checkpoint)
        etag = secrets.token_hex(12)
        doc = head_document(checkpoint, etag=etag)
        with self._lock:
            row = self._db.execute(
                "SELECT doc FROM runs WHERE run_id = ?", (checkpoint.run_id,)
            ).fetchone()
        if row is None:
            raise conflict(checkpoint.run_id, checkpoint.etag, True)
        stored = decode(bytes(row[0]), checkpoint.run_id, self.path)
        whole = {**doc, "calls": list(stored.calls), "state": stored.state}
        self._put(checkpoint, etag, dumps(whole))
        return head_of(evolve(checkpoint, etag=etag, updated_at=doc["updated_at"]))

    def _put(self, cp: Checkpoint, etag: str, data: bytes) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT etag, doc FROM runs WHERE run_id = ?", (cp.run_id,)
                ).fetchone()
                current = None if row is None else row[0]
                if current != cp.etag:
                    raise conflict(cp.run_id, cp.etag, current is None)
                self._db.execute(
                    "INSERT OR REPLACE INTO runs (run_id, etag, doc) VALUES (?, ?, ?)",
                    (cp.run_id, etag, data),
                )
                self._note(cp, data, None if row is None else bytes(row[1]))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _note(self, cp: Checkpoint, data: bytes, before: bytes | None) -> None:
        """History: a row when this save completed a step (in the save's transaction)."""
        prior = {} if before is None else json.loads(before)
        if cp.step <= prior.get("step", -1):
            return
        self._db.execute(
            "INSERT OR REPLACE INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (cp.run_id, cp.step, cp.steps[-1], json.loads(data)["updated_at"],
             prior.get("attempt"), len(data), data, before),
        )  # fmt: skip

    def run_history(self, run_id: str) -> list[StepRecord] | None:
        if self._row(run_id) is None:
            return None
        with self._lock:
            rows = self._db.execute(
                "SELECT step, name, at, attempts, size FROM history WHERE run_id = ? ORDER BY step",
                (run_id,),
            ).fetchall()
        return [StepRecord(*row) for row in rows]

    def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        current = self._row(run_id)
        if current is None:
            return None
        with self._lock:
            rows = self._db.execute(
                "SELECT step, doc, before FROM history WHERE run_id = ? AND step >= ? "
                "ORDER BY step LIMIT 2",
                (run_id, step),
            ).fetchall()
            kept = self._db.execute(
                "SELECT step FROM history WHERE run_id = ?", (run_id,)
            ).fetchall()
        if not rows or rows[0][0] != step:
            raise not_kept(run_id, step, (k for (k,) in kept))
        # The next step's journal: before the save that completed it, or as it stands.
        after = rows[1][2] if len(rows) > 1 else current[1]
        calls = () if after is None else decode(bytes(after), run_id, self.path).calls
        return evolve(decode(bytes(rows[0][1]), run_id, self.path), etag=None, calls=calls)

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        check_run_id(run_id)
        with self._lock:
            row = self._db.execute("SELECT etag FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if etag is not None and row is not None and row[0] != etag:
                raise delete_conflict(run_id)
            self._db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            self._db.execute("DELETE FROM history WHERE run_id = ?", (run_id,))  # with its run
            self._db.execute("DELETE FROM items WHERE run_id = ?", (run_id,))
        return row is not None

    def listing(self, filters: RunFilter) -> Iterator[RunInfo]:
        with self._lock:
            rows = self._db.execute("SELECT run_id, doc FROM runs ORDER BY run_id").fetchall()
        left = filters.limit
        for run_id, doc in rows:
            if left == 0:
                return
            info = _info(run_id, bytes(doc), self.path)
            if filters.matches(info):
                left = None if left is None else left - 1
                yield info

    def run_info(self, run_id: str) -> RunInfo | None:
        row = self._row(run_id)
        return None if row is None else info_of(decode(row[1], run_id, self.path), len(row[1]))

    # -- per-run items: a row each, ordered by key ---------------------------------------

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        raw = item_json(run_id, kind, key, value)
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO items (run_id, kind, key, value) VALUES (?, ?, ?, ?)",
                    (run_id, kind, key, raw),
                )
            except sqlite3.IntegrityError:
                raise item_exists(run_id, kind, key) from None

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        raw = item_json(run_id, kind, key, value)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO items (run_id, kind, key, value) VALUES (?, ?, ?, ?)",
                (run_id, kind, key, raw),
            )

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        check_run_id(run_id)
        with self._lock:
            rows = self._db.execute(
                "SELECT key, value FROM items WHERE run_id = ? AND kind = ? AND key > ? "
                "ORDER BY key LIMIT ?",
                (run_id, kind, "" if after is None else after, -1 if limit is None else limit),
            ).fetchall()
        return [Item(k, json.loads(bytes(v))) for k, v in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def write_raw(self, run_id: str, doc: Any) -> None:
        """Tests of damaged checkpoints: ``doc`` stored as it is (bytes, or JSON)."""
        data = doc if isinstance(doc, bytes) else dumps(doc)
        etag = doc.get("etag") if isinstance(doc, dict) else None
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO runs (run_id, etag, doc) VALUES (?, ?, ?)",
                (run_id, etag if isinstance(etag, str) else "raw", data),
            )


def _info(run_id: str, doc: bytes, where: str) -> RunInfo:
    try:
        return info_of(decode(doc, run_id, where), len(doc))
    except Exception as exc:  # a damaged run is listed, with its error
        return RunInfo(run_id, -1, None, False, None, len(doc), None, str(exc))


class AsyncSqliteStore(ThreadedStore[SqliteStore]):
    def __init__(self, path: str, *, max_state_bytes: int | None = None) -> None:
        super().__init__(SqliteStore(path, max_state_bytes=max_state_bytes))


def _path(o: Opening) -> str:
    return o.rest


def _write_raw(store: Any, run_id: str, doc: object) -> None:
    (store.sync if isinstance(store, AsyncSqliteStore) else store).write_raw(run_id, doc)


BACKEND = Backend(
    "sqlite",
    open=lambda o: SqliteStore(_path(o), max_state_bytes=o.max_state_bytes),
    open_async=lambda o: AsyncSqliteStore(_path(o), max_state_bytes=o.max_state_bytes),
    fresh=lambda directory: f"sqlite:{Path(directory) / 'runs.db'}",
    write_raw=_write_raw,
)
