"""CosmosStore (and, from ``async_store``, AsyncCosmosStore): a run as a head and
segments in a container partitioned by /run (``segments``), or -- containers of the
earlier layout, partition key /id -- one whole item per run, as before.

Hot path: one point read of the head per load (and one query for its segments when
its data is not inline); one request per save of a small run (its data inline in
the head), two for a larger one (a segment with the update, then the head), a
PATCH of the head for a save whose data is unchanged. Writes ask for no echo of the
item. A save whose answer is lost is settled by reading the head back
(``programs``); what a save sends is ``plan``'s, item bodies ``items``'s, the
listing query ``listing``'s; the SDK's imports, options and errors ``sdk``.

The client, database and container clients are resolved once, at construction
(sync) or on first use (async), and the container's partition key tells the layout.
Both stores run the same programs (``CosmosPrograms``); this module and
``async_store`` have their drivers and what differs: blocking calls (several at once
in threads) or awaits (several at once gathered), and how a listing's pages are
iterated. Azure exceptions never leave these modules. The account key is handed to
the SDK's client and kept nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...seam.checkpoint import Checkpoint, RunInfo
from ...seam.codec import Codec
from ...seam.errors import DurableError
from ...seam.history import StepRecord, keep
from ...seam.items import Item
from ...seam.rules import RunFilter
from ...seam.store import Store
from .async_store import AsyncCosmosStore
from .container import INDEXING, PARALLEL, new_container
from .expiry import Expiry
from .history import HistoryPrograms
from .items import MAX_ITEM_BYTES
from .listing import Listing, query_for, takeable_query
from .programs import (
    LEGACY_PARTITION_KEY,
    OPEN,
    ORPHAN_AGE,
    PARTITION_KEY,
    QUERY,
    Program,
    SdkCall,
    T,
)
from .removal import Removals
from .run_items import ItemPrograms
from .sdk import (
    AzureError,
    CosmosClient,
    DefaultAzureCredential,
    checked_key,
    client_options,
    translate,
)

__all__ = [
    "INDEXING",
    "LEGACY_PARTITION_KEY",
    "MAX_ITEM_BYTES",
    "PARALLEL",
    "PARTITION_KEY",
    "AsyncCosmosStore",
    "CosmosStore",
]


class CosmosStore(HistoryPrograms, Removals, Expiry, ItemPrograms, Store):
    """Checkpoints in an Azure Cosmos DB for NoSQL container (partition key ``/run``;
    containers of the earlier layout, ``/id``, keep working as they did).

    Auth is the account ``key`` when given, else ``credential``, else
    ``azure.identity.DefaultAzureCredential()``. The database and container must
    exist unless ``create_if_missing=True`` (emulators and tests only: data-plane
    roles cannot create them; it creates a ``/run`` container). ``finished_ttl``
    (seconds) lets Cosmos DB expire a run that long after it completed; it needs TTL
    on in the container (infra/ does that). ``max_state_bytes``: the state size limit
    (default ``MAX_STATE_BYTES``). ``history`` (``"steps"``, the default, or ``"none"``)
    and ``keep_last``: what is kept of each completed step (``seam.history``); with
    history a save that completes a step is two requests (its segment, then the head),
    without it a small run's save is one (its data inline in the head). Extra keyword
    arguments go to ``CosmosClient``.
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
        key = checked_key(endpoint, key)  # before any request, and before a credential
        self._client: Any = None
        self._credential = None
        if key is None and credential is None:
            credential = self._credential = DefaultAzureCredential()
        try:
            self._client = CosmosClient(
                endpoint,
                credential=key or credential,
                **client_options(endpoint, verify_tls, client_kwargs),
            )
            self._found(self._client)
            if create_if_missing:
                db = self._client.create_database_if_not_exists(database)
                self._container, properties = new_container(db, container)
            else:
                db = self._client.get_database_client(database)
                self._container = db.get_container_client(container)
                properties = self._container.read()  # fail now, clearly, if it is missing
            self._shape(properties)
        except AzureError as exc:
            self.close()
            raise translate(exc, self._where) from exc
        except DurableError:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"CosmosStore({self._where!r})"

    def _do(self, program: Program[T]) -> T:
        value: Any = None
        error: AzureError | None = None
        while True:
            try:
                request = program.send(value) if error is None else program.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            if isinstance(request, list):
                value, error = self._together(request), None
            else:
                value = self._attempt(request)
                value, error = (None, value) if isinstance(value, AzureError) else (value, None)

    def _attempt(self, call: SdkCall) -> Any:
        """The call's result, or the AzureError it raised."""
        if call is OPEN:
            return None
        try:
            result = getattr(self._container, call.method)(**call.kwargs)
            return list(result) if call.method == QUERY else result
        except AzureError as exc:
            return exc

    def _together(self, calls: list[SdkCall]) -> list[Any]:
        if len(calls) <= 1:
            return [self._attempt(c) for c in calls]
        with ThreadPoolExecutor(min(PARALLEL, len(calls))) as pool:
            return list(pool.map(self._attempt, calls))

    def load(self, run_id: str) -> Checkpoint | None:
        return self._do(self._loaded(run_id))

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        return self._do(self._save(checkpoint))

    def load_head(self, run_id: str) -> Checkpoint | None:
        """The run's checkpoint but its data: one point read of its head ."""
        return self._do(self._load_head(run_id))

    def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        """Every field but the data, on top of the stored version: a write of the head
        alone ."""
        return self._do(self._save_head(checkpoint))

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        """Remove the run (its head, then its segments); False if it had none. With
        ``etag``, only if it is unchanged (If-Match), else ``ConflictError``."""
        return self._do(self._delete(run_id, etag))

    def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        """Delete the segments, older than ``older_than`` seconds, that no run needs
        (their head is gone: a crashed delete, an expired run); how many."""
        return self._do(self._sweep(older_than))

    def delete_expired(self, now: float | None = None) -> int:
        """Cosmos DB expires a completed run's head and snapshot itself (item ttl, with
        ``finished_ttl``); this removes what they leave, once the head is gone: its
        streams, events and kept history (``expiry``). How many runs' leftovers went."""
        return self._do(self._delete_expired(now))

    def run_history(self, run_id: str) -> list[StepRecord] | None:
        """The run's completed steps, from its segments' links (``history``)."""
        return self._do(self._history(run_id))

    def load_at(self, run_id: str, step: int) -> Checkpoint | None:
        """The checkpoint after a kept step, rebuilt from its generation (``history``)."""
        return self._do(self._load_at(run_id, step))

    def listing(self, filters: RunFilter) -> Iterator[RunInfo]:
        """The runs matching the filters, in no particular order, streamed page by page
        from one projected query of heads (no state is read or sent)."""
        return self._list(query_for(filters))

    def takeable(self, workflows: Sequence[str], *, at: float) -> Iterator[RunInfo]:
        """The runs a worker may take (``Store.takeable``): one projected query that the
        service filters on status and lease expiry (``listing.takeable_query``)."""
        return self._list(takeable_query(workflows, at))

    def run_info(self, run_id: str) -> RunInfo | None:
        """One run as ``list_runs`` lists it, from its head; None when it has none."""
        return self._do(self._info(run_id))

    # -- per-run items (streams, events; ``run_items``) ---------------------------------

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._do(self._write_item(run_id, kind, key, value, create=True))

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._do(self._write_item(run_id, kind, key, value, create=False))

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Item]:
        return self._do(self._read_items(run_id, kind, after, limit))

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        self._do(self._delete_items(run_id, kind, keys))

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
