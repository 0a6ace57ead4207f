"""A run's head read and written alone: the Cosmos DB stores' ``load_head`` and
``save_head`` (``seam.store.HeadStore``), what a signal, a cancellation and
``Workflow.start`` use, as programs of SDK calls like the others (``programs``); the
head's write is committed as a save's (``saves``).

``load_head`` is one point read of the head: the checkpoint's fields, not its data
(no segment is read, whatever the state's size; an inline head's small data comes
with it, as does an item of the earlier layout, which holds nothing else). It
remembers the version as a load does, so that ``save_head`` on it writes at once.

``save_head`` writes the head over the version at the checkpoint's etag (If-Match),
keeping what the head points to (``plan.plan_head``): a head with segments is
patched or replaced alone; an inline head (or an earlier-layout item) is patched
around its data, or -- when a patch cannot do it -- read back and written whole with
its data. A version this store does not know is read first (one point read), so a
stale etag is refused before anything is written. The head's write is committed and
settled like any save's (``programs``).
"""

from __future__ import annotations

from typing import Any

from ...seam.checkpoint import Checkpoint, head_of
from ...seam.document import from_document, head_document
from ...seam.errors import corrupt_error
from ...seam.rules import check_run_id, head_etag
from . import segments
from .items import Known, as_stored
from .plan import SavePlan
from .programs import OPEN, Program
from .saves import Saves
from .sdk import conflict


class HeadPrograms(Saves):
    """``load_head`` and ``save_head`` as programs."""

    def _load_head(self, run_id: str) -> Program[Checkpoint | None]:
        check_run_id(run_id)
        head = yield from self._head(run_id)
        return None if head is None else head_of(self._read_head(run_id, head))

    def _read_head(self, run_id: str, head: dict[str, Any]) -> Checkpoint:
        """The checkpoint of a head read alone (for one that points to segments, with an
        empty state), remembered as the version this store knows."""
        where = f"{self._where} item {run_id!r}"
        item, chain = self._document(run_id, head)
        item = item if chain is None else {**item, "state": {}, "calls": None}
        cp = from_document(as_stored(dict(item)), run_id, head.get("_etag"), where)
        self._items.read(
            run_id,
            head,
            sizes=segments.sizes_of(head),
            chain=chain,
            fold=segments.fold_of(head),
            until=_until(head),
            calls=cp.calls if chain is None else None,
        )
        return cp

    def _save_head(self, checkpoint: Checkpoint) -> Program[Checkpoint]:
        head_etag(checkpoint)
        doc = head_document(checkpoint)  # checked before any I/O
        if self.partition_key is None:
            yield OPEN
        data = None
        if self._items.known_at(checkpoint.run_id, checkpoint.etag) is None:
            data = yield from self._version(checkpoint)  # a stale etag fails here
        saving = yield from self._planned(checkpoint, doc, data)
        yield from self._note_expiry(saving)
        saving, etag = yield from self._commit(saving, lambda: self._planned(checkpoint, doc, data))
        return head_of(self._confirmed(saving, etag))

    def _planned(
        self, cp: Checkpoint, doc: dict[str, Any], data: dict[str, Any] | None
    ) -> Program[SavePlan]:
        """The head-only save's plan; the stored head is read for its data when the plan
        needs it (an inline head that a patch cannot change)."""
        saving = self._plan(cp, doc, data)
        if saving is None:
            data = yield from self._version(cp)
            saving = self._plan(cp, doc, data)
        assert saving is not None  # with the data, a plan is always made
        return saving

    def _plan(
        self, cp: Checkpoint, doc: dict[str, Any], data: dict[str, Any] | None
    ) -> SavePlan | None:
        known = self._items.known_at(cp.run_id, cp.etag)
        if known is None:  # a head this store could not remember (no size): from the read
            if data is None:
                return None
            chain = self._chain(cp.run_id, data)
            known = Known(
                "", {}, 0, segments.sizes_of(data), chain, segments.fold_of(data), _until(data)
            )
        return self.layout.plan_head(self._items, cp, doc, known, data)

    def _version(self, cp: Checkpoint) -> Program[dict[str, Any]]:
        """The stored head, which must be the version at ``cp.etag``: else the save is a
        ``ConflictError`` and nothing is written."""
        head = yield from self._head(cp.run_id)
        if head is None or head.get("_etag") != cp.etag:
            raise conflict(cp.run_id, cp.etag, missing=head is None, checked=False)
        self._read_head(cp.run_id, head)
        return head

    def _chain(self, run_id: str, head: dict[str, Any]) -> segments.Chain | None:
        try:
            return segments.chain_of(head)
        except (TypeError, ValueError) as exc:
            raise corrupt_error(run_id, f"{self._where} item {run_id!r}", str(exc)) from None


def _until(head: dict[str, Any]) -> float | None:
    until = head.get("until")
    return until if isinstance(until, int | float) else None
