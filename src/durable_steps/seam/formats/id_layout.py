"""Cosmos DB containers of the earlier ``/id`` layout: one item per run (partition key
its id), the whole checkpoint in it, up to Cosmos DB's 2 MB item limit.

Such an item is a document (of any schema: ``schemas`` upgrades it) with the layout's
own fields beside it: ``id`` (the run id), ``nonce`` (the save that wrote it), ``size``
(its bytes as sent), ``ttl`` (a finished run's expiry) and the service's properties
(``_etag``, ``_ts``..., whose names start with ``_``). ``document_of`` gives the
document alone, so the store reads it as it reads today's document. Nothing in such an
item points to segments (the ``/run`` layout's ``gen``, ``tip``, ``log``, ``run``): an
item that does is not of this layout, and ``document_of`` says so.

Schema 1 items, which only this layout holds, have no ``status``: ``done`` says
completed, else running (``schemas.upgrade``). A listing query filters by status before
any item is read, so ``STATUS_OF_SCHEMA_1`` says the same as conditions of Cosmos DB's
SQL over an item ``c``, added to the query's ``c.status = @status``.
"""

from __future__ import annotations

from typing import Any

LAYOUT_FIELDS = frozenset({"id", "nonce", "size", "ttl"})
"""The fields an item of the ``/id`` layout has besides its document."""
_SEGMENTED = ("run", "gen", "tip", "log", "seg")

STATUS_OF_SCHEMA_1 = {
    "completed": "NOT IS_DEFINED(c.status) AND c.done = true",
    "running": "NOT IS_DEFINED(c.status) AND (NOT IS_DEFINED(c.done) OR c.done = false)",
}
"""Schema 1 items of a status, as a condition of Cosmos DB's SQL (no entry: none are)."""


def document_of(item: dict[str, Any]) -> dict[str, Any]:
    """The document an ``/id`` layout's item holds (its schema as it was: ``upgrade``
    reads it as today's). ValueError: the item is of the ``/run`` layout."""
    if found := [k for k in _SEGMENTED if k in item]:
        raise ValueError(f"it has the /run layout's {found[0]!r} in a container of the /id layout")
    return {k: v for k, v in item.items() if k not in LAYOUT_FIELDS and k[:1] != "_"}
