"""The container the Cosmos DB stores create when asked to (emulators and tests:
``create_if_missing``), as ``infra/main.bicep`` provisions it, and how many requests
either store sends at once."""

from __future__ import annotations

from typing import Any

from .programs import PARTITION_KEY
from .sdk import PartitionKey

INDEXING = {
    "indexingMode": "consistent",
    "includedPaths": [{"path": "/*"}],
    "excludedPaths": [
        {"path": p}
        for p in ("/state/*", "/calls/*", "/change/*", "/text/?", "/data/*", '/"_etag"/?')
    ],
}
"""Data is read by id and by generation, never queried: not indexing it makes saves
cheaper (what infra/main.bicep sets, for containers a store creates)."""
PARALLEL = 8
"""Requests a save or a delete sends at once (a large snapshot's parts, a fold's deletes)."""


def new_container(database: Any, name: str) -> Any:
    """Create the container (partition key ``/run``, data unindexed) unless it exists;
    its client and its properties (awaitable on an async database client)."""
    return database.create_container_if_not_exists(
        name,
        partition_key=PartitionKey(path=PARTITION_KEY),
        indexing_policy=INDEXING,
        return_properties=True,
    )
