"""What an expired run leaves behind on Cosmos DB, removed (its streams, events and kept
history), at a cost per pass that does not grow with the store:
``delete_expired`` as a program of SDK calls (``programs``), and the expiry index it
reads.

A run that completes with ``finished_ttl`` is expired by Cosmos DB itself: its head
carries the ttl, and the snapshot its completing save folds to carries it too, an hour
(``segments.TTL_MARGIN``) longer. What carries no ttl stays: the run's per-run items
(stream chunks, events: ``run_items``) and, with history on (the default), the
generations of segments its folds kept (``history``). They are removed here, once their
head is gone.

Why a sweep and not a ttl on each item: an item is written while its run runs, when
nobody knows when the run will end, so a ttl could only be added when it completes --
one write per item on the completing save's path (a 10,000-chunk stream: 10,000 patches
before the run's last save returns), and a crash between the head's commit and those
writes would leave items that never expire, so a sweep would be needed anyway.

**The expiry index.** A save whose head carries a ttl (the save that completes a run on
a store with ``finished_ttl``; a later head-only save of that run, a signal) first
upserts one small item in the container's own partition ``#expiry`` (``PARTITION``: a
value no run id can take, ``#`` is refused in run ids): ``id`` = the run id, ``item`` =
``"expiry"`` (so the listings of heads skip it), ``at`` = when the head expires (the
writer's clock: now + ttl). It is written *before* the head: a crash between the two
leaves an entry of a run that does not expire (harmless: the sweep checks the head and
drops the entry), never an expiring run without one. Ordinary saves (no ttl on the head)
write nothing more; the completing save, one upsert more.

**The sweep** (the worker's retention pass, ``workers.retention``, once a minute at most;
``durable-steps runs prune``): one single-partition query in ``#expiry`` of the entries
due (``at`` at least ``SKEW`` ago: clocks of writers and service may differ; at most
``LIMIT`` per pass, the rest at the next), one query of heads per ``BATCH`` due runs;
for each due run whose head is gone, one single-partition query of the ids of its
segments and items older than ``now - finished_ttl`` (a run created again under the same
id since keeps its own, younger ones), their deletes, and the entry's delete (If-Match:
an entry rewritten meanwhile stays). An expired item leaves query answers as its ttl
runs out, before the service deletes it (Cosmos DB's TTL documentation), so a head still
there has not expired by the service's clock: it keeps its entry for a later pass while
it carries a ttl, and loses it when it does not (resumed, or created again and running).
So a pass costs what became due since the last one, not the runs and items the store
holds: with nothing due, one query answering no row (and the marker, below).

**Runs that completed before the index existed** have no entry. The first pass on a
container without the marker entry (``SCANNED``, id ``" scanned"``: a leading space, which
no run id has) makes the earlier full sweep once -- one cross-partition query of the run
of every segment and item older than ``now - finished_ttl``, the heads of those runs,
and the leftovers of the runs whose head is gone -- and then writes the marker. Every
process that writes a container should run this version or later before that pass: a run
completed by an earlier version after it has no entry, and what it leaves stays until it
is deleted (``durable-steps runs delete``).

On a store without ``finished_ttl`` nothing runs; the earlier ``/id`` layout keeps a run
in one item, which expires whole: nothing to sweep.
"""

from __future__ import annotations

import time
from typing import Any

from .programs import OPEN, QUERY, CosmosPrograms, Program, SdkCall
from .sdk import AzureError, MatchConditions, missing_item, status_of, translate

PARTITION = "#expiry"
"""The partition key value of the expiry index ('#' is refused in run ids)."""
KIND = "expiry"
SCANNED = " scanned"
"""The id of the marker entry: the earlier runs were swept once (no run id starts with a space)."""
BATCH = 100
"""Runs whose heads one query looks for."""
LIMIT = 1000
"""Due entries one pass takes; the rest wait for the next."""
SKEW = 300.0
"""Seconds an entry waits past its ``at``: the writer's and the service's clocks may differ,
and the sweep deletes only what is older than ``now - finished_ttl``."""


def entry(run_id: str, ttl: int | float) -> dict[str, Any]:
    """The index entry of a run whose head expires ``ttl`` seconds from now."""
    return {"id": run_id, "run": PARTITION, "item": KIND, "at": time.time() + ttl}


def note_call(run_id: str, ttl: int | float) -> SdkCall:
    """The upsert of the run's entry (before its head's write)."""
    return SdkCall("upsert_item", {"body": entry(run_id, ttl), "no_response": True})


def _due(at: float) -> SdkCall:
    return SdkCall(
        QUERY,
        {
            "query": "SELECT TOP @limit c.id, c._etag FROM c WHERE c.run = @p AND c.at <= @at",
            "parameters": [
                {"name": "@limit", "value": LIMIT},
                {"name": "@p", "value": PARTITION},
                {"name": "@at", "value": at},
            ],
            "partition_key": PARTITION,
        },
    )


def _old_runs(before: float) -> SdkCall:
    """(The one-off full sweep) the run of every segment and item older than ``before``."""
    return SdkCall(
        QUERY,
        {
            "query": "SELECT VALUE c.run FROM c WHERE (IS_DEFINED(c.item) OR IS_DEFINED(c.seg)) "
            "AND c.run != @p AND c._ts < @before",
            "parameters": [
                {"name": "@p", "value": PARTITION},
                {"name": "@before", "value": before},
            ],
            "enable_cross_partition_query": True,
        },
    )


def _heads(runs: list[str]) -> SdkCall:
    return SdkCall(
        QUERY,
        {
            "query": "SELECT c.id, c.ttl FROM c WHERE ARRAY_CONTAINS(@runs, c.id) "
            "AND NOT IS_DEFINED(c.item) AND NOT IS_DEFINED(c.seg)",
            "parameters": [{"name": "@runs", "value": runs}],
            "enable_cross_partition_query": True,
        },
    )


def _left(run_id: str, before: float) -> SdkCall:
    return SdkCall(
        QUERY,
        {
            "query": "SELECT c.id FROM c WHERE c.run = @run "
            "AND (IS_DEFINED(c.item) OR IS_DEFINED(c.seg)) AND c._ts < @before",
            "parameters": [{"name": "@run", "value": run_id}, {"name": "@before", "value": before}],
            "partition_key": run_id,
        },
    )


class Expiry(CosmosPrograms):
    """``delete_expired`` as a program."""

    def _delete_expired(self, now: float | None) -> Program[int]:
        """Remove what expired runs left (see the top); how many runs it was."""
        ttl = self.finished_ttl
        if ttl is None:
            return 0
        if self.partition_key is None:
            yield OPEN
        if not self.layout.segmented:  # one item per run, expired whole by its ttl
            return 0
        at = time.time() if now is None else now
        try:
            due = yield _due(at - SKEW)
        except AzureError as exc:
            raise translate(exc, self._where) from exc
        entries = {e["id"]: e.get("_etag") for e in due if isinstance(e.get("id"), str)}
        scanned = entries.pop(SCANNED, None) is not None
        gone = yield from self._expire(list(entries), entries, at - ttl)
        if not scanned:  # runs that completed before the index: the full sweep, once
            try:
                old = yield _old_runs(at - ttl)
            except AzureError as exc:
                raise translate(exc, self._where) from exc
            runs = list(dict.fromkeys(r for r in old if isinstance(r, str)))
            gone += yield from self._expire(runs, {}, at - ttl)
            marker = {"id": SCANNED, "run": PARTITION, "item": KIND, "at": 0}
            try:
                yield SdkCall("upsert_item", {"body": marker, "no_response": True})
            except AzureError as exc:
                raise translate(exc, self._where) from exc
        return gone

    def _expire(self, runs: list[str], entries: dict[str, Any], before: float) -> Program[int]:
        """Of ``runs``, remove the leftovers (older than ``before``) of those whose head is
        gone, and their entries (``entries``: id -> etag); drop the entries of heads
        that no longer expire; how many runs were cleaned."""
        heads: dict[str, Any] = {}
        try:
            for i in range(0, len(runs), BATCH):
                for head in (yield _heads(runs[i : i + BATCH])):
                    heads[head.get("id")] = head
        except AzureError as exc:
            raise translate(exc, self._where) from exc
        gone = 0
        for run_id in runs:
            head = heads.get(run_id)
            if head is not None:
                if not isinstance(head.get("ttl"), int | float) and run_id in entries:
                    yield from self._drop(run_id, entries[run_id])  # resumed: not expiring
                continue  # (an expiring head the service has not removed yet: a later pass)
            try:
                left = yield _left(run_id, before)
            except AzureError as exc:
                raise translate(exc, self._where) from exc
            if (yield from self._delete_segments(run_id, left, "expired")) == len(left):
                gone += 1
                if run_id in entries:
                    yield from self._drop(run_id, entries[run_id])
        return gone

    def _drop(self, run_id: str, etag: Any) -> Program[None]:
        """Delete a run's entry as it was read (a rewritten one stays)."""
        kwargs: dict[str, Any] = {"item": run_id, "partition_key": PARTITION}
        if isinstance(etag, str):
            kwargs |= {"etag": etag, "match_condition": MatchConditions.IfNotModified}
        try:
            yield SdkCall("delete_item", kwargs)
        except AzureError as exc:
            if not (missing_item(exc) or status_of(exc) == 412):
                raise translate(exc, self._where) from exc
