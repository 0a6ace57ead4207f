"""The fleet as an operator sees it: the workers, the queues and the schedules of a store.

Workers share nothing but the store, so everything here is read from it, through the
typed store interface (it works on every backend), and only what a part needs:

- **Workers and queues**: one listing of the running runs (``list_runs(status=
  "running")``: metadata, never a state; Cosmos DB answers it from its index, a
  FileStore reads each run's last record) gives each one's lease owner, lease expiry,
  last save (a heartbeat renews the lease with a save, so the newest save of a
  worker's leased runs is its last heartbeat), workflow, version and queue. Each
  queue (partition) that has running runs is read once more: its record (a point
  read of a reserved run id, ``workers.queues``) for its limits and starts. A queue
  with no running run is not listed.
- **Schedules**: one listing of the waiting runs, of which the schedules' records
  (reserved run ids, ``workers.schedules``) are loaded, and each last tick's run is
  read (a point read).
- **Workers** are the processes that hold leases, grouped by the process an owner id
  names (``seam.lease.owner_process``: host, boot, pid, start -- each ``run`` call has
  its own random part). A store that keeps a registry of its lease-holding processes
  (``Store.processes``: a FileStore's ``procs/``) adds the idle ones. A worker is
  *dead* when this machine sees its process is gone (``owner_gone``) or every lease it
  holds has expired: its runs are shown as dead leases, which any worker takes over.
  A worker on Cosmos DB that holds no lease leaves no trace in the store: it is not
  listed.
- **Queues** per queue and partition: the runs of it running under a live lease, the
  depth (running runs waiting to be taken: no live lease), the oldest of those, the
  limits its record keeps (``queues.limits``: what the workflow's ``Queue`` says; an
  older record has none) and the starts within its rate window.
- **Schedules**: each record's cron expression and newest handled tick; the next tick
  and the ticks missed since (came more than ``grace`` ago and not started: no worker
  served the schedule then) when croniter (the ``[schedules]`` extra) is installed;
  the last tick's run and its status.

The cost is the listing: at 100,000 runs that is seconds on a FileStore (it reads every
run's last record to know its status), a query of the running runs on Cosmos DB.
``fleet(parts=...)`` reads only the parts asked for; the console keeps each page's
snapshot briefly.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..seam.checkpoint import RunInfo
from ..seam.lease import owner_gone, owner_label, owner_process
from ..seam.store import Store
from .queues import RECORD_PREFIX as QUEUE_PREFIX
from .queues import record_id
from .schedules import RECORD_PREFIX as SCHEDULE_PREFIX
from .schedules import tick_run_id

MISSED_CAP = 1000
"""Missed ticks counted at most (a schedule no worker served for a year)."""
GRACE = 60.0
"""A tick older than this that was not started was missed (``Schedule.grace``'s default)."""


@dataclass(frozen=True)
class WorkerInfo:
    """A process that holds (or held) leases on runs of the store."""

    name: str
    """``host pid N`` (``owner_label``), or the owner id given explicitly."""
    host: str | None
    pid: int | None
    alive: bool
    """False: its process is visibly gone, or every lease it holds has expired."""
    runs: tuple[str, ...] = ()
    """The runs it holds a live lease on."""
    dead_leases: tuple[str, ...] = ()
    """The runs it leased whose lease expired (or whose process is gone)."""
    workflows: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    """The versions of the workflows' code its runs are pinned to."""
    last_heartbeat: float | None = None
    lease_expires: float | None = None
    registered: bool = False
    """Listed in the store's registry of processes (``Store.processes``)."""


@dataclass(frozen=True)
class QueueInfo:
    """One queue (partition): what runs, what waits, and its limits."""

    name: str
    partition: str | None
    running: int
    depth: int
    """Runs of it that are running but held by no live lease: waiting to be taken."""
    oldest_waiting: float | None
    """The last save of the oldest of those (when it became takeable, about)."""
    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    recent_starts: int = 0
    """Starts within the rate window (``rate``'s seconds), as the record keeps them."""
    limits_known: bool = False
    """The record keeps the limits (written by a worker of this version or later)."""


@dataclass(frozen=True)
class ScheduleInfo:
    """One schedule, as its record in the store says."""

    name: str
    cron: str | None
    last_tick: float | None
    last_run: str | None
    last_status: str | None
    """The status of the last tick's run (None: that run is gone, or none yet)."""
    next_tick: float | None
    missed: int
    """Ticks after the last handled that came more than ``GRACE`` ago (-1: unknown:
    croniter is not installed)."""
    updated_at: float | None = None


@dataclass
class Fleet:
    """One snapshot of the fleet (see the top)."""

    workers: list[WorkerInfo]
    queues: list[QueueInfo]
    schedules: list[ScheduleInfo]
    taken_at: float
    listed: int
    """Runs the listing yielded (the snapshot's cost)."""
    seconds: float = 0.0


@dataclass
class _Worker:
    host: str | None = None
    pid: int | None = None
    gone: bool = False
    registered: bool = False
    live: list[RunInfo] = field(default_factory=list)
    dead: list[RunInfo] = field(default_factory=list)


PARTS = ("workers", "queues", "schedules")


def fleet(store: Store, *, now: float | None = None, parts: Iterable[str] = PARTS) -> Fleet:
    """The store's workers, queues and schedules -- those of ``parts`` (the others are
    left empty): see the top for what each reads."""
    asked = set(parts)
    if unknown := asked - set(PARTS):
        raise ValueError(f"fleet has no part {sorted(unknown)}; the parts are {PARTS}")
    t0, at = time.perf_counter(), time.time() if now is None else now
    running: list[RunInfo] = []
    records: list[RunInfo] = []
    if asked & {"workers", "queues"}:
        running = list(store.list_runs(status="running"))
    if "schedules" in asked:  # a schedule's record is a waiting run of no workflow
        waiting = store.list_runs(status="waiting")
        records = [i for i in waiting if i.run_id.startswith(SCHEDULE_PREFIX)]
    return Fleet(
        workers(running, store.processes(), at) if "workers" in asked else [],
        queues(store, running, at) if "queues" in asked else [],
        schedules(store, records, at) if "schedules" in asked else [],
        at,
        len(running) + len(records),
        time.perf_counter() - t0,
    )


def workers(running: Iterable[RunInfo], registry: list[str] | None, now: float) -> list[WorkerInfo]:
    """The lease-holding processes among ``running`` runs and the ``registry``."""
    found: dict[str, _Worker] = defaultdict(_Worker)
    for name in registry or ():
        w = found[_key(name + ":x")]  # a registry entry is an owner id without its random part
        w.registered, w.gone = True, owner_gone(name + ":x")
        _place(w, name + ":x")
    for info in running:
        if info.owner is None:
            continue
        w = found[_key(info.owner)]
        _place(w, info.owner)
        w.gone = w.gone or owner_gone(info.owner)
        live = not w.gone and info.lease_expires is not None and info.lease_expires > now
        (w.live if live else w.dead).append(info)
    out = []
    for name, w in found.items():
        held = w.live + w.dead
        out.append(
            WorkerInfo(
                name=name,
                host=w.host,
                pid=w.pid,
                alive=not w.gone and (bool(w.live) or not w.dead),
                runs=tuple(sorted(i.run_id for i in w.live)),
                dead_leases=tuple(sorted(i.run_id for i in w.dead)),
                workflows=tuple(sorted({i.workflow for i in held if i.workflow})),
                versions=tuple(sorted({i.version for i in held if i.version})),
                last_heartbeat=max((i.updated_at or 0.0 for i in held), default=None) or None,
                lease_expires=max((i.lease_expires or 0.0 for i in w.live), default=None) or None,
                registered=w.registered,
            )
        )
    return sorted(out, key=lambda w: (not w.alive, w.name))


def _key(owner: str) -> str:
    return owner_label(owner)


def _place(w: _Worker, owner: str) -> None:
    process = owner_process(owner)
    if process is not None:
        w.host, w.pid = process[0], process[2]


def queues(store: Store, running: Iterable[RunInfo], now: float) -> list[QueueInfo]:
    """Each queue (partition) that has a running run: its runs, and its record (one
    point read each) for its limits and recent starts."""
    groups: dict[tuple[str, str | None], list[RunInfo]] = defaultdict(list)
    for info in running:
        if info.queue is not None and not info.run_id.startswith(QUEUE_PREFIX):
            groups[info.queue, info.partition].append(info)
    kept: dict[tuple[str, str | None], dict[str, Any]] = {}
    for key in groups:
        cp = store.load(record_id(*key))
        kept[key] = dict(cp.state) if cp is not None else {}
    out = []
    for (name, partition), infos in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")
    ):
        waiting = [i for i in infos if not _leased(i, now)]
        state = kept.get((name, partition), {})
        rate = state.get("rate")
        per = float(rate[1]) if rate else None
        starts = [t for t in state.get("starts", []) if per is None or t > now - per]
        out.append(
            QueueInfo(
                name=name,
                partition=partition,
                running=len(infos) - len(waiting),
                depth=len(waiting),
                oldest_waiting=min((i.updated_at or now for i in waiting), default=None),
                concurrency=state.get("concurrency"),
                rate=None if not rate else (int(rate[0]), float(rate[1])),
                recent_starts=len(starts) if per is not None else 0,
                limits_known="concurrency" in state,
            )
        )
    return out


def _leased(info: RunInfo, now: float) -> bool:
    return (
        info.owner is not None
        and info.lease_expires is not None
        and info.lease_expires > now
        and not owner_gone(info.owner)
    )


def schedules(store: Store, records: Iterable[RunInfo], now: float) -> list[ScheduleInfo]:
    """Each schedule that has a record: what its record and its last run say."""
    out = []
    for record in records:
        name = record.run_id.removeprefix(SCHEDULE_PREFIX)
        cp = store.load(record.run_id)
        state = dict(cp.state) if cp is not None else {}
        last = state.get("last")
        cron = state.get("cron")
        last_run = tick_run_id(name, float(last)) if last is not None else None
        ran = store.run_info(last_run) if last_run is not None else None
        next_tick, missed = _ticks(cron, last, now)
        out.append(
            ScheduleInfo(
                name=name,
                cron=cron,
                last_tick=None if last is None else float(last),
                last_run=last_run if ran is not None else None,
                last_status=None if ran is None else ran.status,
                next_tick=next_tick,
                missed=missed,
                updated_at=record.updated_at,
            )
        )
    return sorted(out, key=lambda s: s.name)


def _ticks(cron: str | None, last: float | None, now: float) -> tuple[float | None, int]:
    """The next tick after ``now``, and the ticks after ``last`` older than ``GRACE``."""
    try:
        from croniter import croniter
    except ImportError:
        return None, -1
    if not cron or not croniter.is_valid(cron):
        return None, -1
    next_tick = float(croniter(cron, datetime.fromtimestamp(now, UTC)).get_next(float))
    if last is None:
        return next_tick, 0
    ahead, missed = croniter(cron, datetime.fromtimestamp(float(last), UTC)), 0
    while missed < MISSED_CAP and float(ahead.get_next(float)) <= now - GRACE:
        missed += 1
    return next_tick, missed
