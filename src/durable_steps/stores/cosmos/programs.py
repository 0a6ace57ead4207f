"""The semantics of the Cosmos DB stores, once for both: load, save, delete and the
sweep of orphaned segments as programs, generators that yield the SDK calls they need
(``SdkCall``; a list of them: run together, each result or exception sent back in a
list) and receive each call's result, or its exception thrown in. ``CosmosStore``
performs the calls blocking, ``AsyncCosmosStore`` awaits them: the sync and async
containers have the same methods and arguments, so only the driving loop is written
twice.

The layout is the container's (``segments``: partition key ``/run``, a head and
segments; or the earlier ``/id``, one whole item per run), read from its properties
when the store opens it. A save (``plan``) creates its segments, then writes the
head -- the commit -- with ``no_response`` (the etag comes from the answer's
headers), then deletes what a fold superseded. A segment that fails fails the save,
which then says nothing was saved (the head is untouched). When the head's answer is
not seen (the connection dropped after the request went out, a timeout, a 5xx, or a
409/412 that may be the SDK's own retry meeting the write it sent first), the
program reads the head back and settles the outcome by the save's nonce:

- the stored head carries this save's nonce: the save landed; it returns normally;
- it is the version the save meant to replace (or, for a create, there is none):
  nothing was written, a ``StoreError`` that says so (retrying is safe);
- it is another writer's (or gone): ``ConflictError``, saying it was checked;
- the read fails too: a ``StoreError`` saying the outcome is unknown (reload first).

It never reports "nothing was written" about a write that landed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ...seam.document import from_document
from ...seam.errors import ConfigurationError, ConflictError, CorruptCheckpointError
from ...seam.metering import wrote
from ...seam.store import (
    Checkpoint,
    RunInfo,
    check_run_id,
    corrupt_error,
    state_limit,
)
from . import segments as sg
from .items import Items, Write, as_stored
from .listing import row_of, run_info
from .plan import SavePlan, plan, prepare
from .sdk import (
    AzureError,
    CosmosHttpResponseError,
    MatchConditions,
    conflict,
    did_not_land,
    escapes_non_ascii,
    lost_create,
    may_have_landed,
    missing_item,
    segment_failed,
    status_of,
    too_slow,
    translate,
    unknown_outcome,
    write_error,
)

log = logging.getLogger("durable_steps")
T = TypeVar("T")

PARTITION_KEY = "/run"
"""The layout of ``segments``: every item of a run in the run's own logical partition."""
LEGACY_PARTITION_KEY = "/id"
"""The earlier layout: one item per run, the whole checkpoint in it (at most 2 MB)."""
PATCH_REFUSED = frozenset({400, 405, 501})
"""Answers of a service that cannot do partial updates (some vNext emulator builds
answer 400 "Invalid path or method"): the store replaces from then on."""
QUERY = "query_items"
"""The drivers give a query's items, every page of them, as one list."""
ORPHAN_AGE = 3600.0
"""``prune`` sweeps the segments that their head does not reach once they are this old
(seconds, by the service's ``_ts``): far longer than a save may take (``SAVE_LIMIT``)."""
SAVE_LIMIT = 600.0
"""A save commits its head at most this long (seconds, by the writer's monotonic
clock) after it began writing its segments; a slower one gives up, nothing saved. So
a segment older than ``ORPHAN_AGE`` that its head does not reach is no save's in
flight, whatever the clocks of the writer and of ``prune`` say (within 50 minutes)."""


@dataclass(frozen=True)
class SdkCall:
    """One SDK call a program needs: a container method and its keyword arguments."""

    method: str
    kwargs: dict[str, Any]


OPEN = SdkCall("", {})
"""Asks the driver to open the container (and learn its layout) if it has not yet."""
Program = Generator[SdkCall | list[SdkCall], Any, T]


def _ids(saving: SavePlan) -> list[dict[str, Any]]:
    return [{"id": body["id"]} for body, _ in saving.segments]


def _read(run_id: str) -> SdkCall:
    return SdkCall("read_item", {"item": run_id, "partition_key": run_id})


def _write_call(write: Write) -> SdkCall:
    cp = write.checkpoint
    if cp.etag is None:
        return SdkCall("create_item", {"body": write.body, "no_response": True})
    condition = {"etag": cp.etag, "match_condition": MatchConditions.IfNotModified}
    if write.operations is not None:
        return SdkCall(
            "patch_item",
            {
                "item": cp.run_id,
                "partition_key": cp.run_id,
                "patch_operations": write.operations,
                "no_response": True,
                **condition,
            },
        )
    return SdkCall(
        "replace_item", {"item": cp.run_id, "body": write.body, "no_response": True, **condition}
    )


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
    ) -> None:
        self.endpoint, self.database, self.container = endpoint, database, container
        self.finished_ttl = finished_ttl
        self.max_state_bytes = state_limit(max_state_bytes)
        self.partition_key: str | None = None
        """The container's partition key path, once it is open (``/run``, or ``/id``)."""
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
        if self.partition_key == LEGACY_PARTITION_KEY:
            log.warning("%s", self.legacy_advice())

    @property
    def _legacy(self) -> bool:
        return self.partition_key == LEGACY_PARTITION_KEY

    def legacy_advice(self) -> str:
        return (
            f"Cosmos DB container {self._where} has partition key {LEGACY_PARTITION_KEY}, the "
            "earlier layout: every save sends and is billed for the whole state, and a state "
            f"cannot pass 2 MB. It keeps working. To move: create a container with partition "
            f"key {PARTITION_KEY} (infra/main.bicep), run 'durable-steps migrate --from "
            "cosmos --to cosmos:NEWCONTAINER', then set COSMOS_CONTAINER=NEWCONTAINER"
        )

    # -- load ----------------------------------------------------------------------------

    def _load(self, run_id: str, retries: int = 5) -> Program[Checkpoint | None]:
        check_run_id(run_id)
        head = yield from self._head(run_id)
        if head is None:
            return None
        where = f"{self._where} item {run_id!r}"
        try:
            chain = sg.chain_of(head)
        except (TypeError, ValueError) as exc:
            raise corrupt_error(run_id, where, str(exc)) from None
        item = head
        if chain is not None:
            try:
                found = yield SdkCall(QUERY, sg.of_generation(run_id, chain))
            except AzureError as exc:
                raise translate(exc, self._where) from exc
            try:
                state, calls = sg.rebuild(run_id, chain, found, where)
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
        cp = from_document(item, run_id, item.get("_etag"), where)
        until = head.get("until")
        self._items.read(
            run_id,
            head,
            sizes=sg.sizes_of(head),
            chain=chain,
            fold=sg.fold_of(head),
            until=until if isinstance(until, int | float) else None,
            calls=cp.calls,
        )
        return cp

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

    # -- save ----------------------------------------------------------------------------

    def _save(self, checkpoint: Checkpoint) -> Program[Checkpoint]:
        prepared = prepare(self._items, checkpoint, self.max_state_bytes)  # before any I/O
        if self.partition_key is None:
            yield OPEN
        saving = plan(self._items, prepared, legacy=self._legacy)
        run_id = checkpoint.run_id
        if saving.segments:
            if checkpoint.etag is None and (yield from self._head(run_id)) is not None:
                # A create whose run exists loses: it writes no segments to say so.
                raise lost_create(run_id)
            started = time.monotonic()
            yield from self._put_segments(saving)
            if time.monotonic() - started > SAVE_LIMIT:
                raise too_slow(run_id, self._where, SAVE_LIMIT)

        def whole() -> Program[SavePlan]:
            return plan(self._items, prepared, legacy=self._legacy, patch=False)
            yield  # (a program: it could read, as a head-only save's does)

        try:
            saving, etag = yield from self._commit(saving, whole)
        except ConflictError:
            if saving.segments and checkpoint.etag is not None:
                # Its head, conditional on a version that is gone, can never land now:
                # its segments are no save's. (A create's could, if the run were
                # deleted meanwhile: those are left for prune.)
                yield from self._delete_segments(run_id, _ids(saving), "unused")
            raise
        if saving.cleanup is not None:
            yield from self._cleanup(run_id, *saving.cleanup)
        return self._confirmed(saving, etag)

    def _commit(
        self, saving: SavePlan, whole: Callable[[], Program[SavePlan]]
    ) -> Program[tuple[SavePlan, str]]:
        """Write the head of ``saving``: the commit of a save. A service that refuses a
        partial update gets the whole item (``whole()``: the plan without one) at once.
        An answer not seen is settled by reading the head back. Returns the plan that
        was written and the new etag."""
        write = saving.head
        try:
            try:
                answer = yield _write_call(write)
            except CosmosHttpResponseError as exc:
                if write.operations is None or exc.status_code not in PATCH_REFUSED:
                    raise
                self._items.patch = False
                log.info(
                    "Cosmos DB at %s refused a partial update (%s); saving whole items from now on",
                    self._where,
                    exc.status_code,
                )
                saving = yield from whole()
                write = saving.head
                answer = yield _write_call(write)
            etag = answer.get_response_headers().get("etag") or answer.get("_etag")
            if not etag:  # an answer without the new etag: see what was stored
                raise AzureError("the answer to the save carried no etag")
        except AzureError as exc:
            if not may_have_landed(exc):
                raise write_error(exc, self._where, write.run_id, write.etag) from exc
            try:
                item = yield _read(write.run_id)
            except AzureError as again:
                if not missing_item(again):
                    raise unknown_outcome(exc, again, self._where, write.run_id) from exc
                item = None
            etag = self._settled_by_read_back(write, exc, item)
        return saving, etag

    def _put_segments(self, saving: SavePlan) -> Program[None]:
        """Create a save's segments. One that fails fails the save, nothing committed."""
        results = yield [
            SdkCall("create_item", {"body": body, "no_response": True})
            for body, _ in saving.segments
        ]
        for result in results:
            # 409: an item of this random id exists: this save's own write, sent again.
            if isinstance(result, AzureError) and status_of(result) != 409:
                run_id = saving.head.run_id
                raise segment_failed(result, self._where, run_id) from result

    def _cleanup(self, run_id: str, fold: int, gen: str) -> Program[None]:
        """After a fold: delete the segments it superseded. A failure only leaves them
        for the next fold (or ``prune``)."""
        try:
            found = yield SdkCall(QUERY, sg.superseded(run_id, fold, gen))
        except AzureError as exc:
            log.warning("run %r: could not list superseded segments: %s", run_id, exc)
            return
        yield from self._delete_segments(run_id, found)

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

    def _settled_by_read_back(
        self, write: Write, exc: AzureError, item: dict[str, Any] | None
    ) -> str:
        """The etag of a save whose answer was not seen, from the head read back; or the
        error that says what became of it."""
        if item is not None and item.get("nonce") == write.nonce:
            log.info(
                "run %r: Cosmos DB did not confirm a save (%s); read back, it had landed",
                write.run_id,
                type(exc).__name__,
            )
            return str(item["_etag"])
        if status_of(exc) not in (409, 412) and (
            (item is None and write.etag is None)
            or (item is not None and item.get("_etag") == write.etag)
        ):
            raise did_not_land(exc, self._where, write.run_id) from exc
        raise conflict(write.run_id, write.etag, missing=item is None, checked=True) from exc

    def _confirmed(self, saving: SavePlan, etag: str) -> Checkpoint:
        write = saving.head
        self._items.remember(write.run_id, replace(saving.known, etag=etag))
        wrote(saving.sent)
        return replace(write.checkpoint, etag=etag, updated_at=write.body["updated_at"])
