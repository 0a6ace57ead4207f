"""Discovery: which runs a worker's look takes.

A look asks the store for the runs a worker could take now (``Store.takeable``):
running runs whose lease is absent or expired, waiting runs whose timer or signal
deadline is due -- filtered by the backend (a Cosmos DB query on status and lease
expiry; FileStore's index of runnable runs, ``stores/file/due_index``), so its cost
grows with the runs to take, not with the runs that live workers hold. What the
store answers is a hint: each run's lease is checked here again (``_Picker``) and at
its claim, by a conditional save.

Under a backlog, a look reads no more runs than it has free slots (unqueued workflows:
a queue orders every due run by priority first), and the store offers each look its
due runs from a different place (FileStore: a random start in each bucket of its
index), so that several workers' looks do not all offer -- and race to claim -- the
same oldest runs: a claim lost to another worker is a wasted load and save.

The worker's first look is a full one (``candidates``: every running run of its
workflows): it also takes back, at once, runs whose lease is still running but whose
holder is visibly gone (a process of this machine that died) or is this worker's own
stable ``--owner`` (a restarted worker) -- which a filter on lease expiry would leave
until the lease expires. Later looks are cheap. A lease of a worker of this machine
that dies later is taken over at the next look of every live worker: FileStore sees it
itself (``stores/file/wake``: the dead process's runs are noted due now); on a store
that cannot (``Store.sees_gone_owners`` False: Cosmos DB), the machine's registry of
workers tells each look that a worker died (``deaths``), and that look is a full one.
A lease of another machine's worker, or of a stable ``--owner``, is taken when it
expires (at most ``lease`` seconds, the documented bound).

``take`` also returns the wake times (and signal deadlines) due within the next
interval, so the worker wakes a timer at its time without another look.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from ..runner.clock import now
from ..runner.workflow import Workflow
from ..seam.checkpoint import RunInfo
from ..seam.lease import owner_gone
from ..seam.store import Store
from .deaths import LocalWorkers
from .queues import admitter, by_priority
from .recovery import _Picker, candidates, served
from .retention import Expiry


class Look:
    """One worker's looks at its store for the runs of ``known`` workflows."""

    def __init__(
        self,
        store: Store,
        known: Mapping[str, Workflow],
        owner: str | None,
        lease: float = 60.0,
        deaths: LocalWorkers | None = None,
    ) -> None:
        self.store, self.known, self.owner, self.lease = store, known, owner, lease
        self.first = True
        # (a store that sees dead local processes itself needs no word of their deaths)
        self.deaths = None if store.sees_gone_owners else deaths
        self.queued = any(w.queue is not None for w in known.values())
        self.expiry = Expiry(store)  # retention: finished_ttl on stores without TTL

    def served(self, info: RunInfo) -> str | None:
        """The run's workflow if this worker serves it (``recovery.served``)."""
        return served(info, self.known)

    def everything(self) -> list[tuple[str, str]]:
        """(run id, workflow) of every run to take now: a full look (``--once``), and
        the runs past their deadline (``takeable``), to be cancelled."""
        self.expiry.due()
        admit = admitter(self.store, self.known, self.lease)  # queues: limits in the store
        found = dict(candidates(self.store.listing, self.known, self.owner, None, admit=admit))
        t = now()
        pick = _Picker(self.owner, None, found.__contains__)
        for info in self.store.takeable(list(self.known), at=t):
            name, past = self.served(info), info.deadline is not None and info.deadline <= t
            if past and name is not None and pick.takes(info):  # (cancelled, not started)
                found[info.run_id] = name
        return list(found.items())

    def take(
        self, free: int, busy: Collection[str], within: float
    ) -> tuple[list[tuple[str, str]], list[float]]:
        """At most ``free`` runs to take now, none of ``busy`` (this worker's own runs
        in progress), and the wake times due within ``within`` seconds."""
        soon: list[float] = []
        self.expiry.due()
        admit = admitter(self.store, self.known, self.lease)  # queues: a look's admissions
        dead = self.deaths is not None and self.deaths.newly_gone()  # a local worker died
        if self.first or dead:
            self.first = False
            found = list(
                candidates(
                    self.store.listing,
                    self.known,
                    self.owner,
                    free,
                    busy.__contains__,
                    wakes=soon,
                    within=within,
                    admit=admit,
                )
            )
            if dead and self.deaths is not None:
                self.deaths.handled(complete=len(found) < free)
            return found, soon
        t = now()
        pick = _Picker(self.owner, free, busy.__contains__)
        taken: list[tuple[str, str]] = []
        offered: Iterable[RunInfo] = self.store.takeable(list(self.known), at=t + within)
        if self.queued:
            offered = by_priority(offered)  # queues: higher priority first, every one read
        for info in offered:
            if pick.full() and not self.queued:
                break  # (read no more than it takes: under a backlog, a look costs its slots)
            name = self.served(info)
            if name is None:
                continue  # (a backend may answer more than asked: it is a hint)
            if not self._now_or_soon(info, t, soon):
                continue
            w = self.known[name]
            if not pick.full() and pick.takes(info, lambda: admit(info, w)):  # noqa: B023
                taken.append((info.run_id, name))
        return taken, soon

    @staticmethod
    def _now_or_soon(info: RunInfo, t: float, soon: list[float]) -> bool:
        """Whether a run the store answered is to be taken at ``t``: past its deadline
        (to be cancelled), due, or running with its lease free; a wake time still to
        come goes to ``soon``."""
        if info.deadline is not None and info.deadline <= t:
            return info.status in ("running", "waiting")
        if info.status == "waiting":
            if info.wake_at is not None and info.wake_at > t:
                soon.append(info.wake_at)
            return info.wake_at is not None and info.wake_at <= t
        if info.status != "running":
            return False
        gone = info.owner is not None and owner_gone(info.owner)  # a dead process's lease
        return (info.lease_expires or 0.0) <= t or gone
