"""What one save sends, decided before any I/O: the segments to create first, the
head to write last (the commit), and the superseded segments to delete after.

``head_and_segments`` applies the rules of ``segments`` (the ``/run`` layout),
``whole_item`` those of the earlier ``/id`` layout (the whole checkpoint in one item, up
to Cosmos DB's 2 MB); ``layouts`` chooses between them. Both
check the state limit first (``check_size``, from sizes that ``seam.delta`` keeps
exact without encoding the state), so a state over it sends nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...seam import delta
from ...seam.checkpoint import Checkpoint
from ...seam.document import to_document
from ...seam.history import index_of
from ...seam.rules import check_size
from ...seam.state import delta_since
from . import segments
from .items import Items, Known, Write

LEGACY_TOO_LARGE = (
    "This container has the earlier layout (partition key /id: the whole state in one "
    "item); a container with partition key /run stores states of any size up to "
    "DURABLE_MAX_STATE_BYTES: create one (infra/) and move the runs with 'durable-steps "
    "migrate --from cosmos --to cosmos:NEWCONTAINER'"
)
HEAD_TOO_LARGE = (
    "The run's head holds its step names, signals and last error: keep large payloads "
    "out of signals (a URL instead)"
)


@dataclass
class SavePlan:
    head: Write
    segments: list[tuple[dict[str, Any], int]]
    """Items to create before the head (a delta segment, or a snapshot's parts), each
    with its bytes as sent."""
    cleanup: tuple[int, str] | None
    """After the head: delete segments of folds before this number, or of this number
    and another generation than this one ("": inline)."""
    known: Known
    """What the store holds once the head lands (its etag is filled in then)."""
    trim: int | None = None
    """History's ``keep_last``: after the head, delete the generations that
    only steps before this one need."""

    @property
    def sent(self) -> int:
        return self.head.sent + sum(size for _, size in self.segments)


@dataclass
class Prepared:
    """A save checked and measured, before the layout is known: the change of its data
    (``seam.delta``'s members) and the sizes after."""

    cp: Checkpoint
    doc: dict[str, Any]
    known: Known | None
    parts: list[bytes]
    sizes: delta.Sizes
    change: Any
    """The state's Delta against the stored version (None: the state is written whole)."""
    stored: tuple[Mapping[str, Any], ...] | None
    """The journal as stored, as ``delta.encode`` was given it (None: unknown)."""

    def data(self) -> dict[str, Any]:
        """The state and the journal as the store keeps them, whole (their values as the
        store was given them: encoded already, ``seam.encoded``)."""
        return {"state": self.cp.state, "calls": list(self.cp.calls)}


def prepare(items: Items, cp: Checkpoint, limit: int) -> Prepared:
    """Validate ``cp`` (its values as stored: ``seam.encoded``) and refuse data over
    ``limit``: no I/O, nothing sent."""
    doc = to_document(cp)  # validates the state, the signals and the journal
    known = items.known_at(cp.run_id, cp.etag)
    change = delta_since(cp.state, cp.etag) if known is not None else None
    stored = None if known is None else known.calls
    sizes_before = None if known is None else known.sizes
    parts, sizes = delta.encode(cp.state, change, cp.calls, stored, sizes_before)
    if sizes is None:  # a change of a version whose sizes are unknown: measure it whole
        change = stored = None
        parts, sizes = delta.encode(cp.state, None, cp.calls, None, None)
    assert sizes is not None  # every part written whole is measured
    check_size(cp.run_id, sizes.state + sizes.calls, limit)
    return Prepared(cp, doc, known, parts, sizes, change, stored)


def _head_of(p: Prepared) -> dict[str, Any]:
    head = {k: v for k, v in p.doc.items() if k not in ("state", "calls")}
    return head | {"id": p.cp.run_id, "nonce": segments.nonce()}


def whole_item(items: Items, p: Prepared, *, patch: bool = True) -> SavePlan:
    """A save into a container of the earlier ``/id`` layout, as it was: one item, whole."""
    cp = p.cp
    body = {**p.doc, **p.data(), "id": cp.run_id}
    if items.finished_ttl is not None and cp.done:
        body["ttl"] = items.finished_ttl
    body["nonce"] = _head_of(p)["nonce"]
    partial = patch and p.change is not None and not p.change
    write = items.write(cp, body, partial=partial, too_large=LEGACY_TOO_LARGE)
    return SavePlan(write, [], None, Known("", write.fields, write.size, p.sizes, calls=cp.calls))


def head_and_segments(items: Items, p: Prepared, *, patch: bool = True) -> SavePlan:
    """A save of the ``/run`` layout (``segments``): the head alone, the data inline, a
    delta segment, or a fold."""
    return _Planner(items, p, _head_of(p), patch=patch).plan(p.parts, p.change, p.stored)


class _Planner:
    """The /run layout's decisions for one save (see ``segments``): the head alone, the
    data inline, a delta segment, or a fold."""

    def __init__(self, items: Items, p: Prepared, head: dict[str, Any], *, patch: bool) -> None:
        self.items, self.cp, self.known, self.sizes = items, p.cp, p.known, p.sizes
        self.prepared = p
        self.patch = patch
        self.head = head | {"run": p.cp.run_id, "sizes": list(p.sizes)}
        self.data = p.sizes.state + p.sizes.calls
        self.chain = None if self.known is None else self.known.chain
        self.ttl = items.finished_ttl if self.cp.done else None
        self.until = None if self.known is None else self.known.until
        # -- history: never inline, a completed step's save always writes a
        # segment marked ``hist``, a fold keeps what it supersedes (``segments``).
        self.keep = items.history.on
        self.hist = _completed(p) if self.keep else None

    def plan(
        self, parts: list[bytes], change: Any, stored: Sequence[Mapping[str, Any]] | None
    ) -> SavePlan:
        known, chain = self.known, self.chain
        expire = self.ttl is not None and chain is not None and self.until is None
        if chain is not None and not parts and not expire and self.hist is None:
            return self._head_only(chain)  # the data is unchanged
        # With history, data is inline only while none of it is history: before the
        # first step records a call (``load_at(run, -1)``: a fork at one of the first
        # step's calls -- a code-first run's only step -- replays its records) and
        # before a step completes. A new run's first save, its claim and heartbeats
        # stay one request each; the first step's calls cost what later steps' do.
        inline = not self.keep or (self.hist is None and self.cp.step < 0 and not self.cp.calls)
        if (
            chain is None
            and inline
            and self.data <= segments.INLINE_MAX
            and (known is not None or self.cp.etag is None)
        ):
            return self._inline(change is not None and not change, None)
        if chain is not None and not expire:
            data = segments.blob(parts)
            log = chain.log + len(data)
            outweighs = log > segments.FOLD_RATIO * self.data and log > segments.FOLD_MIN
            if chain.count < segments.MAX_DELTAS and not outweighs:
                return self._delta(chain, json.loads(data), data)
        if change is not None or stored is not None:
            parts, _ = delta.encode(self.cp.state, None, self.cp.calls, None, None)
        return self._fold(parts)

    def _remember(self, write: Write, **known: Any) -> Known:
        return Known("", write.fields, write.size, self.sizes, calls=self.cp.calls, **known)

    def _write(self, body: dict[str, Any], *, partial: bool) -> Write:
        if self.ttl is not None:
            body["ttl"] = self.ttl
        if self.until is not None:
            # The segments it needs expire then (written by a store with finished_ttl):
            # the head goes before them, whatever this store's own finished_ttl.
            left = max(1, round(self.until - time.time()) - segments.TTL_MARGIN)
            body["ttl"] = left if self.ttl is None else min(self.ttl, left)
            body["until"] = self.until
        return self.items.write(self.cp, body, partial=partial, too_large=HEAD_TOO_LARGE)

    def _head_only(self, chain: segments.Chain) -> SavePlan:
        write = self._write(self.head | chain.fields(), partial=self.patch)
        return SavePlan(write, [], None, self._remember(write, chain=chain, until=self.until))

    def _inline(self, unchanged_state: bool, fold: int | None) -> SavePlan:
        """The data in the head. ``fold``: the number of the fold that brings it back
        inline (its superseded segments go); None: it was inline already, or new."""
        body = self.head | self.prepared.data()
        kept = fold if fold is not None else None if self.known is None else self.known.fold
        if kept is not None:
            body["fold"] = kept
        write = self._write(body, partial=self.patch and unchanged_state)
        cleanup = None if fold is None else (fold, "")
        return SavePlan(write, [], cleanup, self._remember(write, fold=kept))

    def _delta(self, chain: segments.Chain, change: Any, data: bytes) -> SavePlan:
        """One more segment: the change, in one item or -- larger than an item -- cut
        into several (a step that adds 2.5 MB sends its 2.5 MB, never the state)."""
        seg = segments.nonce()
        head = segments.segment_head(
            self.cp.run_id,
            seg,
            gen=chain.gen,
            fold=chain.fold,
            seq=chain.seq + 1,
            prev=chain.tip,
            hist=self.hist,
        )
        found = segments.segment_items(
            self.items.measure, self.items.escaped, head, change, data, split=True
        )
        assert found is not None  # (split: always items)
        after = chain.then(seg, len(data))
        write = self._write(self.head | after.fields(), partial=False)
        return SavePlan(write, found, None, self._remember(write, chain=after, until=self.until))

    def _fold(self, whole: list[bytes]) -> SavePlan:
        """A new generation: the whole data as a snapshot (inline when it is small)."""
        before = self.chain.fold if self.chain else self.known.fold if self.known else None
        fold = max(int(time.time() * 1000), (before or 0) + 1)
        self.until = None  # the segments that expire then are superseded
        if self.data <= segments.INLINE_MAX and not self.keep:
            return self._inline(False, fold)
        seg = segments.nonce()
        back = self.chain.tip if self.keep and self.chain is not None else None
        head = segments.segment_head(
            self.cp.run_id, seg, gen=seg, fold=fold, seq=0, prev=None, hist=self.hist, back=back
        )
        if self.ttl is not None:
            head["ttl"] = self.ttl + segments.TTL_MARGIN
            self.until = time.time() + self.ttl + segments.TTL_MARGIN
        data = segments.blob(whole)
        snapshot = self.prepared.data()
        found = segments.segment_items(
            self.items.measure, self.items.escaped, head, snapshot, data, split=True
        )
        assert found is not None
        chain = segments.Chain(seg, fold, 0, seg, len(data))
        write = self._write(self.head | chain.fields(), partial=False)
        keep_last = self.items.history.keep_last
        trim = None if not self.keep or keep_last is None else self.cp.step - keep_last + 1
        # Nothing to supersede on a new run, or on one that never had segments; nothing
        # to drop when history keeps it.
        first = self.cp.etag is None or (self.known is not None and before is None)
        first = first or (self.keep and self.chain is not None)
        return SavePlan(
            write,
            found,
            None if first else (fold, seg),
            self._remember(write, chain=chain, fold=fold, until=self.until),
            trim=trim if trim is not None and trim > 0 else None,
        )


def _completed(p: Prepared) -> dict[str, Any] | None:
    """History's marker of a save that completes a step (its segment's ``hist``), or
    None. The step's attempts are those of the version before (the completed step's
    checkpoint starts the next one at attempt 1); size: the bytes of its update."""
    cp, known = p.cp, p.known
    before, attempts = -1, None
    if known is not None:
        before = json.loads(known.fields.get("step", "-1"))
        attempts = json.loads(known.fields.get("attempt", "null"))
    # A version this store does not know (another process saved it): marked if it is
    # past step -1; a reader keeps the first marker of each step along the chain.
    if cp.step <= before or not cp.steps:
        return None
    size = len(segments.blob(p.parts))
    at = p.doc.get("updated_at")
    hist = {"step": cp.step, "name": cp.steps[-1], "at": at, "attempts": attempts, "size": size}
    # The journal this save drops, indexed (``seam.callindex``): known when the version
    # before is this store's own, of the step's run.
    journal = None
    if known is not None and known.calls is not None and before == cp.step - 1:
        journal = known.calls
    # ... and the step's attempt records (``seam.attempts``) its completing save carries.
    index = index_of(journal, cp.attempt_log, cp.step)
    if index is not None:
        hist["calls"] = index
    return hist


def plan_head(
    items: Items,
    cp: Checkpoint,
    body: dict[str, Any],
    known: Known,
    data: dict[str, Any] | None,
    *,
    ttl: float | None,
    too_large: str,
) -> SavePlan | None:
    """A head-only save (``save_head``): ``body`` (the fields of ``head_document`` and
    those its layout adds) over the stored version ``known``, whose data stays. A head
    that points to segments is written alone, a PATCH or a replace. A head with the
    data inline (and an item of the earlier layout) is patched around its data; when
    it cannot be (a version this store does not know, a patch of more than 10
    operations, a service that refuses them) the whole item is written, with the
    stored ``data`` (the item read back: its ``state`` and ``calls``) -- None asks for
    it."""
    chain, until = known.chain, known.until
    if ttl is not None:
        body["ttl"] = ttl
    if until is not None:
        left = max(1, round(until - time.time()) - segments.TTL_MARGIN)  # as _Planner._write
        body["ttl"] = left if ttl is None else min(ttl, left)
        body["until"] = until
    if chain is not None:
        write = items.write(cp, body, partial=True, too_large=too_large)
    elif found := items.partial(cp, body, ("state", "calls"), too_large=too_large):
        write = found
    elif data is None:
        return None
    else:
        body |= {"state": data.get("state"), "calls": data.get("calls") or []}
        write = items.write(cp, body, partial=False, too_large=too_large)
    after = Known("", write.fields, write.size, known.sizes, chain, known.fold, until, known.calls)
    return SavePlan(write, [], None, after)
