"""Queue limits, held in the store: may a worker take this run of queue Q now?

A queue (``runner.queues.Queue``) bounds the runs of it that run at once across every
worker, and how many are taken per period. Workers on many machines share nothing but
the store, so the limits live there, in one small **record per queue** (and per
partition key): a checkpoint of its own, under the reserved run id
``durable-queue~NAME`` (``durable-queue~NAME~PARTITION``), whose state is

    {"slots": {run_id: [taken_at, etag, admitter]}, "starts": [taken_at, ...],
     "concurrency": N, "rate": [n, per]}   (the limits: for operators, never read back)

and which is only ever changed by a conditional save on the version read (the same
compare-and-swap the stores give every run, through the typed store interface: it works
on every backend). Two workers that admit at once: one save wins, the other reads again.

- **A slot** is held by a run while that run is ``running`` and either holds a live
  lease (its worker is at work; heartbeats keep it live) or has not changed since it
  was admitted (its etag is the one the slot recorded) for at most ``grace`` seconds
  (the worker that admitted it is claiming it; less if that worker's process is
  visibly gone, as with leases: ``seam.lease``). So a run that completes, fails, waits
  or is cancelled frees its slot, and a dead worker's slot frees when its run's lease
  expires (at once when this machine sees the worker's process is gone) -- nothing
  has to release a slot, and nothing a crash leaves behind holds one for ever. Slots
  are looked at (one metadata read of each holder, ``Info``) only when the record is
  full.
- **The rate**: the times of the last takes within ``per_seconds``; a take is refused
  while ``n`` of them are in the window. Every take counts (a run resumed after a
  signal too): it is the number of runs set going that a model API's quota sees.
- **Priority** is the order in which a worker offers a look's candidates
  (``by_priority``): higher first, then the earliest started (``started_at``, which
  no claim, heartbeat or step moves: a run whose worker died keeps its place, where
  an order by last-saved time would send it to the back, behind every run its claim
  had been made after). A full queue closes for the rest of
  the look (``Admission``), so no lower-priority run slips past a higher one.

The record's run id starts with a prefix no workflow uses, its status is ``waiting``
with no wake time, and it names no workflow: ``recover`` and the worker never take it.
``runs list`` shows it (an operator can see a queue's slots); deleting it forgets the
queue's slots and rate window, which the next take rebuilds from the runs.
"""

from __future__ import annotations

import functools
import os
import random
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..runner.queues import Queue
from ..runner.requests import Info, Load, Request, Save, Sleep, execute
from ..runner.store_io import blocking_io
from ..runner.workflow import Workflow
from ..seam.checkpoint import Checkpoint, RunInfo
from ..seam.errors import ConflictError
from ..seam.lease import default_owner, lease_holder, owner_gone
from ..seam.state import freeze, frozen_state
from ..seam.store import Store

RECORD_PREFIX = "durable-queue~"
"""Run ids of queue records start with it (``record_id``)."""
_TRIES = 8


@functools.cache
def _admitter(pid: int) -> str:
    """Who admits, in the slots a process records: gone with it, visibly on its machine
    (per pid: a forked child is another admitter)."""
    return default_owner()


Verdict = Literal["taken", "held", "full"]
"""``taken``: the run may start, its slot is recorded; ``held``: another worker holds
it (admitted it, or runs it); ``full``: the queue (partition) is at its concurrency or
rate limit now."""


def record_id(queue: str, partition: str | None) -> str:
    """The run id of the record of ``queue`` (of its ``partition``)."""
    return RECORD_PREFIX + queue + ("" if partition is None else "~" + partition)


def limits(queue: Queue) -> dict[str, Any]:
    """The queue's limits as its record keeps them, so that an operator reading the
    store (the console's queues page) sees them without the workflow's code."""
    rate = None if queue.rate is None else list(queue.rate)
    return {"concurrency": queue.concurrency, "rate": rate}


def holds(info: RunInfo | None, slot: list[Any], now: float, grace: float) -> bool:
    """Whether the run of ``info`` still holds the ``slot`` ([taken_at, etag, admitter])
    it took: running, and leased live, or untouched since it was admitted ``grace`` ago
    at most by a worker not visibly gone."""
    if info is None or info.status != "running":
        return False
    if lease_holder(info, "", now) is not None:
        return True
    claiming = info.etag == slot[1] and now - slot[0] < grace
    return bool(claiming and not (len(slot) > 2 and owner_gone(slot[2])))


def admit(queue: Queue, info: RunInfo, *, grace: float) -> Generator[Request, Any, Verdict]:
    """May the run of ``info`` (listed with a free lease) start now under ``queue``?
    See the top; a program of loads and saves, for a blocking or an async store."""
    run_id, rid = info.run_id, record_id(queue.name, info.partition)
    for attempt in range(_TRIES):
        record: Checkpoint | None = yield Load(rid)
        now = time.time()
        state = record.state if record is not None else {}
        slots = {k: list(v) for k, v in state.get("slots", {}).items()}
        starts = list(state.get("starts", []))
        mine = slots.pop(run_id, None)
        if mine is not None and holds((yield Info(run_id)), mine, now, grace):
            return "held"
        if queue.concurrency is not None and len(slots) >= queue.concurrency:
            for other, slot in list(slots.items()):
                if not holds((yield Info(other)), slot, now, grace):
                    del slots[other]  # its run ended, waits, or its worker died
            if len(slots) >= queue.concurrency:
                return "full"
        if queue.rate is not None:
            n, per = queue.rate
            starts = [t for t in starts if t > now - per]
            if len(starts) >= n:
                return "full"
            starts.append(now)
        if queue.concurrency is not None:
            slots[run_id] = [now, info.etag, _admitter(os.getpid())]
        saved = Checkpoint(
            run_id=rid,
            step=-1,
            state=frozen_state({"slots": slots, "starts": starts, **limits(queue)}, rid),
            etag=None if record is None else record.etag,
            status="waiting",
            signals=freeze({}, "", rid, 0, "signal payload"),
        )
        try:
            yield Save(saved)
        except ConflictError:
            # Another worker took a slot meanwhile: read again, after a short pause
            # (jittered, so that racing workers do not collide again in step).
            yield Sleep(random.uniform(0.002, 0.01) * (attempt + 1))  # jitter
            continue
        return "taken"
    return "full"  # busy beyond reason: this look gives up on the queue, the next tries


def admitter(
    store: Store, known: Mapping[str, Workflow], grace: float
) -> Callable[[RunInfo, Workflow], bool]:
    """The ``admit`` of one look over a blocking store (``recovery.candidates``)."""
    admission, do = Admission.of(known.values(), grace), blocking_io(store)
    return lambda info, w: execute(admission.program(info, w), do)


def by_priority(infos: Iterable[RunInfo]) -> list[RunInfo]:
    """Runs in the order a queue takes them: higher priority first, then the earliest
    started (a listing without the start time: the last save)."""
    return sorted(infos, key=lambda i: (-(i.priority or 0), i.started_at or i.updated_at or 0.0))


@dataclass
class Admission:
    """One look's admissions: which queue each listed run is taken under, and which
    queues (partitions) said ``full``, closed for the rest of the look."""

    queues: Mapping[str, Queue]
    grace: float
    closed: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    """Queues named by runs that no served workflow declares: their runs are left."""

    @classmethod
    def of(cls, workflows: Iterable[Workflow], grace: float) -> Admission:
        queues: dict[str, Queue] = {}
        for w in workflows:
            q = w.queue
            if q is not None and queues.setdefault(q.name, q) != q:
                raise ValueError(
                    f"two queues are named {q.name!r} with different limits; declare one "
                    "Queue and give it to each workflow"
                )
        return cls(queues, grace)

    def queue_of(self, info: RunInfo, workflow: Workflow) -> Queue | Literal[False] | None:
        """The queue the run is taken under (None: none; False: one this worker does not
        know, whose limits it cannot keep: the run is left to a worker that does)."""
        if info.queue is None:
            return workflow.queue
        found = self.queues.get(info.queue)
        if found is None:
            self.unknown.add(info.queue)
            return False
        return found

    def closed_for(self, info: RunInfo, workflow: Workflow) -> bool:
        """Whether the look takes no more runs of this run's queue (partition)."""
        q = self.queue_of(info, workflow)
        return q is False or (q is not None and record_id(q.name, info.partition) in self.closed)

    def program(self, info: RunInfo, workflow: Workflow) -> Generator[Request, Any, bool]:
        """Admit the run (True: take it now). Nothing to do for a run of no queue."""
        q = self.queue_of(info, workflow)
        if q is None:
            return True
        if q is False:
            return False
        rid = record_id(q.name, info.partition)
        if rid in self.closed:
            return False
        verdict = yield from admit(q, info, grace=self.grace)
        if verdict == "full":
            self.closed.add(rid)
        return verdict == "taken"
