"""Removing a run's items: ``delete`` (its head, then its segments) and ``prune``'s sweep
of the segments that no head needs, as programs of SDK calls (``programs``).

Which segments a head needs is ``segments.unneeded``'s: those of the chain from its
tip back to its snapshot, nothing else. The sweep considers only segments older than
``older_than`` (default ``ORPHAN_AGE``, an hour), and a save commits its head at most
``SAVE_LIMIT`` (ten minutes) after it began writing its segments (``programs``): so a
segment that old which the head does not reach belongs to no save in flight -- a save
that failed, a create that lost to another writer's (``durable-steps migrate`` onto a
run already there used to leave one), a stale writer's fold or delta, a crashed
delete, an expired run -- and is deleted. A younger one is left: it may be a save's
that is writing its head now.
"""

from __future__ import annotations

import time
from typing import Any

from ...seam.errors import delete_conflict
from ...seam.rules import check_run_id
from . import run_items, segments
from .programs import OPEN, QUERY, CosmosPrograms, Program, SdkCall, log
from .sdk import AzureError, MatchConditions, missing_item, status_of, translate


class Removals(CosmosPrograms):
    """``delete`` and ``prune_orphans`` as programs."""

    def _delete(self, run_id: str, etag: str | None) -> Program[bool]:
        check_run_id(run_id)
        if self.partition_key is None:
            yield OPEN
        self._items.forget(run_id)
        listed: list[dict[str, Any]] = []
        if (
            self.layout.segmented
        ):  # listed first: a run created again after the delete keeps its own
            try:
                listed = yield SdkCall(QUERY, segments.every_segment(run_id))
                listed += yield SdkCall(QUERY, run_items.every_item(run_id))  # streams, events
            except AzureError as exc:
                raise translate(exc, self._where) from exc
        kwargs: dict[str, Any] = {"item": run_id, "partition_key": run_id}
        if etag is not None:
            kwargs |= {"etag": etag, "match_condition": MatchConditions.IfNotModified}
        try:
            yield SdkCall("delete_item", kwargs)
            existed = True
        except AzureError as exc:
            if not missing_item(exc):
                if etag is not None and status_of(exc) == 412:
                    raise delete_conflict(run_id) from exc
                raise translate(exc, self._where) from exc
            existed = False
        yield from self._delete_segments(run_id, listed)
        return existed

    def _sweep(self, older_than: float) -> Program[int]:
        """Delete the segments older than ``older_than`` seconds that their run's head
        does not need (see the top); how many were deleted."""
        if self.partition_key is None:
            yield OPEN
        if not self.layout.segmented:  # no segments to sweep
            return 0
        try:
            found = yield SdkCall(QUERY, segments.older_segments(time.time() - older_than))
        except AzureError as exc:
            raise translate(exc, self._where) from exc
        by_run: dict[str, list[dict[str, Any]]] = {}
        for segment in found:
            if isinstance(segment.get("run"), str):
                by_run.setdefault(segment["run"], []).append(segment)
        removed = 0
        for run_id, its in by_run.items():
            head = yield from self._head(run_id)
            doomed, unsure = unneeded(its, head)
            if unsure and head is not None:
                doomed += yield from self._off_chain(run_id, head, unsure)
            if doomed and head is not None:
                doomed = yield from self._not_history(run_id, head, doomed)
            removed += yield from self._delete_segments(run_id, doomed, "orphaned")
        return removed

    def _off_chain(
        self, run_id: str, head: dict[str, Any], unsure: list[dict[str, Any]]
    ) -> Program[list[dict[str, Any]]]:
        """Those of ``unsure`` (segments of the head's generation) that its chain does
        not reach: one projected query of the generation's links."""
        chain = segments.chain_of(head)
        assert chain is not None  # (unneeded() is unsure only of a chain's generation)
        try:
            found = yield SdkCall(QUERY, segments.links(run_id, chain.gen))
        except AzureError as exc:
            # A warning: a segment not swept is garbage only; no call runs again.
            log.warning("run %r: could not read its chain to sweep its segments: %s", run_id, exc)
            return []
        chained = on_chain(head, found)
        return [] if chained is None else [s for s in unsure if s.get("seg") not in chained]

    def _not_history(
        self, run_id: str, head: dict[str, Any], doomed: list[dict[str, Any]]
    ) -> Program[list[dict[str, Any]]]:
        """Those of ``doomed`` that the run's history does not reach (a fold
        with history on keeps what it superseded, linked by ``back``;
        ``segments.history_chain``). A head that points to no segments keeps none."""
        try:
            chain = segments.chain_of(head)
        except (TypeError, ValueError):
            return []
        if chain is None:
            return doomed
        try:
            found = yield SdkCall(QUERY, segments.history_links(run_id))
        except AzureError as exc:
            # A warning: a segment not swept is garbage only; no call runs again.
            log.warning("run %r: could not read its history to sweep its segments: %s", run_id, exc)
            return []
        kept = {item.get("seg") for item in segments.history_chain(chain, found)}
        return [s for s in doomed if s.get("seg") not in kept]


def unneeded(
    its: list[dict[str, Any]], head: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Of a run's segments (``its``) older than a save can take (``programs.ORPHAN_AGE``), those
    its head does not need -- and those that only its chain can tell. A segment is
    needed only on the chain from the head's ``tip`` back to its snapshot: not when the
    head is gone or its data is inline, nor when it is of another generation (an
    earlier fold, or a later one that never committed: a create that lost, a stale
    writer's fold), nor past the head's ``seq`` (a delta whose head never landed). Of
    the head's generation, a segment that shares its number with another one may be a
    failed save's: the chain tells which (``on_chain``). An unreadable head keeps
    everything, for whoever repairs it."""
    if head is None:
        return its, []
    try:
        chain = segments.chain_of(head)
    except (TypeError, ValueError):
        return [], []
    if chain is None:
        return its, []
    doomed, same = [], []
    for segment in its:
        seq = segment.get("seq")
        if segment.get("gen") != chain.gen or type(seq) is not int or seq > chain.seq:
            doomed.append(segment)
        else:
            same.append(segment)
    shared: dict[int, set[Any]] = {}
    for segment in same:
        shared.setdefault(segment["seq"], set()).add(segment.get("seg"))
    return doomed, [s for s in same if len(shared[s["seq"]]) > 1]


def on_chain(head: dict[str, Any], found: list[dict[str, Any]]) -> set[str] | None:
    """The nonces of the segments on the head's chain, from ``links``; None when a link
    is missing (a damaged run: nothing of it is touched)."""
    chain = segments.chain_of(head)
    if chain is None:
        return set()
    before = {item.get("seg"): item.get("prev") for item in found}
    seg: Any = chain.tip
    chained: set[str] = set()
    for _ in range(chain.seq + 1):
        if seg not in before:
            return None
        chained.add(seg)
        seg = before[seg]
    return chained
