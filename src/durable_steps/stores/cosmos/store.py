"""CosmosStore and AsyncCosmosStore: one Cosmos DB item per run (id = run id,
partition key /id), written with ETag-conditional requests.

Hot path: one point read per load, one request per save: a create for a new run
(create-only: a run that exists is a conflict), else a replace with If-Match on the
loaded etag, never an upsert, so a run deleted meanwhile is not resurrected; a save
whose state is unchanged (a heartbeat) is a conditional partial update when the
store knows the stored version. Writes ask for no echo of the item. A save whose
answer is lost is settled by reading the item back (``programs``); item bodies,
their measured size and the listing query are ``items``; the SDK's imports,
options and errors ``sdk``.

The client, database and container clients are resolved once, at construction
(sync) or on first use (async). Both stores run the same programs (``CosmosPrograms``);
this module has their drivers and what differs: blocking calls or awaits, and how
a listing's pages are iterated. Azure exceptions never leave these modules.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ...seam.document import info_of
from ...seam.store import Checkpoint, RunInfo
from .items import MAX_ITEM_BYTES, Listing, listing
from .programs import CosmosPrograms, Program, T
from .sdk import (
    AsyncCosmosClient,
    AsyncDefaultAzureCredential,
    AzureError,
    CosmosClient,
    DefaultAzureCredential,
    PartitionKey,
    client_options,
    translate,
)

__all__ = ["MAX_ITEM_BYTES", "PARTITION_KEY", "AsyncCosmosStore", "CosmosStore"]

PARTITION_KEY = "/id"
"""One item per run, id = run id: every load and save is a single-partition point operation."""


class CosmosStore(CosmosPrograms):
    """Checkpoints in an Azure Cosmos DB for NoSQL container (partition key ``/id``).

    Auth is the account ``key`` when given, else ``credential``, else
    ``azure.identity.DefaultAzureCredential()``. The database and container must
    exist unless ``create_if_missing=True`` (emulators and tests only: data-plane
    roles cannot create them). ``finished_ttl`` (seconds) lets Cosmos DB expire a
    run that long after it completed; it needs TTL on in the container (infra/
    does that). Extra keyword arguments go to ``CosmosClient``.
    """

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
        **client_kwargs: Any,
    ) -> None:
        super().__init__(
            endpoint,
            key=key,
            credential=credential,
            database=database,
            container=container,
            finished_ttl=finished_ttl,
        )
        self._client: Any = None
        self._credential = None
        if self._key is None and credential is None:
            credential = self._credential = DefaultAzureCredential()
        try:
            self._client = CosmosClient(
                endpoint,
                credential=self._key or credential,
                **client_options(endpoint, verify_tls, client_kwargs),
            )
            self._found(self._client)
            if create_if_missing:
                db = self._client.create_database_if_not_exists(database)
                self._container = db.create_container_if_not_exists(
                    container, partition_key=PartitionKey(path=PARTITION_KEY)
                )
            else:
                self._container = self._client.get_database_client(database).get_container_client(
                    container
                )
                self._container.read()  # fail now, clearly, if it is missing; warms the cache
        except AzureError as exc:
            self.close()
            raise translate(exc, self._where) from exc

    def __repr__(self) -> str:
        return f"CosmosStore({self._where!r})"

    def __enter__(self) -> CosmosStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _do(self, program: Program[T]) -> T:
        value: Any = None
        error: AzureError | None = None
        while True:
            try:
                call = program.send(value) if error is None else program.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                value, error = getattr(self._container, call.method)(**call.kwargs), None
            except AzureError as exc:
                value, error = None, exc

    def load(self, run_id: str) -> Checkpoint | None:
        return self._do(self._load(run_id))

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        return self._do(self._save(checkpoint))

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """Remove the run; False if it had none. With ``etag``, only if it is unchanged
        (If-Match), else ``ConflictError``."""
        return self._do(self._delete(run_id, etag))

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        updated_before: float | None = None,
        due_before: float | None = None,
        limit: int | None = None,
    ) -> Iterator[RunInfo]:
        """The runs matching the filters, in no particular order, streamed page by page
        from one projected query (no state is read or sent)."""
        return self._list(listing(status, workflow, updated_before, limit, due_before))

    def run_info(self, run_id: str) -> RunInfo | None:
        """One run as ``list_runs`` lists it; None when it has no checkpoint."""
        cp = self.load(run_id)
        return None if cp is None else info_of(cp, 0)

    def _list(self, query: Listing) -> Iterator[RunInfo]:
        if query.done:
            return
        try:
            pages = self._container.query_items(
                query.text,
                parameters=query.parameters,
                enable_cross_partition_query=True,
                max_item_count=query.page_size,
            ).by_page()
            for page in pages:
                yield from query.accept(page)
                if query.done:
                    return
        except AzureError as exc:
            raise translate(exc, self._where) from exc

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._credential is not None:
            self._credential.close()


class AsyncCosmosStore(CosmosPrograms):
    """CosmosStore on ``azure.cosmos.aio``: native async I/O, the same contract.

    Use ``async with AsyncCosmosStore(...) as store`` (or ``await store.close()``)
    so that the client and the credential are closed. Nothing is sent until the
    first call, which resolves the container once.
    """

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
        **client_kwargs: Any,
    ) -> None:
        super().__init__(
            endpoint,
            key=key,
            credential=credential,
            database=database,
            container=container,
            finished_ttl=finished_ttl,
        )
        self._create = create_if_missing
        self._credential = None
        if self._key is None and credential is None:
            credential = self._credential = AsyncDefaultAzureCredential()
        self._client = AsyncCosmosClient(
            endpoint,
            credential=self._key or credential,
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
                        container = await db.create_container_if_not_exists(
                            self.container, partition_key=PartitionKey(path=PARTITION_KEY)
                        )
                    else:
                        db = self._client.get_database_client(self.database)
                        container = db.get_container_client(self.container)
                        await container.read()
                except AzureError as exc:
                    raise translate(exc, self._where) from exc
                self._container = container
        return self._container

    async def _do(self, program: Program[T]) -> T:
        try:
            call = next(program)  # the program checks its input before any I/O
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        container = self._container or await self._open()
        while True:
            try:
                value, error = await getattr(container, call.method)(**call.kwargs), None
            except AzureError as exc:
                value, error = None, exc
            try:
                call = program.send(value) if error is None else program.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]

    async def load(self, run_id: str) -> Checkpoint | None:
        return await self._do(self._load(run_id))

    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        return await self._do(self._save(checkpoint))

    async def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """As ``CosmosStore.delete``."""
        return await self._do(self._delete(run_id, etag))

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        updated_before: float | None = None,
        due_before: float | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[RunInfo]:
        """As ``CosmosStore.list_runs``: ``async for info in store.list_runs(...)``."""
        return self._list(listing(status, workflow, updated_before, limit, due_before))

    async def run_info(self, run_id: str) -> RunInfo | None:
        """As ``CosmosStore.run_info``."""
        cp = await self.load(run_id)
        return None if cp is None else info_of(cp, 0)

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
