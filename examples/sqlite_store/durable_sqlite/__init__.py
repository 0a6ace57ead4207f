"""durable_sqlite: checkpoints in one SQLite file -- the reference store backend of
docs/stores.md, named ``sqlite:PATH``.

Each run is one row: its document as every store keeps it and its etag. A save is a
transaction that compares the etag first (``BEGIN IMMEDIATE``: one writer at a time),
so it is conditional and never half-written; SQLite's journal makes it durable once
committed. The etag lives in the document too (``to_document(cp, etag=...)``), so a
loaded checkpoint carries it.

What the base class derives is not written here: ``load_head``, ``save_head`` and
``run_info`` come from ``load`` and ``save``, ``takeable`` from ``listing``. The codec
is not here either: durable-steps encodes values before this store sees them.
Optional, and here: per-run items (streams, events) and history (a row per completed
step: ``run_history``, ``load_at``, so forks and rewinds reach any step).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
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
    info_of,
    item_exists,
    item_json,
    not_kept,
    state_limit,
    to_document,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, etag TEXT NOT NULL, doc BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS history (run_id TEXT, step INTEGER, name TEXT, at REAL,
    attempts INTEGER, size INTEGER, doc BLOB NOT NULL, before BLOB, PRIMARY KEY (run_id, step));
CREATE TABLE IF NOT EXISTS items (run_id TEXT, kind TEXT, key TEXT, value BLOB NOT NULL,
    PRIMARY KEY (run_id, kind, key));
"""


class SqliteStore(Store):
    kind = "SqliteStore"

    def __init__(self, path: str, *, max_state_bytes: int | None = None) -> None:
        self.path = path
        self.max_state_bytes = state_limit(max_state_bytes)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._db.executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def _query(self, sql: str, *args: Any) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # -- the minimum: load, save, delete, listing, close -----------------------------

    def load(self, run_id: str) -> Checkpoint | None:
        rows = self._query("SELECT doc FROM runs WHERE run_id = ?", check_run_id(run_id))
        return decode(bytes(rows[0][0]), run_id, self.path) if rows else None

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        doc = to_document(checkpoint, etag=secrets.token_hex(12))  # checks it, before any I/O
        data, size = dumps(doc), len(dumps(doc["state"])) + len(dumps(doc["calls"]))
        check_size(checkpoint.run_id, size, self.max_state_bytes)  # the one limit, plain
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT etag, doc FROM runs WHERE run_id = ?", (checkpoint.run_id,)
                ).fetchone()
                if (row and row[0]) != checkpoint.etag:
                    raise conflict(checkpoint.run_id, checkpoint.etag, row is None)
                self._db.execute(
                    "INSERT OR REPLACE INTO runs VALUES (?, ?, ?)",
                    (checkpoint.run_id, doc["etag"], data),
                )
                self._note(checkpoint, data, None if row is None else bytes(row[1]))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return evolve(checkpoint, etag=doc["etag"], updated_at=doc["updated_at"])

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        check_run_id(run_id)
        with self._lock:
            row = self._db.execute("SELECT etag FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if etag is not None and row is not None and row[0] != etag:
                raise delete_conflict(run_id)
            for table in ("runs", "history", "items"):  # everything of the run
                self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))  # noqa: S608
        return row is not None

    def listing(self, filters: RunFilter) -> Iterator[RunInfo]:
        left = filters.limit
        for run_id, doc in self._query("SELECT run_id, doc FROM runs ORDER BY run_id"):
            if left == 0:
                return
            info = _info(run_id, bytes(doc), self.path)
            if filters.matches(info):
                left = None if left is None else left - 1
                yield info

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- optional: history, a row per completed step (in the save's transaction) --------

    def _note(self, cp: Checkpoint, data: bytes, before: bytes | None) -> None:
        prior = {} if before is None else json.loads(before)
        if cp.step > prior.get("step", -1):
            self._db.execute(
                "INSERT OR REPLACE INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (cp.run_id, cp.step, cp.steps[-1], json.loads(data)["updated_at"],
                 prior.get("attempt"), len(data), data, before),
            )  # fmt: skip

    def run_history(self, run_id: str) -> list[StepRecord] | None:
        if self.load_head(run_id) is None:
            return None
        rows = self._query(
            "SELECT step, name, at, attempts, size FROM history WHERE run_id = ? ORDER BY step",
            run_id,
        )
        return [StepRecord(*row) for row in rows]

    def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        current = self._query("SELECT doc FROM runs WHERE run_id = ?", check_run_id(run_id))
        if not current:
            return None
        rows = self._query(
            "SELECT step, doc, before FROM history WHERE run_id = ? AND step >= ? "
            "ORDER BY step LIMIT 2",
            run_id,
            step,
        )
        if not rows or rows[0][0] != step:
            kept = self._query("SELECT step FROM history WHERE run_id = ?", run_id)
            raise not_kept(run_id, step, (k for (k,) in kept))
        # The next step's journal: before the save that completed it, or as it stands.
        after = rows[1][2] if len(rows) > 1 else current[0][0]
        calls = () if after is None else decode(bytes(after), run_id, self.path).calls
        return evolve(decode(bytes(rows[0][1]), run_id, self.path), etag=None, calls=calls)

    # -- optional: per-run items (streams, events), a row each, ordered by key ----------

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        try:
            self._query("INSERT INTO items VALUES (?, ?, ?, ?)", run_id, kind, key,
                        item_json(run_id, kind, key, value))  # fmt: skip
        except sqlite3.IntegrityError:
            raise item_exists(run_id, kind, key) from None

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._query("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)", run_id, kind, key,
                    item_json(run_id, kind, key, value))  # fmt: skip

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        rows = self._query(
            "SELECT key, value FROM items WHERE run_id = ? AND kind = ? AND key > ? "
            "ORDER BY key LIMIT ?",
            check_run_id(run_id), kind, after or "", -1 if limit is None else limit,
        )  # fmt: skip
        return [Item(k, json.loads(bytes(v))) for k, v in rows]

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        for key in keys:
            self._query("DELETE FROM items WHERE run_id = ? AND kind = ? AND key = ?",
                        check_run_id(run_id), kind, key)  # fmt: skip


def _info(run_id: str, doc: bytes, where: str) -> RunInfo:
    try:
        return info_of(decode(doc, run_id, where), len(doc))
    except Exception as exc:  # a damaged run is listed, with its error
        return RunInfo(run_id, -1, None, False, None, len(doc), None, str(exc))


class AsyncSqliteStore(ThreadedStore[SqliteStore]):
    def __init__(self, path: str, *, max_state_bytes: int | None = None) -> None:
        super().__init__(SqliteStore(path, max_state_bytes=max_state_bytes))


# -- for the contract suite: a damaged document stored as it is ------------------------


def _write_raw(store: Any, run_id: str, doc: object) -> None:
    sqlite = store.sync if isinstance(store, AsyncSqliteStore) else store
    data = doc if isinstance(doc, bytes) else dumps(doc)
    etag = doc.get("etag") if isinstance(doc, dict) else None
    sqlite._query("INSERT OR REPLACE INTO runs VALUES (?, ?, ?)", run_id, str(etag), data)


def _open(o: Opening) -> SqliteStore:
    return SqliteStore(o.rest, max_state_bytes=o.max_state_bytes)


BACKEND = Backend(
    "sqlite",
    open=_open,
    open_async=lambda o: AsyncSqliteStore(o.rest, max_state_bytes=o.max_state_bytes),
    fresh=lambda directory: f"sqlite:{Path(directory) / 'runs.db'}",
    write_raw=_write_raw,
)
