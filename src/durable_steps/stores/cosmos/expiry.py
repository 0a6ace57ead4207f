"""What an expired run leaves behind on Cosmos DB, removed (issue 32 item 1, issue 33
item 5): ``delete_expired`` as a program of SDK calls (``programs``).

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
writes would leave items that never expire, so a sweep would be needed anyway. The
sweep costs nothing per write: it runs in the worker's retention pass
(``workers.retention``, once a minute at most) and in ``durable-steps runs prune``.

The sweep: everything of a run expired at least ``finished_ttl`` after the run's last
save, so every item it left is older than that. One cross-partition query lists the runs
of the items and segments older than ``now - finished_ttl`` (the run id of each, no data;
not ``DISTINCT``, which the local protocol server cannot parse), one query of heads per
hundred of those runs (ids; a head's id is its run id) tells
which runs are gone, and for each of those one single-partition query of its items'
ids, then their deletes. Only items older than that cutoff go: a run created again
under the same id since has a head (it is skipped), and its own items are younger. A
run that still has its head keeps everything (a running, failed or kept run; an
expired head the service has not removed yet is taken at a later pass). Its cost per
pass is the query over items older than ``finished_ttl`` (those of long-lived runs,
which stay) and the heads of their runs; on a store without ``finished_ttl`` nothing
runs.
"""

from __future__ import annotations

import time
from typing import Any

from .programs import OPEN, QUERY, CosmosPrograms, Program, SdkCall
from .sdk import AzureError, translate

BATCH = 100
"""Runs whose heads one query looks for."""


def _old_runs(before: float) -> SdkCall:
    return SdkCall(
        QUERY,
        {
            "query": "SELECT VALUE c.run FROM c "
            "WHERE (IS_DEFINED(c.item) OR IS_DEFINED(c.seg)) AND c._ts < @before",
            "parameters": [{"name": "@before", "value": before}],
            "enable_cross_partition_query": True,
        },
    )


def _heads(runs: list[str]) -> SdkCall:
    return SdkCall(
        QUERY,
        {
            "query": "SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(@runs, c.id)",
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
        if self.finished_ttl is None:
            return 0
        if self.partition_key is None:
            yield OPEN
        if self._legacy:  # one item per run, expired whole by its ttl
            return 0
        before = (time.time() if now is None else now) - self.finished_ttl
        try:
            runs = list(dict.fromkeys(r for r in (yield _old_runs(before)) if isinstance(r, str)))
            alive: set[Any] = set()
            for i in range(0, len(runs), BATCH):
                alive.update((yield _heads(runs[i : i + BATCH])))
        except AzureError as exc:
            raise translate(exc, self._where) from exc
        gone = 0
        for run_id in runs:
            if run_id in alive:
                continue
            try:
                left = yield _left(run_id, before)
            except AzureError as exc:
                raise translate(exc, self._where) from exc
            if left and (yield from self._delete_segments(run_id, left, "expired")) == len(left):
                gone += 1
        return gone
