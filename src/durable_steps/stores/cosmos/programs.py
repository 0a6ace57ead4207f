"""The semantics of the Cosmos DB stores, once for both: load, save and delete as
programs, generators that yield the SDK calls they need (``SdkCall``) and receive each
call's result, or its exception thrown in. ``CosmosStore`` performs the calls
blocking, ``AsyncCosmosStore`` awaits them: the sync and async containers have the
same methods and arguments, so only the driving loop is written twice.

A save is one write (``items`` decides: create, replace or partial update),
sent with ``no_response`` (the etag comes from the answer's headers). When its
answer is not seen (the connection dropped after the request went out, a timeout, a
5xx, or a 409/412 that may be the SDK's own retry meeting the write it sent first),
the program reads the item back and settles the outcome by the save's nonce:

- the stored item carries this save's nonce: the save landed; it returns normally;
- it is the version the save meant to replace (or, for a create, there is none):
  nothing was written, a ``StoreError`` that says so (retrying is safe);
- it is another writer's (or gone): ``ConflictError``, saying it was checked;
- the read fails too: a ``StoreError`` saying the outcome is unknown (reload first).

It never reports "nothing was written" about a write that landed.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ...seam.document import from_document
from ...seam.metering import wrote
from ...seam.store import Checkpoint, check_run_id, delete_conflict
from .items import Items, Write, as_stored
from .sdk import (
    AzureError,
    CosmosHttpResponseError,
    MatchConditions,
    checked_key,
    conflict,
    did_not_land,
    escapes_non_ascii,
    may_have_landed,
    missing_item,
    status_of,
    translate,
    unknown_outcome,
    write_error,
)

log = logging.getLogger("durable_steps")
T = TypeVar("T")

PATCH_REFUSED = frozenset({400, 405, 501})
"""Answers of a service that cannot do partial updates (some vNext emulator builds
answer 400 "Invalid path or method"): the store replaces from then on."""


@dataclass(frozen=True)
class SdkCall:
    """One SDK call a program needs: a container method and its keyword arguments."""

    method: str
    kwargs: dict[str, Any]


Program = Generator[SdkCall, Any, T]


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
        key: str | None,
        credential: Any,
        database: str,
        container: str,
        finished_ttl: int | None,
    ) -> None:
        self.endpoint, self.database, self.container = endpoint, database, container
        self.finished_ttl = finished_ttl
        self._where = f"{endpoint} ({database}/{container})"
        self._key = checked_key(endpoint, key)  # before any request, and before a credential
        self._items = Items(escaped=True, finished_ttl=finished_ttl)

    def _found(self, client: Any) -> None:
        """Measure bodies as this client sends them."""
        self._items.escaped = escapes_non_ascii(client)

    def _load(self, run_id: str) -> Program[Checkpoint | None]:
        check_run_id(run_id)
        try:
            item = yield _read(run_id)
        except AzureError as exc:
            if missing_item(exc):
                return None
            raise translate(exc, self._where) from exc
        item = as_stored(item)
        cp = from_document(item, run_id, item.get("_etag"), f"{self._where} item {run_id!r}")
        self._items.read(item)
        return cp

    def _save(self, checkpoint: Checkpoint) -> Program[Checkpoint]:
        write = self._items.plan(checkpoint)
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
                write = self._items.plan(checkpoint, patch=False)
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
            return self._settled_by_read_back(write, exc, item)
        return self._confirmed(write, etag)

    def _settled_by_read_back(
        self, write: Write, exc: AzureError, item: dict[str, Any] | None
    ) -> Checkpoint:
        """The outcome of a save whose answer was not seen, from the item read back."""
        if item is not None and item.get("nonce") == write.nonce:
            log.info(
                "run %r: Cosmos DB did not confirm a save (%s); read back, it had landed",
                write.run_id,
                type(exc).__name__,
            )
            return self._confirmed(write, item["_etag"])
        if status_of(exc) not in (409, 412) and (
            (item is None and write.etag is None)
            or (item is not None and item.get("_etag") == write.etag)
        ):
            raise did_not_land(exc, self._where, write.run_id) from exc
        raise conflict(write.run_id, write.etag, missing=item is None, checked=True) from exc

    def _confirmed(self, write: Write, etag: str) -> Checkpoint:
        self._items.known(write.run_id, etag, write.fields, write.size)
        wrote(write.sent)
        return replace(write.checkpoint, etag=etag, updated_at=write.body["updated_at"])

    def _delete(self, run_id: str, etag: str | None) -> Program[bool]:
        check_run_id(run_id)
        self._items.forget(run_id)
        kwargs: dict[str, Any] = {"item": run_id, "partition_key": run_id}
        if etag is not None:
            kwargs |= {"etag": etag, "match_condition": MatchConditions.IfNotModified}
        try:
            yield SdkCall("delete_item", kwargs)
        except AzureError as exc:
            if missing_item(exc):
                return False
            if etag is not None and status_of(exc) == 412:
                raise delete_conflict(run_id) from exc
            raise translate(exc, self._where) from exc
        return True
