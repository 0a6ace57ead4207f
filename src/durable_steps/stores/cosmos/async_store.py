"""AsyncCosmosStore: ``CosmosStore`` on ``azure.cosmos.aio``, running the same programs
(``programs``) with awaits: several requests at once are gathered, at most
``PARALLEL`` in flight, and a listing's pages are iterated asynchronously."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ...seam.checkpoint import Checkpoint, RunInfo
from ...seam.codec import Codec
from ...seam.history import StepRecord, keep
from ...seam.items import Item
from ...seam.rules import RunFilter
from ...seam.store import AsyncStore
from .container import PARALLEL, new_container
from .expiry import Expiry
from .history import HistoryPrograms
from .listing import Listing, query_for, takeable_query
from .programs import OPEN, ORPHAN_AGE, QUERY, Program, SdkCall, T
from .removal import Removals
from .run_items import ItemPrograms
from .sdk import (
    AsyncCosmosClient,
    AsyncDefaultAzureCredential,
    AzureError,
    checked_key,
    client_options,
    translate,
)

_CROSS = "enable_cross_partition_query"


class AsyncCosmosStore(HistoryPrograms, Removals, Expiry, ItemPrograms, AsyncStore):
    """CosmosStore on ``azure.cosmos.aio``: native async I/O, the same contract.

    Use ``async with AsyncCosmosStore(...) as store`` (or ``await store.close()``)
    so that the client and the credential are closed. Nothing is sent until the
    first call, which resolves the container (and its layout) once.
    """

    kind = "CosmosStore"
    encodes_values = True  # its saves and loads go through seam.encoded, at their edges

    def __init__(
        self,
        endpoint: str,
        *,
        key: str | None = None,
        credential: Any = None,
        database: str = "durable",
        container: str = "checkpoints",
        verify_tls: bool = True,
        create_if_missing: bool = False,
        finished_ttl: int | None = None,
        max_state_bytes: int | None = None,
        codec: Codec | None = None,
        history: str = "steps",
        keep_last: int | None = None,
        **client_kwargs: Any,
    ) -> None:
        super().__init__(
            endpoint,
            database=database,
            container=container,
            finished_ttl=finished_ttl,
            max_state_bytes=max_state_bytes,
            codec=codec,
        )
        # History, "steps" by default as on every store: a save that completes
        # a step writes its update as a segment, then the head -- two requests, not the
        # one of data inline in the head (``history``; "none" keeps that).
        self._items.history = self.history = keep(history, keep_last)
        key = checked_key(endpoint, key)
        self._create = create_if_missing
        self._credential = None
        if key is None and credential is None:
            credential = self._credential = AsyncDefaultAzureCredential()
        self._client = AsyncCosmosClient(
            endpoint,
            credential=key or credential,
            **client_options(endpoint, verify_tls, client_kwargs),
        )
        self._found(self._client)
        self._container: Any = None
        self._opening = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AsyncCosmosStore({self._where!r})"

    async def __aenter__(self) -> AsyncCosmosStore:
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _open(self) -> Any:
        async with self._opening:
            if self._container is None:
                try:
                    if self._create:
                        db = await self._client.create_database_if_not_exists(self.database)
                        container, properties = await new_container(db, self.container)
                    else:
                        db = self._client.get_database_client(self.database)
                        container = db.get_container_client(self.container)
                        properties = await container.read()
                except AzureError as exc:
                    raise translate(exc, self._where) from exc
                self._shape(properties)
                self._container = container
        return self._container

    async def _do(self, program: Program[T]) -> T:
        value: Any = None
        error: AzureError | None = None
        while True:
            try:  # the first step checks the program's input, before any I/O
                request = program.send(value) if error is None else program.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            container = self._container or await self._open()
            if isinstance(request, list):
                value, error = await self._together(container, request), None
            else:
                value = await self._attempt(container, request)
                value, error = (None, value) if isinstance(value, AzureError) else (value, None)

    @classmethod
    async def _together(cls, container: Any, calls: list[SdkCall]) -> list[Any]:
        """The calls' results, at most ``PARALLEL`` of them in flight, as the sync store."""
        limit = asyncio.Semaphore(PARALLEL)

        async def one(call: SdkCall) -> Any:
            async with limit:
                return await cls._attempt(container, call)

        return list(await asyncio.gather(*(one(c) for c in calls)))

    @staticmethod
    async def _attempt(container: Any, call: SdkCall) -> Any:
        """The call's result, or the AzureError it raised."""
        if call is OPEN:
            return None
        try:
            if call.method == QUERY:
                # (the async SDK queries across partitions when given no partition key,
                # and refuses the sync SDK's flag for it)
                kwargs = {k: v for k, v in call.kwargs.items() if k != _CROSS}
                return [item async for item in container.query_items(**kwargs)]
            return await getattr(container, call.method)(**call.kwargs)
        except AzureError as exc:
            return exc

    async def load(self, run_id: str) -> Checkpoint | None:
        return await self._do(self._loaded(run_id))

    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        return await self._do(self._save(checkpoint))

    async def load_head(self, run_id: str) -> Checkpoint | None:
        """The run's checkpoint but its data: one point read of its head ."""
        return await self._do(self._load_head(run_id))

    async def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        """Every field but the data, on top of the stored version: a write of the head
        alone ."""
        return await self._do(self._save_head(checkpoint))

    async def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """As ``CosmosStore.delete``."""
        return await self._do(self._delete(run_id, etag))

    async def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        """As ``CosmosStore.prune_orphans``."""
        return await self._do(self._sweep(older_than))

    async def delete_expired(self, now: float | None = None) -> int:
        """As ``CosmosStore.delete_expired``."""
        return await self._do(self._delete_expired(now))

    async def run_history(self, run_id: str) -> list[StepRecord] | None:
        return await self._do(self._history(run_id))

    async def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        return await self._do(self._load_at(run_id, step))

    def listing(self, filters: RunFilter) -> AsyncIterator[RunInfo]:
        """As ``CosmosStore.list_runs``: ``async for info in store.list_runs(...)``."""
        return self._list(query_for(filters))

    def takeable(self, workflows: Sequence[str], *, at: float) -> AsyncIterator[RunInfo]:
        """As ``CosmosStore.takeable``."""
        return self._list(takeable_query(workflows, at))

    async def run_info(self, run_id: str) -> RunInfo | None:
        """As ``CosmosStore.run_info``."""
        return await self._do(self._info(run_id))

    # -- per-run items (streams, events; ``run_items``) ---------------------------------

    async def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self._do(self._write_item(run_id, kind, key, value, create=True))

    async def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        await self._do(self._write_item(run_id, kind, key, value, create=False))

    async def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        return await self._do(self._read_items(run_id, kind, after, limit))

    async def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        await self._do(self._delete_items(run_id, kind, keys))

    async def _list(self, query: Listing) -> AsyncIterator[RunInfo]:
        if query.done:
            return
        container = self._container or await self._open()
        try:
            pages = container.query_items(
                query.text, parameters=query.parameters, max_item_count=query.page_size
            ).by_page()
            async for page in pages:
                for info in query.accept([row async for row in page]):
                    yield info
                if query.done:
                    return
        except AzureError as exc:
            raise translate(exc, self._where) from exc

    async def close(self) -> None:
        await self._client.close()
        if self._credential is not None:
            await self._credential.close()
