"""The semantics of the Cosmos DB stores, once for both: load, save, delete and the
sweep of orphaned segments as programs, generators that yield the SDK calls they need
(``SdkCall``; a list of them: run together, each result or exception sent back in a
list) and receive each call's result, or its exception thrown in. ``CosmosStore``
performs the calls blocking, ``AsyncCosmosStore`` awaits them: the sync and async
containers have the same methods and arguments, so only the driving loop is written
twice.

The layout is the container's (``segments``: partition key ``/run``, a head and
segments; or the earlier ``/id``, one whole item per run), read from its properties
when the store opens it. This module has the base of the programs and the loads;
saves are ``saves``'s, a head read and written alone ``heads``'s, deletes and the
sweep ``removal``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from ...seam import store as seam_store
from ...seam.checkpoint import Checkpoint, RunInfo
from ...seam.codec import Codec
from ...seam.document import from_document
from ...seam.encoded import opened
from ...seam.errors import ConfigurationError, CorruptCheckpointError, corrupt_error
from ...seam.rules import check_run_id, state_limit
from . import layouts, segments
from .items import Items, as_stored
from .listing import row_of, run_info
from .sdk import (
    AzureError,
    escapes_non_ascii,
    missing_item,
    translate,
)

log = logging.getLogger("durable_steps")
T = TypeVar("T")

PARTITION_KEY = layouts.RUN.partition_key
"""The layout of ``segments``: every item of a run in the run's own logical partition."""
LEGACY_PARTITION_KEY = layouts.ID.partition_key
"""The earlier layout: one item per run, the whole checkpoint in it (at most 2 MB)."""
PATCH_REFUSED = frozenset({400, 405, 501})
"""Answers of a service that cannot do partial updates (some vNext emulator builds
answer 400 "Invalid path or method"): the store replaces from then on."""
QUERY = "query_items"
"""The drivers give a query's items, every page of them, as one list."""
ORPHAN_AGE = seam_store.ORPHAN_AGE
"""``prune`` sweeps the segments that their head does not reach once they are this old
(seconds, by the service's ``_ts``): far longer than a save may take (``SAVE_LIMIT``)."""


@dataclass(frozen=True)
class SdkCall:
    """One SDK call a program needs: a container method and its keyword arguments."""

    method: str
    kwargs: dict[str, Any]


OPEN = SdkCall("", {})
"""Asks the driver to open the container (and learn its layout) if it has not yet."""
Program = Generator[SdkCall | list[SdkCall], Any, T]


def _read(run_id: str) -> SdkCall:
    return SdkCall("read_item", {"item": run_id, "partition_key": run_id})


class CosmosPrograms:
    """What both stores do, as programs of SDK calls."""

    def __init__(
        self,
        endpoint: str,
        *,
        database: str,
        container: str,
        finished_ttl: int | None,
        max_state_bytes: int | None,
        codec: Codec | None = None,
    ) -> None:
        self.endpoint, self.database, self.container = endpoint, database, container
        self.codec = codec
        self.finished_ttl = finished_ttl
        self.max_state_bytes = state_limit(max_state_bytes)
        self.partition_key: str | None = None
        """The container's partition key path, once it is open (``/run``, or ``/id``)."""
        self.layout: layouts.Layout = layouts.RUN
        """The container's layout, chosen with ``partition_key`` when it opens."""
        self.indexing_policy: dict[str, Any] | None = None
        """The container's indexing policy as the service answered it, once it is open
        (``durable-steps doctor`` checks it: ``container.unindexed``)."""
        self.default_ttl: int | None = None
        """The container's ``defaultTtl`` once it is open (None: TTL off, so the ttl that
        ``finished_ttl`` stamps is ignored: ``container.ttl_checked``)."""
        self._where = f"{endpoint} ({database}/{container})"
        self._items = Items(escaped=True, finished_ttl=finished_ttl)

    def _found(self, client: Any) -> None:
        """Measure bodies as this client sends them."""
        self._items.escaped = escapes_non_ascii(client)

    def _shape(self, properties: Any) -> None:
        """Take the layout from the container's properties; refuse one it cannot be."""
        key = properties.get("partitionKey", {}) if isinstance(properties, dict) else {}
        paths = key.get("paths") if isinstance(key, dict) else None
        if paths not in ([PARTITION_KEY], [LEGACY_PARTITION_KEY]):
            raise ConfigurationError(
                f"Cosmos DB container {self._where} has partition key {paths!r}; durable-steps "
                f"stores runs in a container with partition key {PARTITION_KEY} (or, the earlier "
                f"layout, {LEGACY_PARTITION_KEY}): point COSMOS_CONTAINER at one, or create it "
                "(infra/ provisions it)",
                variable="COSMOS_CONTAINER",
            )
        self.partition_key = paths[0]
        self.layout = layouts.BY_PARTITION_KEY[self.partition_key]
        policy = properties.get("indexingPolicy")
        self.indexing_policy = policy if isinstance(policy, dict) else None
        ttl = properties.get("defaultTtl")
        self.default_ttl = ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else None
        if self.finished_ttl is not None and self.default_ttl is None:
            # A warning: TTL off only keeps finished runs longer; no call runs again.
            log.warning(
                "Cosmos DB container %s has TTL off: finished_ttl=%s deletes nothing until "
                "it is on (see 'durable-steps doctor')",
                self._where,
                self.finished_ttl,
            )
        if advice := self.layout_advice():
            # A warning: an older container layout costs more per save; no call runs again.
            log.warning("%s", advice)

    def layout_advice(self) -> str | None:
        """What an operator is told of the container's layout (None: nothing to do)."""
        return self.layout.advice(self._where)

    # -- load ----------------------------------------------------------------------------

    def _load(self, run_id: str, retries: int = 5) -> Program[Checkpoint | None]:
        check_run_id(run_id)
        head = yield from self._head(run_id)
        if head is None:
            return None
        where = f"{self._where} item {run_id!r}"
        item, chain = self._document(run_id, head)
        if chain is not None:
            try:
                found = yield SdkCall(QUERY, segments.of_generation(run_id, chain))
            except AzureError as exc:
                raise translate(exc, self._where) from exc
            try:
                state, calls = segments.rebuild(run_id, chain, found, where)
            except CorruptCheckpointError:
                # Another writer may have folded between our head read and the segment
                # query, deleting the generation we read: that is a race, not damage.
                # Only a head that still names the missing segments is corrupt.
                now = yield from self._head(run_id)
                if now is None:
                    return None
                if now.get("_etag") == head.get("_etag") or retries == 0:
                    raise
                return (yield from self._load(run_id, retries - 1))
            item = {**head, "state": state, "calls": calls}
        item = as_stored(item)
        cp = from_document(item, run_id, head.get("_etag"), where)  # values as stored
        until = head.get("until")
        self._items.read(
            run_id,
            head,
            sizes=segments.sizes_of(head),
            chain=chain,
            fold=segments.fold_of(head),
            until=until if isinstance(until, int | float) else None,
            calls=cp.calls,
        )
        return cp

    def _loaded(self, run_id: str) -> Program[Checkpoint | None]:
        """``load``: the run's checkpoint, its values decoded (``seam.encoded``)."""
        cp = yield from self._load(run_id)
        return None if cp is None else opened(self.codec, cp)

    def _document(
        self, run_id: str, head: dict[str, Any]
    ) -> tuple[dict[str, Any], segments.Chain | None]:
        """What a head holds as today's document (an item of the earlier layout as
        ``seam.formats`` reads it), and the chain of segments it points to (None: its
        data is inline)."""
        try:
            return self.layout.document(head)
        except (TypeError, ValueError) as exc:
            raise corrupt_error(run_id, f"{self._where} item {run_id!r}", str(exc)) from None

    def _head(self, run_id: str) -> Program[dict[str, Any] | None]:
        try:
            item: dict[str, Any] = yield _read(run_id)
        except AzureError as exc:
            if missing_item(exc):
                self._items.forget(run_id)
                return None
            raise translate(exc, self._where) from exc
        return item

    def _info(self, run_id: str) -> Program[RunInfo | None]:
        """The run's RunInfo from its head alone; None when it has none."""
        check_run_id(run_id)
        head = yield from self._head(run_id)
        if head is None:
            return None
        info = run_info(row_of(head))
        if info.error is not None:
            raise CorruptCheckpointError(info.error, run_id=run_id)
        return info

    def _delete_segments(
        self, run_id: str, found: list[dict[str, Any]], what: str = "superseded"
    ) -> Program[int]:
        """Delete these segment items (each a dict with its ``id``); how many went. A
        failure is logged: the next fold or ``prune`` removes what is left."""
        if not found:
            return 0
        results = yield [
            SdkCall("delete_item", {"item": s["id"], "partition_key": run_id}) for s in found
        ]
        failed = [r for r in results if isinstance(r, AzureError) and not missing_item(r)]
        if failed:
            # A warning: segments left behind are garbage the next fold or prune removes; no call
            # runs again.
            log.warning(
                "run %r: %d of %d %s segments not deleted (%s); the next fold or "
                "'durable-steps runs prune' removes them",
                run_id,
                len(failed),
                len(found),
                what,
                failed[0],
            )
        return len(found) - len(failed)
