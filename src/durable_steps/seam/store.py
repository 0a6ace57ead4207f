"""The store interface: every method that the runner, the workers, the command line and
the test plugin call, in one base that each backend inherits -- ``Store`` (blocking)
and ``AsyncStore`` (awaited, never blocking the event loop) -- with the contract of
each method written once, here.

- ``load`` / ``save``: a run's checkpoint, whole; ``save`` is conditional.
- ``load_head`` / ``save_head``: the checkpoint but its data (the state and the running
  step's journal): what a signal, a cancellation and ``Workflow.start`` read and write,
  whatever the state's size.
- ``delete``, ``list_runs`` (filters as one ``RunFilter``, applied by the backend,
  results streamed, no state read), ``run_info`` (one run's metadata).
- ``prune_orphans``: data that no run refers to any more (a crashed save's leftovers).
- ``run_history`` / ``load_at``: the completed steps a store keeps, and the
  checkpoint after one of them (``seam.history``); ``delete_expired``: runs completed
  longer than the store's ``finished_ttl`` ago (a store without item TTL).
- ``append_item`` / ``put_item`` / ``read_items``: a run's per-run items (streams,
  events; ``items`` has their design), removed with the run.
- ``close`` and the context manager.

A backend implements the abstract methods -- ``load``, ``save``, ``delete``,
``listing``, ``close`` -- and the base derives the rest from them: ``load_head`` and
``run_info`` from ``load``, ``save_head`` from ``load`` and a conditional ``save``,
``takeable`` from ``listing``, history as the latest checkpoint alone. A backend
overrides what it can do better (a head read alone, an index of due runs, kept
history); per-run items are optional (without them, no streams or events).
``list_runs`` turns its keyword filters into a ``RunFilter`` once, for every backend.
``ThreadedStore`` makes an ``AsyncStore`` of a blocking one (its calls in worker
threads, or on the loop for a store whose work is a dict update), so the async twin of
a blocking backend cannot drift from it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from itertools import islice
from typing import Any, ClassVar, Generic, TypeVar

from .checkpoint import Checkpoint, RunInfo, evolve, head_of
from .codec import Codec
from .document import dumps, info_of, to_document
from .errors import conflict, no_items
from .history import StepRecord, latest, latest_at
from .items import Item
from .rules import RunFilter, head_etag

S = TypeVar("S", bound="Store")
ORPHAN_AGE = 3600.0
"""``prune_orphans`` leaves data younger than this (seconds): it may be a save's in flight."""
T = TypeVar("T")


class Store(ABC):
    """Where checkpoints live (blocking). Every method checks its run id by the rules of
    every store (``rules``) before any I/O; every error it raises is a ``DurableError``
    (an ``OSError``, an SDK's exception become ``StoreError`` naming the run)."""

    kind: ClassVar[str] = "Store"
    """The backend's name in spans and logs (``FileStore``, ``CosmosStore``...)."""
    max_state_bytes: int
    """The state size limit (JSON bytes), the same in every store unless configured."""
    codec: Codec | None = None
    """What the state's values and call results are encoded with at rest (``codec=``,
    ``seam.encoded``); None: plain. A tool that only shows runs may put a
    ``codec.Shown`` here, to show what it cannot decrypt as such instead of failing."""
    encodes_values: bool = False
    """True for a store that calls ``seam.encoded`` at its own edges -- ``sealed`` before
    its save sees a value, ``opened`` after its loads -- so its write path is given only
    encoded values (the built-in stores, opened without a wrapper). Any other store the
    registry opens is given them by ``coded.CodedStore``, through the same functions."""
    finished_ttl: int | None = None
    """Seconds after a run ended when it goes (retention); None: kept."""
    sees_gone_owners: bool = False
    """True when ``takeable`` also answers the runs leased by a process of this machine
    that has ended (the store keeps which processes hold leases: FileStore), or when no
    other process can hold them (MemoryStore). False: such a run's lease looks live to
    the store's filter, so a one-off pass (``recover``) lists every running run to take
    it at once, as a worker's first look does."""

    @abstractmethod
    def load(self, run_id: str) -> Checkpoint | None:
        """The stored checkpoint, or ``None`` when the run has none. A checkpoint that
        exists but cannot be read raises ``CorruptCheckpointError``: never a silent fresh
        start."""

    @abstractmethod
    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        """Save conditionally: with ``etag=None`` only if the run has no checkpoint,
        otherwise only if the stored etag still equals ``checkpoint.etag``; a mismatch
        raises ``ConflictError`` and writes nothing. Once it returns the checkpoint is
        durable (as the backend defines it) and is returned with its new etag; a reader
        never sees it half-written. A save whose outcome the store could not see is
        settled by reading back: never "nothing was written" about a write that landed.
        A state whose JSON (with the running step's call results) is over
        ``max_state_bytes`` is refused before anything is written
        (``StateTooLargeError``); so is a checkpoint read without its state."""

    def load_head(self, run_id: str) -> Checkpoint | None:
        """The stored checkpoint but its data: ``state`` is ``NOT_READ`` (a stand-in that
        refuses to be read), ``calls`` empty, every other field as ``load`` gives it, the
        etag too. ``None``: the run has no checkpoint. By default ``load``'s, its data
        dropped: a backend that reads a head alone overrides it, so that what signals
        and cancellations cost does not grow with the state."""
        return _head(self.load(run_id))

    def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        """Save every field of ``checkpoint`` but its data, on top of the stored version
        at ``checkpoint.etag``, whose state and journal stay as they are. Conditional and
        settled like ``save`` (no run, or another etag: ``ConflictError``, nothing
        written; ``etag=None``: ``ValueError``). Returns the checkpoint as stored, its
        state ``NOT_READ``, its calls empty, with its new etag. By default the stored
        version is loaded and saved again with these fields -- conditional on the same
        etag, so a writer in between still conflicts."""
        stored = self.load(checkpoint.run_id)
        return head_of(self.save(_on_stored(checkpoint, stored)))

    @abstractmethod
    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """Remove the run and everything stored with it; False if it had none. With
        ``etag``, only if the run is unchanged since then (else ``ConflictError``)."""

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        updated_before: float | None = None,
        due_before: float | None = None,
        limit: int | None = None,
        version: str | None = None,
    ) -> Iterator[RunInfo]:
        """The runs (``RunFilter`` says which; ``version``: runs pinned to it), streamed,
        never reading a run's state. A run that cannot be read is listed with ``error``
        set (and only without filters)."""
        return self.listing(
            RunFilter(status, workflow, updated_before, due_before, limit, versions=_v(version))
        )

    @abstractmethod
    def listing(self, filters: RunFilter) -> Iterator[RunInfo]:
        """``list_runs`` as a backend writes it: the filters checked already."""

    def run_info(self, run_id: str) -> RunInfo | None:
        """One run as ``list_runs`` lists it, or ``None``: its metadata, not its state.
        By default made from ``load`` (its size: the document's)."""
        return _info(self.load(run_id))

    # -- discovery: the runs a worker may take ------------------------------------------

    def takeable(self, workflows: Sequence[str], *, at: float) -> Iterator[RunInfo]:
        """The runs of ``workflows`` a worker may take at ``at`` (epoch seconds):
        ``running`` with no lease or a lease that expires by ``at``; ``waiting`` with a
        wake time or signal deadline (``wake_at``) by ``at``; either past its run
        deadline (``deadline``) by ``at``. A backend filters them
        itself, so that the cost of a look grows with these runs, not with the runs
        live workers hold. A hint, not a promise: it may answer more (the caller checks
        each run's fields, and its claim is a conditional save), never fewer. This
        default lists every running and due waiting run of each workflow."""
        return _takeable(self.listing, workflows, at)

    def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        """Remove data that no run refers to and that is older than ``older_than``
        seconds (a crashed save's leftovers); how many items went. Nothing, by default."""
        return 0

    def wake_on_start(self, port: int) -> bool:
        """Ask to be sent a UDP datagram on 127.0.0.1:``port`` whenever a save on this
        machine makes a run takeable now (a start, a signal, a child's end): an idle
        worker then looks at once instead of at its next poll. False: this backend
        does not (its workers poll); the default."""
        return False

    def processes(self) -> list[str] | None:
        """The owner-id prefixes (``ds1:host:boot:pid:start``) of the processes that
        registered with this store as lease holders, live or not yet swept -- so that
        an operator sees idle workers too; None: this backend keeps no such registry
        (the default), and workers are known only by the leases they hold."""
        return None

    # -- history and retention -------------------------------------------------------

    def run_history(self, run_id: str) -> list[StepRecord] | None:
        """The run's completed steps that the store keeps, oldest first (``StepRecord``:
        index, name, when, attempts, update bytes); None when the run has none. By
        default (a backend that keeps no history) the latest completed step alone."""
        return latest(self.load_head(run_id))

    def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        """The checkpoint after completed step ``step``: its state then, and as ``calls``
        the journal of step ``step + 1`` as it stood when that step completed (as it
        stands, when the run is there). None: the run has none; a step not kept:
        ``StepNotKeptError``. By default the latest checkpoint alone."""
        return latest_at(self.load(run_id), step)

    def delete_expired(self, now: float | None = None) -> int:
        """Delete the runs completed (``EXPIRES``) more than the store's
        ``finished_ttl`` ago, everything of them; how many. Nothing, by default: a
        store whose service expires items itself (Cosmos DB's TTL) needs no call."""
        return 0

    # -- per-run items (streams, events; see ``items``) ----------------------------------

    # Optional: a store without them keeps no streams, events or Agent Framework
    # checkpoint chains; each call is then a StoreError that says so.

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        """Create the item ``key`` of the run's ``kind``: create-only, so an existing key
        raises ``ConflictError`` and writes nothing. Durable once it returns (as ``save``).
        ``value``: JSON by the state's rules, at most ``items.MAX_ITEM_BYTES``
        (``InvalidStateError`` before any I/O)."""
        raise no_items(self.kind, run_id, kind)

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        """Create or replace the item ``key`` of the run's ``kind`` (an upsert)."""
        raise no_items(self.kind, run_id, kind)

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        """The run's items of ``kind`` whose key is after ``after`` (all with None), in key
        order, at most ``limit``; each value a fresh plain copy. None: the run has none."""
        raise no_items(self.kind, run_id, kind)

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        """Remove the items ``keys`` of the run's ``kind`` (a key not there is no error):
        for a caller that keeps some of a run's items and drops others (a LangGraph
        thread's pruned checkpoints). Durable once it returns; a crash during it may have
        removed some of them. Optional: without it, a ``StoreError`` that says so."""
        raise no_items(self.kind, run_id, kind)

    @abstractmethod
    def close(self) -> None:
        """Release what the store holds (files, connections); idempotent."""

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


A = TypeVar("A", bound="AsyncStore")


class AsyncStore(ABC):
    """The same contract as ``Store``, awaited; implementations never block the loop."""

    kind: ClassVar[str] = "AsyncStore"
    max_state_bytes: int
    codec: Codec | None = None
    """``Store.codec``."""
    encodes_values: bool = False
    """``Store.encodes_values``."""
    finished_ttl: int | None = None
    sees_gone_owners: bool = False
    """``Store.sees_gone_owners``."""

    @abstractmethod
    async def load(self, run_id: str) -> Checkpoint | None:
        """``Store.load``."""

    @abstractmethod
    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        """``Store.save``."""

    async def load_head(self, run_id: str) -> Checkpoint | None:
        """``Store.load_head``."""
        return _head(await self.load(run_id))

    async def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        """``Store.save_head``."""
        stored = await self.load(checkpoint.run_id)
        return head_of(await self.save(_on_stored(checkpoint, stored)))

    @abstractmethod
    async def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """``Store.delete``."""

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        updated_before: float | None = None,
        due_before: float | None = None,
        limit: int | None = None,
        version: str | None = None,
    ) -> AsyncIterator[RunInfo]:
        """``Store.list_runs``, as an async iterator (bad filters raise here, before any
        I/O)."""
        return self.listing(
            RunFilter(status, workflow, updated_before, due_before, limit, versions=_v(version))
        )

    @abstractmethod
    def listing(self, filters: RunFilter) -> AsyncIterator[RunInfo]:
        """``Store.listing``."""

    async def run_info(self, run_id: str) -> RunInfo | None:
        """``Store.run_info``."""
        return _info(await self.load(run_id))

    async def takeable(self, workflows: Sequence[str], *, at: float) -> AsyncIterator[RunInfo]:
        """``Store.takeable``."""
        for filters in _takeable_filters(workflows, at):
            async for info in self.listing(filters):
                if _free_by(info, at):
                    yield info

    async def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        """``Store.prune_orphans``."""
        return 0

    # -- history and retention -------------------------------------------------------

    async def run_history(self, run_id: str) -> list[StepRecord] | None:
        """``Store.run_history``."""
        return latest(await self.load_head(run_id))

    async def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        """``Store.load_at``."""
        return latest_at(await self.load(run_id), step)

    async def delete_expired(self, now: float | None = None) -> int:
        """``Store.delete_expired``."""
        return 0

    # -- per-run items (streams, events; see ``items``) ----------------------------------

    async def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        """``Store.append_item``."""
        raise no_items(self.kind, run_id, kind)

    async def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        """``Store.put_item``."""
        raise no_items(self.kind, run_id, kind)

    async def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        """``Store.read_items``."""
        raise no_items(self.kind, run_id, kind)

    async def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        """``Store.delete_items``."""
        raise no_items(self.kind, run_id, kind)

    @abstractmethod
    async def close(self) -> None:
        """``Store.close``."""

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _head(cp: Checkpoint | None) -> Checkpoint | None:
    return None if cp is None else head_of(cp)


def _on_stored(cp: Checkpoint, stored: Checkpoint | None) -> Checkpoint:
    """``cp``'s fields on ``stored``'s data, for a ``save`` at ``cp``'s etag (the default
    ``save_head``); ``ConflictError`` when ``stored`` is not that version."""
    etag = head_etag(cp)
    if stored is None or stored.etag != etag:
        raise conflict(cp.run_id, etag, stored is None)
    return evolve(cp, state=stored.state, calls=stored.calls)


def _info(cp: Checkpoint | None) -> RunInfo | None:
    return None if cp is None else info_of(cp, len(dumps(to_document(cp))))


def _v(version: str | None) -> tuple[str | None, ...] | None:
    """``list_runs(version=)`` as a ``RunFilter``'s versions (lifecycle)."""
    if version is not None and not isinstance(version, str):
        raise ValueError(f"version must be a str, not {version!r}")
    return None if version is None else (version,)


_CHUNK = 100
"""Runs a threaded listing pulls per worker-thread call."""


class ThreadedStore(AsyncStore, Generic[S]):
    """An ``AsyncStore`` of a blocking one (``sync``): each call in a worker thread, so
    the loop never waits on its I/O -- or, with ``threads=False``, on the loop, for a
    store whose work is a dict update. The same store underneath: sync and async code
    can share it."""

    def __init__(self, sync: S, *, threads: bool = True) -> None:
        self.sync = sync
        self._threads = threads
        self.kind = sync.kind  # type: ignore[misc] # an instance's kind: its store's
        self.max_state_bytes = sync.max_state_bytes
        self.finished_ttl = sync.finished_ttl
        self.encodes_values = sync.encodes_values
        self.sees_gone_owners = sync.sees_gone_owners

    @property  # held once, by the blocking store
    def codec(self) -> Codec | None:
        return self.sync.codec

    @codec.setter
    def codec(self, codec: Codec | None) -> None:
        self.sync.codec = codec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sync!r})"

    async def _do(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._threads:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    async def load(self, run_id: str) -> Checkpoint | None:
        return await self._do(self.sync.load, run_id)

    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        return await self._do(self.sync.save, checkpoint)

    async def load_head(self, run_id: str) -> Checkpoint | None:
        return await self._do(self.sync.load_head, run_id)

    async def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        return await self._do(self.sync.save_head, checkpoint)

    async def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return await self._do(self.sync.delete, run_id, etag=etag)

    async def listing(self, filters: RunFilter) -> AsyncIterator[RunInfo]:
        # Pulled in chunks per worker-thread call (the directory read included): a
        # stream, never the whole list.
        listing = await self._do(self.sync.listing, filters)
        try:
            while chunk := await self._do(lambda: list(islice(listing, _CHUNK))):
                for info in chunk:
                    yield info
        finally:
            close = getattr(listing, "close", None)  # a generator's, if it is one
            if close is not None:
                close()

    async def run_info(self, run_id: str) -> RunInfo | None:
        return await self._do(self.sync.run_info, run_id)

    async def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        return await self._do(self.sync.prune_orphans, older_than)

    async def run_history(self, run_id: str) -> list[StepRecord] | None:
        return await self._do(self.sync.run_history, run_id)

    async def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        return await self._do(self.sync.load_at, run_id, step)

    async def delete_expired(self, now: float | None = None) -> int:
        return await self._do(self.sync.delete_expired, now)

    async def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self._do(self.sync.append_item, run_id, kind, key, value)

    async def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self._do(self.sync.put_item, run_id, kind, key, value)

    async def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        return await self._do(self.sync.read_items, run_id, kind, after=after, limit=limit)

    async def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        await self._do(self.sync.delete_items, run_id, kind, keys)

    async def takeable(self, workflows: Sequence[str], *, at: float) -> AsyncIterator[RunInfo]:
        # The blocking store's own filter (its index), in one worker-thread call.
        for info in await self._do(lambda: list(self.sync.takeable(workflows, at=at))):
            yield info

    async def close(self) -> None:
        # In a thread too: closing may wait for a save in progress.
        await self._do(self.sync.close)


def _takeable_filters(workflows: Sequence[str], at: float) -> Iterator[RunFilter]:
    for workflow in workflows:
        yield RunFilter(status="running", workflow=workflow)
        # Every waiting run, not only those due by ``at``: a run past its deadline is
        # takeable too (to be cancelled), and the listing filters on wake times only.
        yield RunFilter(status="waiting", workflow=workflow)


def _free_by(info: RunInfo, at: float) -> bool:
    """Whether a listed run is one ``takeable`` answers (its status filtered already):
    its lease free, its timer due, or its deadline passed by ``at``."""
    if info.deadline is not None and info.deadline <= at:
        return True
    if info.status == "waiting":
        return info.wake_at is not None and info.wake_at <= at
    return info.lease_expires is None or info.lease_expires <= at


def _takeable(
    listing: Callable[[RunFilter], Iterator[RunInfo]], workflows: Sequence[str], at: float
) -> Iterator[RunInfo]:
    for filters in _takeable_filters(workflows, at):
        yield from (info for info in listing(filters) if _free_by(info, at))
