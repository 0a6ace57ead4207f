"""Discovery: which runs a worker's look takes.

A look asks the store for the runs a worker could take now (``Store.takeable``):
running runs whose lease is absent or expired, waiting runs whose timer or signal
deadline is due -- filtered by the backend (a Cosmos DB query on status and lease
expiry; FileStore's index of runnable runs, ``stores/file/due_index``), so its cost
grows with the runs to take, not with the runs that live workers hold. What the
store answers is a hint: each run's lease is checked here again (``_Picker``) and at
its claim, by a conditional save.

The worker's first look is a full one (``candidates``: every running run of its
workflows): it also takes back, at once, runs whose lease is still running but whose
holder is visibly gone (a process of this machine that died) or is this worker's own
stable ``--owner`` (a restarted worker) -- which a filter on lease expiry would leave
until the lease expires. Later looks are cheap; a lease of a worker that dies later is
taken over when it expires (at most ``lease`` seconds, the documented bound).

``take`` also returns the wake times (and signal deadlines) due within the next
interval, so the worker wakes a timer at its time without another look.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..runner.clock import now
from ..runner.workflow import Workflow
from ..seam.checkpoint import RunInfo
from ..seam.store import Store
from .queues import admitter, by_priority
from .recovery import _Picker, candidates
from .retention import Expiry


class Look:
    """One worker's looks at its store for the runs of ``known`` workflows."""

    def __init__(
        self,
        store: Store,
        known: Mapping[str, Workflow],
        owner: str | None,
        lease: float = 60.0,
    ) -> None:
        self.store, self.known, self.owner, self.lease = store, known, owner, lease
        self.first = True
        self.expiry = Expiry(store)  # retention: finished_ttl on stores without TTL

    def served(self, info: RunInfo) -> str | None:
        """The run's workflow if this worker serves it: a known name, and the version
        the run is pinned to is the code's (or none yet: ``runner.versions``). What the
        store answers is a hint; a run of another version is left to its workers."""
        name = info.workflow
        if name is None or name not in self.known:
            return None
        if info.version is not None and info.version != self.known[name].version:
            return None
        return name

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
        if self.first:
            self.first = False
            found = candidates(
                self.store.listing,
                self.known,
                self.owner,
                free,
                busy.__contains__,
                wakes=soon,
                within=within,
                admit=admit,
            )
            return list(found), soon
        t = now()
        pick = _Picker(self.owner, free, busy.__contains__)
        taken: list[tuple[str, str]] = []
        # Queues: higher priority first (``by_priority``; unqueued runs have none).
        for info in by_priority(self.store.takeable(list(self.known), at=t + within)):
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
        return info.status == "running" and (info.lease_expires or 0.0) <= t
