"""Recovery: resuming the runs whose worker died, by the name of their workflow
(``runner.workflow``).

``recover(store, workflows)`` asks the store for the runs a worker may take now
(``Store.takeable``, the look a worker makes: the backend's own filter, so its cost
grows with those runs, not with the runs live workers hold; on a store that cannot
see there that a lease's process on this machine has ended -- Cosmos DB -- it lists
every running and due waiting run instead, as a worker's first look does, so that
such a run is taken at once and not at its lease's expiry) -- ``running`` runs
orphaned by a worker that died or started for the workers (``Workflow.start``), and
``waiting`` runs that are due (a sleep's wake time or a signal's deadline passed) --,
reading no state. It keeps those whose lease is absent, expired or visibly
ownerless, and runs each under its own lease (``Workflow.run``), one after
another, returning one ``Recovered`` per run it tried. Failed and cancelled runs
are left alone, and waiting runs that are not due (a delivered signal makes a
waiting run ``running`` again); so are runs of unknown workflows and runs started
by a plain ``run``. Two workers recovering at once do not collide: the second to
claim a run gets ``RunLeasedError``, reported as outcome ``"leased"``.
``durable-steps worker`` (``loop``) does this in a loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ..runner.clock import now
from ..runner.drivers import _async_only, _sync_only, drive, drive_async
from ..runner.store_io import execute_on
from ..runner.versions import serving
from ..runner.workflow import Workflow
from ..seam.checkpoint import RunInfo
from ..seam.errors import ConflictError, RunCancelledError, RunWaiting, StopRequested
from ..seam.lease import lease_holder
from ..seam.rules import RunFilter
from ..seam.store import AsyncStore, Store
from .queues import Admission, admitter, by_priority

Outcome = Literal["completed", "failed", "waiting", "leased", "cancelled"]


@dataclass(frozen=True)
class Recovered:
    """What ``recover`` did with one run."""

    run_id: str
    workflow: str
    outcome: Outcome
    """``completed``; ``failed`` (``error`` says why); ``waiting`` for a signal or a
    timer (``error`` is the ``RunWaiting``: what and until when); ``leased``: another
    worker took it first; ``cancelled`` meanwhile."""
    error: BaseException | None = None


def recover(
    store: Store,
    workflows: Iterable[Workflow],
    *,
    limit: int | None = None,
    lease: float = 60.0,
    owner: str | None = None,
) -> list[Recovered]:
    """Resume every unfinished run of a known workflow whose lease is free, one at a
    time: those the store's own filter answers (``Store.takeable``, a worker's look)
    where the store sees a dead local process's leases itself (``sees_gone_owners``);
    elsewhere every running and due waiting run listed, as a worker's first look, so
    that a run whose process died on this machine is taken at once, not at its
    lease's expiry."""
    _sync_only(store)
    known = known_workflows(workflows)
    admit = admitter(store, known, lease)  # queues: limits kept in the store
    pick = _Picker(owner, limit)
    done = []
    t = now()
    if store.sees_gone_owners:
        listed = list(store.takeable(list(known), at=t))
    else:
        listed = [i for w in known.values() for f in _listings(w, t) for i in store.listing(f)]
    for info, name in offered(listed, known):
        if pick.full():
            break
        if pick.takes(info, lambda: admit(info, known[name])):  # noqa: B023
            done.append(recover_one(store, known[name], info.run_id, lease=lease, owner=owner))
    return done


async def recover_async(
    store: AsyncStore,
    workflows: Iterable[Workflow],
    *,
    limit: int | None = None,
    lease: float = 60.0,
    owner: str | None = None,
) -> list[Recovered]:
    """``recover`` for async stores (runs resumed one after another)."""
    _async_only(store)
    known = known_workflows(workflows)
    done: list[Recovered] = []
    pick = _Picker(owner, limit)
    admission = Admission.of(known.values(), lease)  # queues: limits kept in the store
    t = now()
    if store.sees_gone_owners:
        listed = [info async for info in store.takeable(list(known), at=t)]
    else:
        every = [f for w in known.values() for f in _listings(w, t)]
        listed = [i for f in every async for i in store.listing(f)]
    for info, name in offered(listed, known):
        if pick.full():
            break
        if not pick.free(info) or admission.closed_for(info, known[name]):
            continue
        if not await execute_on(admission.program(info, known[name]), store):
            continue
        pick.taken += 1
        done.append(
            await recover_one_async(store, known[name], info.run_id, lease=lease, owner=owner)
        )
    return done


def offered(infos: list[RunInfo], known: Mapping[str, Workflow]) -> Iterator[tuple[RunInfo, str]]:
    """The runs ``takeable`` answered that a pass takes, in the order it takes them
    (queued ones by priority), with the name of each one's workflow: served here
    (``served``), and due -- what the store answers is a hint."""
    t = now()
    if any(known[name].queue is not None for name in known):
        infos = by_priority(infos)
    for info in infos:
        name = served(info, known)
        if name is None:
            continue
        past = info.deadline is not None and info.deadline <= t
        due = info.status == "running" or (info.wake_at is not None and info.wake_at <= t)
        if (past or due) and info.status in ("running", "waiting"):
            yield info, name


def served(info: RunInfo, known: Mapping[str, Workflow]) -> str | None:
    """The run's workflow if this worker serves it: a known name, and the version the
    run is pinned to is the code's (or none yet: ``runner.versions``). What a store
    answers is a hint; a run of another version is left to its workers."""
    name = info.workflow
    if name is None or name not in known:
        return None
    if info.version is not None and info.version != known[name].version:
        return None
    return name


def _listings(workflow: Workflow, due_before: float) -> tuple[RunFilter, ...]:
    """The listings of a pass for one workflow: its running runs, its waiting ones due
    before ``due_before`` -- of its version, or unpinned (``runner.versions``)."""
    name, versions = workflow.name, serving({workflow.version})
    return (
        RunFilter(status="running", workflow=name, versions=versions),
        RunFilter(status="waiting", workflow=name, due_before=due_before, versions=versions),
    )


def known_workflows(workflows: Iterable[Workflow]) -> dict[str, Workflow]:
    if isinstance(workflows, Workflow):
        workflows = [workflows]
    known: dict[str, Workflow] = {}
    for w in workflows:
        if not isinstance(w, Workflow):
            raise TypeError(f"recover() needs Workflow objects, not {w!r}")
        if known.setdefault(w.name, w) is not w:
            raise ValueError(
                f"two workflows are named {w.name!r}; names must be unique (two versions of "
                "one workflow: serve one per worker, durable-steps worker --version V)"
            )
    return known


def recover_one(
    store: Store,
    w: Workflow,
    run_id: str,
    *,
    lease: float,
    owner: str | None,
    stop: Callable[[], bool] | None = None,
) -> Recovered:
    """Resume one run of ``w``; what happened, as a ``Recovered``."""
    try:
        drive(w.program(run_id, None, lease, owner, stop), store)
    except BaseException as exc:
        return outcome_of(run_id, w.name, exc)
    return Recovered(run_id, w.name, "completed")


async def recover_one_async(
    store: AsyncStore,
    w: Workflow,
    run_id: str,
    *,
    lease: float,
    owner: str | None,
    stop: Callable[[], bool] | None = None,
) -> Recovered:
    """``recover_one`` under ``run_async``: a task on the worker's event loop."""
    try:
        await drive_async(w.program(run_id, None, lease, owner, stop), store)
    except BaseException as exc:
        return outcome_of(run_id, w.name, exc)
    return Recovered(run_id, w.name, "completed")


def outcome_of(run_id: str, workflow: str, exc: BaseException) -> Recovered:
    """The ``Recovered`` of a run whose resumption raised ``exc``."""
    if not isinstance(exc, Exception) or isinstance(exc, StopRequested):
        raise exc  # interrupts and a stopping worker end the pass
    if isinstance(exc, RunWaiting):
        return Recovered(run_id, workflow, "waiting", exc)
    if isinstance(exc, RunCancelledError):
        return Recovered(run_id, workflow, "cancelled", exc)
    if isinstance(exc, ConflictError):
        return Recovered(run_id, workflow, "leased", exc)
    return Recovered(run_id, workflow, "failed", exc)


class _Picker:
    """Which listed runs a pass takes: a free lease (absent, expired, or its owner
    visibly gone), not ``skip``ped, at most ``limit`` of them."""

    def __init__(
        self,
        owner: str | None,
        limit: int | None,
        skip: Callable[[str], bool] = lambda run_id: False,
    ) -> None:
        self.owner, self.limit, self.skip, self.taken = owner or "", limit, skip, 0

    def full(self) -> bool:
        return self.limit is not None and self.taken >= self.limit

    def free(self, info: RunInfo) -> bool:
        """Whether the run's lease is free for this pass (and it is not skipped)."""
        free = info.error is None and lease_holder(info, self.owner, time.time()) is None
        return free and not self.skip(info.run_id)

    def takes(self, info: RunInfo, admit: Callable[[], bool] = lambda: True) -> bool:
        """``free``, and admitted by its queue (``admit``, asked last: it writes)."""
        if self.free(info) and admit():
            self.taken += 1
            return True
        return False


def candidates(
    listing: Callable[[RunFilter], Iterator[RunInfo]],
    known: Mapping[str, Workflow],
    owner: str | None,
    limit: int | None,
    skip: Callable[[str], bool] = lambda run_id: False,
    *,
    wakes: list[float] | None = None,
    within: float = 0.0,
    admit: Callable[[RunInfo, Workflow], bool] | None = None,
) -> Iterator[tuple[str, str]]:
    """(run id, workflow) of the running runs and the due waiting runs of known
    workflows, with a free lease. With ``wakes``, the one listing of waiting runs
    reaches ``within`` seconds further and puts there the wake times (or deadlines)
    still to come: when the worker looks again. No state is read. ``admit``: whether
    its queue lets a run start now (``queues.admitter``); a queued workflow's running
    runs are offered by priority."""
    pick = _Picker(owner, limit, skip)
    t = now()
    for name in known:
        w = known[name]
        for filters in _listings(w, t if wakes is None else t + within):
            waiting = filters.due_before is not None
            listed: Iterable[RunInfo] = listing(filters)
            if admit is not None and w.queue is not None and not waiting:
                listed = by_priority(listed)  # queues: higher priority first
            for info in listed:
                if wakes is not None and waiting and info.wake_at is not None and info.wake_at > t:
                    wakes.append(info.wake_at)
                elif pick.full():
                    if wakes is None:
                        return
                    if not waiting:
                        break  # only wake times are still looked for
                elif pick.takes(info, lambda: admit is None or admit(info, w)):  # noqa: B023
                    yield info.run_id, name
