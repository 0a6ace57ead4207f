"""The two layouts a Cosmos DB container can have, one strategy each, chosen once when
the container opens (``CosmosPrograms._shape``, by its partition key).

``RUN`` (partition key ``/run``) is today's: a head item per run and immutable
segments (``segments`` has its design), the run's streams and events as items of its
own partition, and an index of the runs by expiry time. ``ID`` (``/id``) is the
earlier one, still read and written: one item per run holding the whole checkpoint,
up to Cosmos DB's 2 MB (read through ``seam.formats.id_layout``, with the other
earlier formats), expired whole by its ``ttl`` -- so it has no segments to delete or
sweep, no expiry index, and no per-run items: a run's streams and events need the
``/run`` layout, and such a container's every open says how to move (``advice``).
"""

from __future__ import annotations

from typing import Any

from ...seam import formats
from ...seam.checkpoint import Checkpoint
from . import segments
from .items import Items, Known
from .plan import (
    HEAD_TOO_LARGE,
    LEGACY_TOO_LARGE,
    Prepared,
    SavePlan,
    head_and_segments,
    plan_head,
    whole_item,
)


class Layout:
    """Today's ``/run`` layout; ``IdLayout`` overrides what the earlier one does
    differently."""

    partition_key = "/run"
    segmented = True
    """Whether runs have items beside their head: segments (deleted with the run,
    swept when no head reaches them), streams and events, an expiry index entry."""
    too_large = HEAD_TOO_LARGE
    """What a head too large for one item is told to do."""

    def document(self, item: dict[str, Any]) -> tuple[dict[str, Any], segments.Chain | None]:
        """What a head holds as today's document, and the chain of segments it points
        to (None: its data is inline). TypeError, ValueError: it cannot be read."""
        return item, segments.chain_of(item)

    def plan(self, items: Items, p: Prepared, *, patch: bool = True) -> SavePlan:
        """What a save writes (``plan``)."""
        return head_and_segments(items, p, patch=patch)

    def plan_head(
        self,
        items: Items,
        cp: Checkpoint,
        doc: dict[str, Any],
        known: Known,
        data: dict[str, Any] | None,
    ) -> SavePlan | None:
        """What a head-only save writes (``plan.plan_head``)."""
        body = doc | {"id": cp.run_id, "nonce": segments.nonce()}
        ttl = self._head_fields(body, cp, known, items.finished_ttl if cp.done else None)
        return plan_head(items, cp, body, known, data, ttl=ttl, too_large=self.too_large)

    def _head_fields(
        self, body: dict[str, Any], cp: Checkpoint, known: Known, ttl: float | None
    ) -> float | None:
        """Add what a head of this layout carries beside its document; its ``ttl``."""
        body["run"] = cp.run_id
        if known.sizes is not None:
            body["sizes"] = list(known.sizes)
        if known.chain is not None:
            body |= known.chain.fields()
            if known.until is None:
                return None  # its segments do not expire: a save that folds makes them
        elif known.fold is not None:
            body["fold"] = known.fold
        return ttl

    def advice(self, where: str) -> str | None:
        """What an operator is told when such a container opens (None: nothing)."""
        return None


class IdLayout(Layout):
    """The earlier ``/id`` layout: one item per run, the whole checkpoint in it."""

    partition_key = "/id"
    segmented = False
    too_large = LEGACY_TOO_LARGE

    def document(self, item: dict[str, Any]) -> tuple[dict[str, Any], segments.Chain | None]:
        return formats.id_layout.document_of(item), None

    def plan(self, items: Items, p: Prepared, *, patch: bool = True) -> SavePlan:
        return whole_item(items, p, patch=patch)

    def _head_fields(
        self, body: dict[str, Any], cp: Checkpoint, known: Known, ttl: float | None
    ) -> float | None:
        return ttl

    def advice(self, where: str) -> str:
        return (
            f"Cosmos DB container {where} has partition key {self.partition_key}, the "
            "earlier layout: every save sends and is billed for the whole state, and a state "
            f"cannot pass 2 MB. It keeps working. To move: create a container with partition "
            f"key {RUN.partition_key} (infra/main.bicep), run 'durable-steps migrate --from "
            "cosmos --to cosmos:NEWCONTAINER', then set COSMOS_CONTAINER=NEWCONTAINER"
        )


RUN = Layout()
ID = IdLayout()
BY_PARTITION_KEY = {layout.partition_key: layout for layout in (RUN, ID)}
"""The layout of a container, by its partition key's path."""
