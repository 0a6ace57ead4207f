"""The container the Cosmos DB stores create when asked to (emulators and tests:
``create_if_missing``), as ``infra/main.bicep`` provisions it -- TTL on, no default
(``DEFAULT_TTL``); the paths a worker's look filters on, which a container's indexing
policy must index (``unindexed``: what ``durable-steps doctor`` reports); whether its
TTL lets ``finished_ttl`` work (``ttl_checked``); and how many requests either store
sends at once."""

from __future__ import annotations

from typing import Any

from ...seam.errors import ConfigurationError
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
QUERIED = ("seg", "workflow", "status", "lease_expires", "wake_at", "deadline", "at")
"""The properties a worker's look filters on (``listing.takeable_query``; ``at``: its
retention pass, ``expiry``'s index of runs by expiry time): each must be
indexed (range), or the service refuses the query (a filter on a path excluded from
indexing) or scans the container. Equality and range filters without ORDER BY need no
composite index."""
DEFAULT_TTL = -1
"""TTL on, nothing expiring by default: the per-item ``ttl`` that ``finished_ttl`` stamps
on a completed run's head then applies. A container without a default TTL ignores
per-item ``ttl`` (finished runs never expire); a positive default would expire every
item without one -- running runs too."""
PARALLEL = 8
"""Requests a save or a delete sends at once (a large snapshot's parts, a fold's deletes)."""


def new_container(database: Any, name: str) -> Any:
    """Create the container (partition key ``/run``, data unindexed) unless it exists;
    its client and its properties (awaitable on an async database client)."""
    return database.create_container_if_not_exists(
        name,
        partition_key=PartitionKey(path=PARTITION_KEY),
        indexing_policy=INDEXING,
        default_ttl=DEFAULT_TTL,
        return_properties=True,
    )


def unindexed(policy: Any) -> list[str]:
    """The paths of ``QUERIED`` that the indexing policy ``policy`` (a container's
    ``indexingPolicy``) leaves out; all of them when the policy indexes nothing. A
    path's most specific rule wins: ``/status/?`` excluded beats ``/*`` included."""
    if not isinstance(policy, dict):
        return [f"/{p}/?" for p in QUERIED]  # (a container's properties always have one)
    if str(policy.get("indexingMode", "consistent")).lower() == "none":
        return [f"/{p}/?" for p in QUERIED]

    def paths(key: str) -> set[str]:
        rules = policy.get(key)
        if not isinstance(rules, list):
            return set()
        return {str(r.get("path")) for r in rules if isinstance(r, dict)}

    # No includedPaths at all is the service's default: every path.
    included = paths("includedPaths") if "includedPaths" in policy else {"/*"}
    excluded = paths("excludedPaths")
    missing = []
    for p in QUERIED:
        own = {f"/{p}/?", f"/{p}/*"}
        if own & excluded or not (own & included or "/*" in included):
            missing.append(f"/{p}/?")
    return missing


def indexes_checked(policy: Any) -> str:
    """What ``durable-steps doctor`` says of a container's indexing policy: the look's
    paths indexed; else ConfigurationError naming those left out and how to add them
    (a look's query would be refused, or scan every item)."""
    missing = unindexed(policy)
    if missing:
        raise ConfigurationError(
            f"the container's indexing policy leaves out {', '.join(missing)}: a worker's "
            "look (a query on status, lease expiry and wake time) is refused or scans every "
            "item. Include them (or /*) in its indexingPolicy; infra/main.bicep provisions "
            "the policy, and 'az cosmosdb sql container update --idx' changes it in place",
            variable="COSMOS_CONTAINER",
        )
    return f"{', '.join(QUERIED)} indexed (a worker's look is an index query)"


_TTL_FIX = (
    "'az cosmosdb sql container update --ttl -1' turns it on with no default "
    "(infra/main.bicep's defaultTtlSeconds)"
)


def ttl_checked(default_ttl: Any, finished_ttl: int | None) -> str:
    """What ``durable-steps doctor`` says of a container's default TTL (its
    ``defaultTtl``; None: TTL off) for a store with ``finished_ttl``: fine; else
    ConfigurationError naming the fix -- TTL off while ``finished_ttl`` is set (finished
    runs would never expire), or a positive default (every run would expire, running
    ones too)."""
    if isinstance(default_ttl, int) and default_ttl > 0:
        raise ConfigurationError(
            f"the container's default TTL is {default_ttl} s: Cosmos DB deletes every item "
            f"{default_ttl} s after its last write, running and waiting runs too. {_TTL_FIX}; "
            "finished runs expire by DURABLE_FINISHED_TTL",
            variable="COSMOS_CONTAINER",
        )
    if default_ttl is None:
        if finished_ttl is None:
            return "off (no finished_ttl: runs are kept until deleted)"
        raise ConfigurationError(
            f"the container's TTL is off, so the service ignores the ttl that finished_ttl="
            f"{finished_ttl} stamps on completed runs: they are never deleted. {_TTL_FIX}",
            variable="DURABLE_FINISHED_TTL",
        )
    if finished_ttl is None:
        return "on (no finished_ttl: runs are kept until deleted)"
    return f"on: completed runs expire {finished_ttl} s after their last write"
