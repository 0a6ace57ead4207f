"""A Cosmos DB endpoint for tests, and the database and containers the tests get on it.

Isolation: each pytest session gets its own database (``durable-tests-<random>``), so
runs that share one emulator (two CI jobs, two terminals) never meet; each test that
asks for a store gets its own container in it (``t-<random>``), created before and
deleted after the test, so a fixed run id, ``list_runs`` and ``finished_ttl`` behave
exactly as on an empty account. A fresh container costs a few requests (milliseconds
on the local server); that buys isolation without prefixes or cleanup in the tests.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import durable_steps as ds

from ..devtools.cosmos_server import EMULATOR_KEY

__all__ = ["EMULATOR_KEY", "CosmosEndpoint", "retry_5xx", "unique"]

T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class CosmosEndpoint:
    """Where a Cosmos DB endpoint for tests lives and how to open stores on it."""

    endpoint: str
    key: str | None
    verify_tls: bool = True
    database: str = "durable-tests"
    container: str = "checkpoints"

    def env(self) -> dict[str, str]:
        """The environment ``store_from_env`` (and the CLI) reads to reach this container."""
        env = {
            "DURABLE_STORE": "cosmos",
            "COSMOS_ENDPOINT": self.endpoint,
            "COSMOS_DATABASE": self.database,
            "COSMOS_CONTAINER": self.container,
            "COSMOS_VERIFY_TLS": str(self.verify_tls).lower(),
        }
        if self.key:
            env["COSMOS_KEY"] = self.key
        return env

    def kwargs(self, **extra: Any) -> dict[str, Any]:
        """Keyword arguments for ``CosmosStore`` / ``AsyncCosmosStore`` on this container."""
        return {
            "key": self.key,
            "database": self.database,
            "container": self.container,
            "verify_tls": self.verify_tls,
            **extra,
        }

    def store(self, **extra: Any) -> ds.CosmosStore:
        return ds.CosmosStore(self.endpoint, **self.kwargs(**extra))

    def async_store(self, **extra: Any) -> ds.AsyncCosmosStore:
        return ds.AsyncCosmosStore(self.endpoint, **self.kwargs(**extra))

    def raw_container(self) -> Any:
        """The container through azure-cosmos directly, to check what the store wrote."""
        database = self._client().get_database_client(self.database)
        return database.get_container_client(self.container)

    def create(self, seconds: float = 0) -> None:
        """Create the database and the container if missing; retry 5xx for ``seconds``
        (an emulator that has just started answers 503 for a while)."""
        retry_5xx(lambda: self.store(create_if_missing=True).close(), seconds)

    def fresh(self, partition_key: str | None = None) -> CosmosEndpoint:
        """A new, empty container in this database (delete it with ``drop()``), created
        by the store (partition key ``/run``) or, given ``partition_key``, directly with
        that path (``/id``: a container of the earlier layout)."""
        new = replace(self, container=unique("t"))
        if partition_key is None:
            new.create(30)
            return new
        from ..stores.cosmos.sdk import PartitionKey

        with self._client() as client:
            database = client.get_database_client(self.database)
            database.create_container(new.container, partition_key=PartitionKey(path=partition_key))
        return new

    def drop(self) -> None:
        """Delete this container."""
        with self._client() as client:
            client.get_database_client(self.database).delete_container(self.container)

    def drop_database(self) -> None:
        with self._client() as client:
            client.delete_database(self.database)

    def _client(self) -> Any:
        from ..stores.cosmos.sdk import CosmosClient, DefaultAzureCredential

        return CosmosClient(
            self.endpoint,
            credential=self.key or DefaultAzureCredential(),
            connection_verify=self.verify_tls,
            enable_endpoint_discovery=False,
        )


def retry_5xx(fn: Callable[[], T], seconds: float, pause: float = 1.0) -> T:
    """``fn()``, again while it fails with a 5xx StoreError and ``seconds`` have not passed."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except ds.StoreError as exc:
            if (exc.status_code or 0) < 500 or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
