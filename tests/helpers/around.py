"""Stores around a store, for tests that make one method misbehave: every method of the
interface goes to ``inner``; a test subclasses ``Around`` (or ``AroundAsync``) and
overrides what it breaks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import durable_steps as ds
from durable_steps.seam.rules import RunFilter
from durable_steps.seam.store import ORPHAN_AGE


class Around(ds.Store):
    def __init__(self, inner: ds.Store) -> None:
        self.inner = inner
        self.kind = inner.kind  # type: ignore[misc]
        self.max_state_bytes = inner.max_state_bytes

    def load(self, run_id: str) -> ds.Checkpoint | None:
        return self.inner.load(run_id)

    def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return self.inner.save(checkpoint)

    def load_head(self, run_id: str) -> ds.Checkpoint | None:
        return self.inner.load_head(run_id)

    def save_head(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return self.inner.save_head(checkpoint)

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return self.inner.delete(run_id, etag=etag)

    def listing(self, filters: RunFilter) -> Iterator[ds.RunInfo]:
        return self.inner.listing(filters)

    def run_info(self, run_id: str) -> ds.RunInfo | None:
        return self.inner.run_info(run_id)

    def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        return self.inner.prune_orphans(older_than)

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self.inner.append_item(run_id, kind, key, value)

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self.inner.put_item(run_id, kind, key, value)

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Any]:
        return self.inner.read_items(run_id, kind, after=after, limit=limit)

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        self.inner.delete_items(run_id, kind, keys)

    def close(self) -> None:
        self.inner.close()


class AroundAsync(ds.AsyncStore):
    def __init__(self, inner: ds.AsyncStore) -> None:
        self.inner = inner
        self.kind = inner.kind  # type: ignore[misc]
        self.max_state_bytes = inner.max_state_bytes

    async def load(self, run_id: str) -> ds.Checkpoint | None:
        return await self.inner.load(run_id)

    async def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return await self.inner.save(checkpoint)

    async def load_head(self, run_id: str) -> ds.Checkpoint | None:
        return await self.inner.load_head(run_id)

    async def save_head(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return await self.inner.save_head(checkpoint)

    async def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return await self.inner.delete(run_id, etag=etag)

    def listing(self, filters: RunFilter) -> AsyncIterator[ds.RunInfo]:
        return self.inner.listing(filters)

    async def run_info(self, run_id: str) -> ds.RunInfo | None:
        return await self.inner.run_info(run_id)

    async def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        return await self.inner.prune_orphans(older_than)

    async def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self.inner.append_item(run_id, kind, key, value)

    async def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self.inner.put_item(run_id, kind, key, value)

    async def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Any]:
        return await self.inner.read_items(run_id, kind, after=after, limit=limit)

    async def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        await self.inner.delete_items(run_id, kind, keys)

    async def close(self) -> None:
        await self.inner.close()
