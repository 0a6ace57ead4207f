"""A run's per-run items (``seam.items``) in Cosmos DB: one small item each, in the
run's partition, as programs of SDK calls (``programs``).

An item: ``id`` = ``"!"`` + 40 hex digits of the SHA-256 of its kind and key (never a
run id's head -- a head's id is its run id, and a run id that is exactly that string
of its own item is not one anybody picks -- nor a segment's, whose ids start with
``"~"``), ``run`` (the partition key), ``item`` (its kind), ``key``, ``data`` (the value, not
indexed: ``container.INDEXING``) and ``nonce``. The run's listing skips them (it
lists heads: ``NOT IS_DEFINED(c.item)``), the sweep of orphaned segments never
meets them (it looks at ``seg``), ``delete`` removes them with the run.

- ``append_item``: one ``create_item`` (``no_response``): the service refuses an
  existing id with 409, which is ``ConflictError`` -- unless the item there is this
  append's own (its nonce: the SDK retried a create whose answer was lost), which is
  success. Never "nothing was written" about a write that landed.
- ``put_item``: one ``upsert_item``.
- ``delete_items``: one ``delete_item`` per key, sent together; a key not there (404)
  is no error.
- ``read_items``: one single-partition query, ``key > @after ORDER BY c.key``, with
  ``TOP`` when limited: its cost is what it returns, not the stream's length.

Containers of the earlier layout (partition key ``/id``) have no partition per run:
items are refused there with what to do.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from typing import Any

from ...seam.errors import ConfigurationError
from ...seam.items import Item, checked, item_exists, item_json
from ...seam.metering import wrote
from .programs import OPEN, QUERY, CosmosPrograms, Program, SdkCall
from .sdk import AzureError, missing_item, status_of, translate


def item_id(kind: str, key: str) -> str:
    return "!" + hashlib.sha256(f"{kind}\x00{key}".encode()).hexdigest()[:40]


def every_item(run_id: str) -> dict[str, Any]:
    """The ids of every item of the run (for ``delete``)."""
    return {
        "query": "SELECT c.id FROM c WHERE c.run = @run AND IS_DEFINED(c.item)",
        "parameters": [{"name": "@run", "value": run_id}],
        "partition_key": run_id,
    }


class ItemPrograms(CosmosPrograms):
    """``append_item``, ``put_item``, ``read_items`` and ``delete_items`` as programs."""

    def _write_item(
        self, run_id: str, kind: str, key: str, value: Any, *, create: bool
    ) -> Program[None]:
        raw = item_json(run_id, kind, key, value)
        if self.partition_key is None:
            yield OPEN
        self._per_run(run_id)
        nonce = secrets.token_hex(8)
        body = {"id": item_id(kind, key), "run": run_id, "item": kind, "key": key,
                "data": value, "nonce": nonce}  # fmt: skip
        method = "create_item" if create else "upsert_item"
        try:
            yield SdkCall(method, {"body": body, "no_response": True})
        except AzureError as exc:
            if not create or status_of(exc) != 409:
                raise translate(exc, self._where) from exc
            try:  # a create that met an item: another writer's, or its own sent again?
                there = yield SdkCall("read_item", {"item": body["id"], "partition_key": run_id})
            except AzureError as again:
                if missing_item(again):
                    raise item_exists(run_id, kind, key) from exc
                raise translate(again, self._where) from again
            if not isinstance(there, dict) or there.get("nonce") != nonce:
                raise item_exists(run_id, kind, key) from exc
        wrote(len(raw) + 200)  # the value and the item's few fields

    def _read_items(
        self, run_id: str, kind: str, after: str | None, limit: int | None
    ) -> Program[list[Item]]:
        checked(run_id, kind, after)
        if limit is not None and limit <= 0:
            return []
        if self.partition_key is None:
            yield OPEN
        self._per_run(run_id)
        where = "c.run = @run AND c.item = @kind"
        parameters: list[dict[str, Any]] = [
            {"name": "@run", "value": run_id},
            {"name": "@kind", "value": kind},
        ]
        if after is not None:
            where += " AND c.key > @after"
            parameters.append({"name": "@after", "value": after})
        top = ""
        if limit is not None:
            top = "TOP @limit "
            parameters.append({"name": "@limit", "value": limit})
        # Built from constant fragments only; every value travels as a parameter.
        text = f"SELECT {top}c.key, c.data FROM c WHERE {where} ORDER BY c.key"  # noqa: S608
        try:
            rows = yield SdkCall(
                QUERY, {"query": text, "parameters": parameters, "partition_key": run_id}
            )
        except AzureError as exc:
            raise translate(exc, self._where) from exc
        return [Item(r["key"], r.get("data")) for r in rows]

    def _delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> Program[None]:
        checked(run_id, kind)
        if self.partition_key is None:
            yield OPEN
        self._per_run(run_id)
        calls = [
            SdkCall("delete_item", {"item": item_id(kind, k), "partition_key": run_id})
            for k in dict.fromkeys(keys)
        ]
        if not calls:
            return
        results = yield calls
        for r in results:
            if isinstance(r, AzureError) and not missing_item(r):
                raise translate(r, self._where) from r

    def _per_run(self, run_id: str) -> None:
        if not self.layout.segmented:
            raise ConfigurationError(
                f"run {run_id!r}: streams and events are kept in a run's own partition, and "
                f"{self.layout_advice()}",
                variable="COSMOS_CONTAINER",
            )
