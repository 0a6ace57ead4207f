"""What a run is, as every store keeps it: ``Checkpoint`` (one run's progress),
``RunInfo`` (a run as a listing shows it: never its state), the statuses, and the
stand-in state of a checkpoint read without its data (``load_head``). The stored form
of a checkpoint is ``document``'s; the rules a store applies before any I/O are
``rules``'."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NoReturn, TypedDict, get_args

Status = Literal["running", "waiting", "failed", "completed", "cancelled"]
"""Where a run is: ``running`` (to run, or running), ``waiting`` (for a signal, a
message, a child or a time), ``failed`` (its step raised past its retries; it can be
resumed), ``completed`` (final) or ``cancelled``."""
STATUSES: tuple[Status, ...] = get_args(Status)
ENDED: tuple[Status, ...] = ("completed", "cancelled")
"""Statuses after which nothing more runs (until a cancelled run is resumed)."""
EXPIRES: tuple[Status, ...] = ("completed",)
"""What ``finished_ttl`` deletes, on every store alike: a completed run, which is final.
A cancelled or failed run can be resumed (``resume_run``), so it stays until it is
deleted or pruned: Cosmos DB's item TTL, once stamped on a run's snapshot, cannot be
taken back by a resume, and the other stores keep the same rule."""


class ErrorRecord(TypedDict):
    """The last failure of a run's next step, as ``Checkpoint.error`` keeps it."""

    type: str
    """The exception's class, with its module unless a builtin (``ValueError``)."""
    message: str
    step: int
    attempt: int
    at: float


class ForkedFrom(TypedDict):
    """Where a run made by ``fork_run`` came from, as ``Checkpoint.forked_from`` keeps it."""

    run: str
    step: int
    call: int | None
    at: float


class ResumeRecord(TypedDict):
    """How a run had ended before a ``resume_run``, one per resume (``Checkpoint.resumed``)."""

    at: float
    status: Status
    step: int
    attempt: int
    error: ErrorRecord | None
    cancel_reason: str | None


@dataclass(frozen=True)
class Lease:
    """Who holds a run and until when (``Checkpoint.lease``): ``owner`` None is nobody."""

    owner: str | None = None
    expires: float | None = None


@dataclass(frozen=True)
class Placement:
    """Where a started run waits for a worker (``Checkpoint.placement``): its queue
    (``workers.queues``), its priority there (higher first), its partition."""

    queue: str | None = None
    priority: int | None = None
    partition: str | None = None


@dataclass(frozen=True)
class Lineage:
    """Where a run comes from (``Checkpoint.lineage``): the run that started it as a
    child, the run it was forked from, and the ends it was resumed from."""

    parent: str | None = None
    forked_from: ForkedFrom | None = None
    resumed: tuple[ResumeRecord, ...] = ()


@dataclass(frozen=True)
class Checkpoint:
    """One run's progress: ``step`` is the index of the last completed step (-1: none yet)."""

    run_id: str
    step: int
    state: dict[str, Any]
    etag: str | None = None
    steps: tuple[str, ...] = ()
    """Names of the completed steps, in order; a resume checks them against its step list."""
    done: bool = False
    """True once the run completed: the same as ``status == "completed"``."""
    attempt: int = 1
    """How many times the next step (index ``step + 1``) has been started."""
    updated_at: float | None = None
    """Seconds since the epoch of the last save. A store stamps the current time when
    this is None (the runner always passes None); a given time is kept, so that a
    migration between stores keeps each run's age."""
    started_at: float | None = None
    """Seconds since the epoch of the run's first save, kept for its life: no claim,
    heartbeat or step moves it, so a queue takes its runs in the order they were
    started (``workers.queues``) and a run whose worker died keeps its place. A store
    stamps it at a save that has none (a run's creation); a document written before
    it existed reads its last-saved time instead."""
    status: Status | None = None
    """``running``, ``waiting`` (for ``waiting_for`` or until ``wake_at``), ``failed``,
    ``completed`` or ``cancelled``.
    None: derived from ``done``. When given, it wins and ``done`` follows it."""
    workflow: str | None = None
    """The name of the ``Workflow`` that started the run (None: a plain ``run``)."""
    owner: str | None = None
    """Who holds the run's lease until ``lease_expires`` (None: nobody)."""
    lease_expires: float | None = None
    signals: Mapping[str, Any] = field(default_factory=dict)
    """Signals delivered to the run: name -> payload. Kept for the run's life."""
    waiting_for: str | None = None
    """The signal a ``waiting`` run waits for."""
    error: ErrorRecord | None = None
    """The last failure of the next step."""
    first_attempt: int = 1
    """The attempt at which the next step's current round of retries began; a
    ``Retry(attempts=n)`` is used up when ``attempt - first_attempt + 1 == n``."""
    trace: str | None = None
    """The W3C traceparent of the run's first attempt, so later attempts link to it."""
    calls: tuple[Mapping[str, Any], ...] = ()
    """The journal of the running step (the next one, index ``step + 1``): one record
    per call, sleep or wait it made, by its index ``i`` (see ``runner.journal``). Kept
    while the step is unfinished; dropped when it completes."""
    wake_at: float | None = None
    """When a ``waiting`` run is due: a sleep's wake time, or a signal's deadline."""
    cancel_reason: str | None = None
    """Why a ``cancelled`` run was cancelled, as ``cancel_run`` was told."""
    # -- fork (runs.fork) --
    forked_from: ForkedFrom | None = None
    """A run made by ``fork_run``: the source run, its step and call. None: not a fork."""

    # -- lifecycle: versions and resume -------------------------------------------------
    version: str | None = None
    """The version of the workflow's code the run runs on (``Workflow(version=)``),
    pinned by its start or first claim, moved only by ``upgrade_run``. None: not
    pinned yet (a run started by name, or before versions existed). See
    ``runner.versions``."""
    resumed: tuple[ResumeRecord, ...] = ()
    """One record per ``resume_run`` of the run, oldest first: how it had ended, so an
    earlier failure stays visible after the run is running again. See ``runs.resume``."""

    # -- the mailbox (seam.mailbox, runner.mailbox, runs.mailbox) --
    mailbox: Mapping[str, Any] | None = None
    """Messages sent to the run (``send_message``) and not yet consumed, per topic, with
    the idempotency keys it remembers (``seam.mailbox``). None: never sent any."""
    receiving: str | None = None
    """The topic whose next message a ``waiting`` run's ``receive`` waits for."""

    # -- run deadlines --------------------------------------------------------------------
    deadline: float | None = None
    """When the run is cancelled if it has not finished (seconds since the epoch; None:
    never): ``Workflow(timeout=)`` or ``start(..., timeout=)``, set when the run begins."""
    # -- queues (workers.queues): set when the run is started, kept for its life --
    queue: str | None = None
    """The queue whose limits the run is taken under (None: its workflow's, if any)."""
    priority: int | None = None
    """Among the runs of its queue, higher is taken first (None: 0)."""
    partition: str | None = None
    """A queue's partition key: each partition has the queue's limits of its own."""
    # -- child runs (runner.children) --
    parent: str | None = None
    """The run that started this one with ``start_child``: told when it ends."""

    # -- the fields by concern, read together (the constructor takes them one by one) --
    @property
    def lease(self) -> Lease:
        """``owner`` and ``lease_expires``."""
        return Lease(self.owner, self.lease_expires)

    @property
    def placement(self) -> Placement:
        """``queue``, ``priority`` and ``partition``."""
        return Placement(self.queue, self.priority, self.partition)

    @property
    def lineage(self) -> Lineage:
        """``parent``, ``forked_from`` and ``resumed``."""
        return Lineage(self.parent, self.forked_from, self.resumed)

    def __post_init__(self) -> None:
        status = self.status or ("completed" if self.done else "running")
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "done", status == "completed")


_FIELDS = frozenset(f.name for f in fields(Checkpoint))


class StateNotRead(dict[str, Any]):
    """The ``state`` of a checkpoint read without it (``load_head``): a stand-in that
    refuses to be read, so that code expecting the run's state learns at once that it
    was not read, instead of finding an empty one. ``save`` refuses such a checkpoint
    (it would replace the state); ``save_head`` is what saves it."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "this checkpoint was read without its state (load_head: what send_signal, "
            "cancel_run and Workflow.start read); load the run (store.load) to read its state"
        )

    __getitem__ = __iter__ = __len__ = __contains__ = get = keys = values = items = _refuse
    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = _refuse
    __ior__ = __or__ = copy = _refuse

    def __repr__(self) -> str:
        return "<state not read>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (StateNotRead, ())


NOT_READ = StateNotRead()
"""The state of every checkpoint that ``load_head`` and ``save_head`` return."""


def evolve(cp: Checkpoint, **changes: Any) -> Checkpoint:
    """``dataclasses.replace(cp, **changes)``, as fast as a copy: the runner makes a
    few checkpoints per step, and ``replace`` re-runs ``__init__`` field by field. The
    result is the same: ``__post_init__``'s rule for ``status`` and ``done`` is applied
    when either changes, the other fields are taken as given."""
    if not changes.keys() <= _FIELDS:
        raise TypeError(f"Checkpoint has no field {sorted(changes.keys() - _FIELDS)}")
    new = object.__new__(Checkpoint)
    values = new.__dict__
    values.update(cp.__dict__)
    values.update(changes)
    if "status" in changes or "done" in changes:
        new.__post_init__()
    return new


@dataclass(frozen=True)
class RunInfo:
    """A run as a store lists it (for operators and recovery): never its state."""

    run_id: str
    step: int
    step_name: str | None
    done: bool
    updated_at: float | None
    size: int
    etag: str | None
    error: str | None = field(default=None)
    """Set when the stored checkpoint cannot be read; the other fields are then best effort."""
    status: Status | None = None
    """As in Checkpoint; None for an unreadable checkpoint."""
    workflow: str | None = None
    lease_expires: float | None = None
    owner: str | None = None
    waiting_for: str | None = None
    attempt: int = 1
    wake_at: float | None = None
    """When a waiting run is due (a sleep's wake time, a signal's deadline)."""
    # -- lifecycle: versions
    version: str | None = None
    """The version of the workflow's code the run is pinned to (None: not pinned)."""
    # -- run deadlines --------------------------------------------------------------------
    deadline: float | None = None
    """When the run is cancelled if it has not finished (None: never)."""
    # -- queues (workers.queues) --
    queue: str | None = None
    priority: int | None = None
    partition: str | None = None
    started_at: float | None = None
    """When the run was started (``Checkpoint.started_at``): a queue's order."""


def head_of(cp: Checkpoint) -> Checkpoint:
    """``cp`` as ``load_head`` gives it: its data not read."""
    return evolve(cp, state=NOT_READ, calls=())
