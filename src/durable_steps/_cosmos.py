"""CosmosStore and AsyncCosmosStore: one Cosmos DB item per run (id = run id,
partition key /id), written with ETag-conditional requests.

Hot path: one point read per load, one request per save (create-only for a new
run, replace with If-Match otherwise; replace never resurrects a deleted run).
The client, database and container clients are resolved once, at construction
(sync) or on first use (async). Azure exceptions never leave this module: they
are translated where they enter, in ``_translate``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

from ._errors import DurableError, StateTooLargeError, StoreError
from ._store import (
    Checkpoint,
    RunInfo,
    check_run_id,
    conflict,
    dumps,
    from_document,
    info_of,
    matches,
    to_document,
)

_INSTALL = "pip install 'durable-steps[cosmos]'"
try:
    from azure.core import MatchConditions
    from azure.core.exceptions import AzureError, ClientAuthenticationError
    from azure.cosmos import CosmosClient, PartitionKey
    from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
    from azure.cosmos.exceptions import CosmosHttpResponseError
    from azure.identity import DefaultAzureCredential
    from azure.identity.aio import DefaultAzureCredential as AsyncDefaultAzureCredential
except ImportError as exc:
    raise DurableError(
        f"the Cosmos DB backend needs azure-cosmos and azure-identity: {_INSTALL}"
    ) from exc

PARTITION_KEY = "/id"
"""One item per run, id = run id: every load and save is a single-partition point operation."""
MAX_ITEM_BYTES = 2 * 1024 * 1024
"""Cosmos DB's item limit, system properties (_rid, _etag, _ts, ...) included."""
_SYSTEM_RESERVE = 1024
_LIST_QUERY = "SELECT * FROM c"


def _is_local(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    return endpoint.startswith("http://") or host in ("localhost", "127.0.0.1", "::1")


def _client_options(endpoint: str, verify_tls: bool, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "connection_verify": verify_tls,
        # An emulator advertises its own (https, unmapped-port) address; following
        # it breaks plain-HTTP and remapped-port emulators. Real accounts keep
        # discovery for multi-region failover.
        "enable_endpoint_discovery": not _is_local(endpoint),
        # Fail in seconds, not minutes, when nothing answers: a refused connection
        # fails at once, a silent endpoint within ~30 s (the SDK tries 4 times).
        # Point reads and writes answer in milliseconds, so 5 s is generous.
        "connection_timeout": 5,
        "read_timeout": 5,
        "retry_connect": 1,
        "retry_read": 1,
        **options,
    }


def _body(cp: Checkpoint, finished_ttl: int | None) -> dict[str, Any]:
    doc = to_document(cp)
    doc["id"] = cp.run_id
    if finished_ttl is not None and cp.done:
        doc["ttl"] = finished_ttl  # Cosmos DB deletes the item this long after its last write
    size = len(dumps(doc)) + _SYSTEM_RESERVE
    if size > MAX_ITEM_BYTES:
        raise StateTooLargeError(
            f"run {cp.run_id!r}: the checkpoint is {size:,} bytes, over Cosmos DB's "
            f"{MAX_ITEM_BYTES:,}-byte item limit; nothing was sent and the previous checkpoint "
            "stays. Keep large data (documents, blobs) in Blob Storage; put its URL in the state",
            run_id=cp.run_id,
            size=size,
            limit=MAX_ITEM_BYTES,
        )
    return doc


def _checkpoint(item: dict[str, Any], run_id: str, where: str) -> Checkpoint:
    return from_document(item, run_id, item.get("_etag"), where)


def _info(item: dict[str, Any]) -> RunInfo:
    run_id = str(item.get("id"))
    size = len(json.dumps(item, separators=(",", ":")).encode())
    try:
        cp = _checkpoint(item, run_id, "Cosmos DB")
    except DurableError as exc:
        return RunInfo(run_id, -1, None, False, item.get("_ts"), size, item.get("_etag"), str(exc))
    return info_of(cp, size)


def _translate(
    exc: AzureError, where: str, run_id: str | None = None, etag: str | None = None
) -> DurableError:
    """The most specific error of ours for an exception raised by the Azure SDKs."""
    if isinstance(exc, CosmosHttpResponseError):
        status = exc.status_code
        if run_id is not None and status in (409, 412):
            return conflict(run_id, etag, missing=False)
        if run_id is not None and status == 404 and etag is not None:
            return conflict(run_id, etag, missing=True)
        hint = {
            401: "check COSMOS_KEY, or unset it to use Entra ID",
            403: "grant your identity the 'Cosmos DB Built-in Data Contributor' role on the "
            "account (infra/ does), or check the firewall / public network access",
            404: "the database or container does not exist: provision it (infra/), check "
            "COSMOS_DATABASE and COSMOS_CONTAINER, or pass create_if_missing=True (emulators)",
            408: "the request timed out; retry",
            413: "the item is too large for Cosmos DB",
            429: "the account is throttling (request rate too large): raise its throughput or "
            "slow down, then retry",
        }.get(status or 0, "see the status code; retry if the service is unavailable")
        message = str(exc.message).splitlines()[0] if exc.message else "no message"
        return StoreError(
            f"Cosmos DB at {where} answered {status} ({message[:200]}): {hint}", status_code=status
        )
    if isinstance(exc, ClientAuthenticationError):
        return StoreError(
            f"no Entra ID credential for Cosmos DB at {where} ({str(exc).splitlines()[0][:200]}): "
            "run 'az login', use a managed identity, or set COSMOS_KEY",
            status_code=None,
        )
    return StoreError(
        f"cannot reach Cosmos DB at {where} ({type(exc).__name__}): check COSMOS_ENDPOINT, "
        "the network and the account's firewall",
        status_code=None,
    )


class CosmosStore:
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
        **client_options: Any,
    ) -> None:
        self.endpoint, self.database, self.container = endpoint, database, container
        self.finished_ttl = finished_ttl
        self._where = f"{endpoint} ({database}/{container})"
        self._credential = None
        if key is None and credential is None:
            credential = self._credential = DefaultAzureCredential()
        try:
            self._client = CosmosClient(
                endpoint,
                credential=key or credential,
                **_client_options(endpoint, verify_tls, client_options),
            )
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
            raise _translate(exc, self._where) from exc

    def __repr__(self) -> str:
        return f"CosmosStore({self._where!r})"

    def __enter__(self) -> CosmosStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load(self, run_id: str) -> Checkpoint | None:
        check_run_id(run_id)
        try:
            item = self._container.read_item(item=run_id, partition_key=run_id)
        except AzureError as exc:
            if _missing_item(exc):
                return None
            raise _translate(exc, self._where) from exc
        return _checkpoint(item, run_id, f"{self._where} item {run_id!r}")

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        body = _body(checkpoint, self.finished_ttl)
        try:
            if checkpoint.etag is None:
                stored = self._container.create_item(body)
            else:
                stored = self._container.replace_item(
                    checkpoint.run_id,
                    body,
                    etag=checkpoint.etag,
                    match_condition=MatchConditions.IfNotModified,
                )
        except AzureError as exc:
            raise _translate(exc, self._where, checkpoint.run_id, checkpoint.etag) from exc
        return replace(checkpoint, etag=stored["_etag"], updated_at=body["updated_at"])

    def delete(self, run_id: str) -> bool:
        check_run_id(run_id)
        try:
            self._container.delete_item(run_id, partition_key=run_id)
        except AzureError as exc:
            if _missing_item(exc):
                return False
            raise _translate(exc, self._where) from exc
        return True

    def list_runs(self, **filters: Any) -> Iterator[RunInfo]:
        limit = filters.pop("limit", None)
        f = {"status": None, "workflow": None, "updated_before": None, **filters}
        return islice((i for i in self._list() if matches(i, **f)), limit)

    def _list(self) -> Iterator[RunInfo]:
        try:
            items = list(
                self._container.query_items(_LIST_QUERY, enable_cross_partition_query=True)
            )
        except AzureError as exc:
            raise _translate(exc, self._where) from exc
        for item in sorted(items, key=lambda i: str(i.get("id"))):
            yield _info(item)

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()
        if self._credential is not None:
            self._credential.close()


def _missing_item(exc: AzureError) -> bool:
    # 404 with sub-status 1003 means the container itself is gone: that must not
    # read as "no checkpoint", which would start the run over.
    return getattr(exc, "status_code", None) == 404 and getattr(exc, "sub_status", 0) in (None, 0)


class AsyncCosmosStore:
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
        **client_options: Any,
    ) -> None:
        self.endpoint, self.database, self.container = endpoint, database, container
        self.finished_ttl = finished_ttl
        self._where = f"{endpoint} ({database}/{container})"
        self._create = create_if_missing
        self._credential = None
        if key is None and credential is None:
            credential = self._credential = AsyncDefaultAzureCredential()
        self._client = AsyncCosmosClient(
            endpoint,
            credential=key or credential,
            **_client_options(endpoint, verify_tls, client_options),
        )
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
                    raise _translate(exc, self._where) from exc
                self._container = container
        return self._container

    async def load(self, run_id: str) -> Checkpoint | None:
        check_run_id(run_id)
        container = self._container or await self._open()
        try:
            item = await container.read_item(item=run_id, partition_key=run_id)
        except AzureError as exc:
            if _missing_item(exc):
                return None
            raise _translate(exc, self._where) from exc
        return _checkpoint(item, run_id, f"{self._where} item {run_id!r}")

    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        body = _body(checkpoint, self.finished_ttl)
        container = self._container or await self._open()
        try:
            if checkpoint.etag is None:
                stored = await container.create_item(body)
            else:
                stored = await container.replace_item(
                    checkpoint.run_id,
                    body,
                    etag=checkpoint.etag,
                    match_condition=MatchConditions.IfNotModified,
                )
        except AzureError as exc:
            raise _translate(exc, self._where, checkpoint.run_id, checkpoint.etag) from exc
        return replace(checkpoint, etag=stored["_etag"], updated_at=body["updated_at"])

    async def delete(self, run_id: str) -> bool:
        check_run_id(run_id)
        container = self._container or await self._open()
        try:
            await container.delete_item(run_id, partition_key=run_id)
        except AzureError as exc:
            if _missing_item(exc):
                return False
            raise _translate(exc, self._where) from exc
        return True

    async def list_runs(self, **filters: Any) -> AsyncIterator[RunInfo]:
        limit = filters.pop("limit", None)
        f = {"status": None, "workflow": None, "updated_before": None, **filters}
        n = 0
        async for i in self._list():
            if limit is not None and n >= limit:
                return
            if matches(i, **f):
                n += 1
                yield i

    async def _list(self) -> AsyncIterator[RunInfo]:
        container = self._container or await self._open()
        try:
            items = [i async for i in container.query_items(_LIST_QUERY)]
        except AzureError as exc:
            raise _translate(exc, self._where) from exc
        for item in sorted(items, key=lambda i: str(i.get("id"))):
            yield _info(item)

    async def close(self) -> None:
        await self._client.close()
        if self._credential is not None:
            await self._credential.close()
