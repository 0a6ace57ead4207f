"""The codec applied by the library, around a store that does not apply it itself: such
a store is given only encoded values, so no backend stores plaintext by omission.

A backend of another package writes what it is given. ``CodedStore`` (and
``AsyncCodedStore``, its awaited twin) stands between the runner and such a store:

- ``save``: the checkpoint's size is checked on its plain JSON (the one limit, codec or
  not), then its state values and call results are encoded exactly as the built-in
  stores encode them (``encoded.Coder``: the same places, the same envelopes), and the
  store saves a checkpoint that holds envelopes only; what it returns is the plain
  checkpoint with the store's new etag.
- ``load`` / ``load_at``: what the store gives back is decoded (``encoded.decoded``),
  envelope by envelope, so a mix of plain and encoded values loads, and a value of a
  key the codec lacks is ``CodecError`` before anything can be written.
- everything else (heads, listing, items, history, deletes) carries no state value and
  passes through.

Encoded values are larger than plain ones (base64 is 4/3, and each envelope names its
key and nonce), so the store underneath is opened with a limit of ``ROOM`` times the
plain one: the limit that binds is the plain one, checked here.

The built-in stores run the same ``Coder`` inside their own write paths instead (they
declare it with ``Store.encodes_values``), because they write a save's change, not its
state: a value the update did not touch is not encoded again. The registry wraps every
other store it opens (``stores.registry``), with a codec or without -- without one,
compressed values written by another configuration still load, and a plain value shaped
like an envelope is refused, as on every store.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Generic, TypeVar

from .checkpoint import Checkpoint, RunInfo, evolve
from .codec import Codec
from .document import dumps, to_document
from .encoded import Coder, decoded
from .history import StepRecord
from .items import Item
from .rules import RunFilter, check_size, state_limit
from .store import ORPHAN_AGE, AsyncStore, Store

W = TypeVar("W", Store, AsyncStore)
ROOM = 4
"""How many times the plain limit the store underneath is given (see the top)."""


def encode(codec: Codec | None, cp: Checkpoint, limit: int) -> Checkpoint:
    """``cp`` as the store underneath is given it: its size checked plain, its values
    encoded (``InvalidStateError``, ``StateTooLargeError`` before any I/O)."""
    doc = to_document(cp)  # every check of a save, on the plain checkpoint
    calls, state = doc["calls"], doc["state"]
    plain_calls, plain_state = dumps(calls), dumps(state)
    check_size(cp.run_id, len(plain_calls) + len(plain_state), limit)
    coder = Coder(codec, cp.run_id)
    stored_state = coder.state(state, plain_state)
    stored_calls = coder.records(calls, plain_calls)
    if codec is None:  # checked only: nothing to encode
        return cp
    return evolve(cp, state=json.loads(stored_state), calls=tuple(json.loads(stored_calls)))


def _back(cp: Checkpoint, stored: Checkpoint) -> Checkpoint:
    """The plain checkpoint, as the store saved it (its new etag and time)."""
    return evolve(cp, etag=stored.etag, updated_at=stored.updated_at, started_at=stored.started_at)


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


class CodedStore(_Around[Store], Store):
    """A blocking store given only encoded values (see the top). ``inner``: the store."""

    inner: Store

    def load(self, run_id: str) -> Checkpoint | None:
        cp = self.inner.load(run_id)
        return None if cp is None else decoded(self.codec, cp)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        stored = self.inner.save(encode(self.codec, checkpoint, self.max_state_bytes))
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
        cp = self.inner.load_at(run_id, step)
        return None if cp is None else decoded(self.codec, cp)

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

    def close(self) -> None:
        self.inner.close()


class AsyncCodedStore(_Around[AsyncStore], AsyncStore):
    """``CodedStore`` around an async store: the same ``encode`` and ``decoded``."""

    inner: AsyncStore

    async def load(self, run_id: str) -> Checkpoint | None:
        cp = await self.inner.load(run_id)
        return None if cp is None else decoded(self.codec, cp)

    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        stored = await self.inner.save(encode(self.codec, checkpoint, self.max_state_bytes))
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
        cp = await self.inner.load_at(run_id, step)
        return None if cp is None else decoded(self.codec, cp)

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

    async def close(self) -> None:
        await self.inner.close()
