"""The codec applied by the library around a store of another package: such a store
is given only encoded values, so no backend stores plaintext by omission.

A backend of another package writes what it is given. ``CodedStore`` (and
``AsyncCodedStore``, its awaited twin) stands between the runner and such a store,
through ``seam.encoded`` -- the one place values are encoded, the built-in stores'
too (they call it at their own edges, since they are opened without this wrapper):

- ``save``: the checkpoint the store is given is ``encoded.sealed``'s: its change
  encoded (a value the update did not touch is not encoded again), the size checked on
  the plain data (the one limit, codec or not); what it returns is the plain
  checkpoint with the store's new etag.
- ``load`` / ``load_at``: what the store gives back is ``encoded.opened``: decoded
  envelope by envelope, so a mix of plain and encoded values loads, and a value of a
  key the codec lacks is ``CodecError`` before anything can be written.
- everything else (heads, listing, items, history, deletes) carries no state value and
  passes through.

The store underneath is opened with a limit of ``ROOM`` times the plain one
(``encoded.room``): the limit that binds is the plain one, checked here. The registry
wraps every store of another package it opens (``stores.registry``), with a codec or
without -- without one, compressed values written by another configuration still load,
and a plain value shaped like an envelope is refused, as on every store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Generic, TypeVar

from .checkpoint import Checkpoint, RunInfo, evolve
from .codec import Codec
from .encoded import ROOM, opened, sealed
from .history import StepRecord
from .items import Item
from .rules import RunFilter, state_limit
from .store import ORPHAN_AGE, AsyncStore, Store

__all__ = ["ROOM", "AsyncCodedStore", "CodedStore"]

W = TypeVar("W", Store, AsyncStore)


def _back(cp: Checkpoint, stored: Checkpoint) -> Checkpoint:
    """The plain checkpoint, as the store saved it (its new etag and time)."""
    return evolve(cp, etag=stored.etag, updated_at=stored.updated_at, started_at=stored.started_at)


def _opened(codec: Codec | None, cp: Checkpoint | None) -> Checkpoint | None:
    return None if cp is None else opened(codec, cp)


class _Around(Generic[W]):
    """What both wrappers hold: the store underneath, the codec, the plain limit."""

    def __init__(self, inner: W, codec: Codec | None, max_state_bytes: int | None) -> None:
        self.inner: W = inner
        self.codec = codec
        self.kind = inner.kind  # an instance's kind: its store's
        self.max_state_bytes = state_limit(max_state_bytes)
        self.finished_ttl = inner.finished_ttl
        self.encodes_values = True
        self.sees_gone_owners = inner.sees_gone_owners

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, {self.codec!r})"

    def _sealed(self, cp: Checkpoint) -> Checkpoint:
        """What the store below is given: measured against ``ROOM`` times the plain
        limit whatever the codec, so the plain one is checked here always."""
        return sealed(self.codec, cp, self.max_state_bytes, plain_below=False)


class CodedStore(_Around[Store], Store):
    """A blocking store given only encoded values (see the top). ``inner``: the store."""

    inner: Store

    def load(self, run_id: str) -> Checkpoint | None:
        return _opened(self.codec, self.inner.load(run_id))

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        stored = self.inner.save(self._sealed(checkpoint))
        return _back(checkpoint, stored)

    def load_head(self, run_id: str) -> Checkpoint | None:
        return self.inner.load_head(run_id)

    def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        return self.inner.save_head(checkpoint)

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return self.inner.delete(run_id, etag=etag)

    def listing(self, filters: RunFilter) -> Iterator[RunInfo]:
        return self.inner.listing(filters)

    def run_info(self, run_id: str) -> RunInfo | None:
        return self.inner.run_info(run_id)

    def takeable(self, workflows: Sequence[str], *, at: float) -> Iterator[RunInfo]:
        return self.inner.takeable(workflows, at=at)

    def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        return self.inner.prune_orphans(older_than)

    def run_history(self, run_id: str) -> list[StepRecord] | None:
        return self.inner.run_history(run_id)

    def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        return _opened(self.codec, self.inner.load_at(run_id, step))

    def delete_expired(self, now: float | None = None) -> int:
        return self.inner.delete_expired(now)

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self.inner.append_item(run_id, kind, key, value)

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self.inner.put_item(run_id, kind, key, value)

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        return self.inner.read_items(run_id, kind, after=after, limit=limit)

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        self.inner.delete_items(run_id, kind, keys)

    def close(self) -> None:
        self.inner.close()


class AsyncCodedStore(_Around[AsyncStore], AsyncStore):
    """``CodedStore`` around an async store: the same ``sealed`` and ``opened``."""

    inner: AsyncStore

    async def load(self, run_id: str) -> Checkpoint | None:
        return _opened(self.codec, await self.inner.load(run_id))

    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        stored = await self.inner.save(self._sealed(checkpoint))
        return _back(checkpoint, stored)

    async def load_head(self, run_id: str) -> Checkpoint | None:
        return await self.inner.load_head(run_id)

    async def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        return await self.inner.save_head(checkpoint)

    async def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return await self.inner.delete(run_id, etag=etag)

    def listing(self, filters: RunFilter) -> AsyncIterator[RunInfo]:
        return self.inner.listing(filters)

    async def run_info(self, run_id: str) -> RunInfo | None:
        return await self.inner.run_info(run_id)

    async def takeable(self, workflows: Sequence[str], *, at: float) -> AsyncIterator[RunInfo]:
        async for info in self.inner.takeable(workflows, at=at):
            yield info

    async def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        return await self.inner.prune_orphans(older_than)

    async def run_history(self, run_id: str) -> list[StepRecord] | None:
        return await self.inner.run_history(run_id)

    async def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        return _opened(self.codec, await self.inner.load_at(run_id, step))

    async def delete_expired(self, now: float | None = None) -> int:
        return await self.inner.delete_expired(now)

    async def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self.inner.append_item(run_id, kind, key, value)

    async def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self.inner.put_item(run_id, kind, key, value)

    async def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        return await self.inner.read_items(run_id, kind, after=after, limit=limit)

    async def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        await self.inner.delete_items(run_id, kind, keys)

    async def close(self) -> None:
        await self.inner.close()
