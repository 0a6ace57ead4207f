"""What a run is, as every store keeps it: ``Checkpoint`` (one run's progress),
``RunInfo`` (a run as a listing shows it: never its state), the statuses, and the
stand-in state of a checkpoint read without its data (``load_head``). The stored form
of a checkpoint is ``document``'s; the rules a store applies before any I/O are
``rules``'."""

from __future__ import annotations

import time as _time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NoReturn, NotRequired, Required, TypedDict, get_args

from . import attempts
from .attempts import Attempt
from .lease import owner_label

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


class CallRecord(TypedDict, total=False):
    """One record of a running step's journal (``Checkpoint.calls``; the shapes are
    ``runner.journal``'s): a durable operation by its place -- ``i`` in its task's scope
    ``task`` (absent: the step's own), or its ``key`` -- and what it recorded. Stored as
    JSON, so read as a mapping: a record of an earlier version may lack an optional key."""

    i: Required[int]
    name: Required[str]
    task: str
    """The task scope that made it (``runner.tasks``); absent for the step's own."""
    key: str
    """A keyed call's key: replayed by it whatever task or order makes it."""
    kind: Literal["sleep", "wait", "receive", "patch", "start_child", "await_child"]
    """Absent for a call (``call``); else the operation."""
    t0: float
    """When a finished call began (seconds since the epoch; saved with its result)."""
    at: float
    """When it finished (seconds since the epoch)."""
    result: Any
    """A call's (or a receive's) result, JSON: the one value of a record the codec encodes."""
    attempt: int
    """A call being retried: the attempt it is at, ``first`` where its round began,
    ``round`` the step attempt that round began at."""
    first: int
    round: int
    step_attempt: int
    """The attempt of the step that recorded it (earlier versions' records have none)."""
    wake_at: float
    """A sleep's wake time."""
    deadline: float | None
    """A wait's or a receive's deadline (None: none)."""
    timed_out: bool
    """A receive whose deadline passed with no message."""
    seq: int
    """A receive's message, by its ``seq`` in the topic."""
    outcome: dict[str, Any]
    """How an awaited child ended (``runner.children``)."""


class Message(TypedDict):
    """A message waiting in a mailbox topic (``seam.mailbox``)."""

    seq: int
    """Its place in its topic: the topic's ``sent`` when it was sent."""
    at: float
    payload: Any


class Topic(TypedDict):
    """One topic of a mailbox: how many messages it was ever sent, those still pending."""

    sent: int
    pending: list[Message]


class MailboxRecord(TypedDict):
    """A run's mailbox as its head keeps it (``Checkpoint.mailbox``; ``seam.mailbox``):
    its topics, and the hashed idempotency keys of the last keyed sends, each with the
    ``seq`` of its message."""

    topics: NotRequired[dict[str, Topic]]
    keys: NotRequired[dict[str, int]]


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
    calls: tuple[CallRecord, ...] = ()
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
    mailbox: MailboxRecord | None = None
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
    # -- the attempt log (seam.attempts) --
    attempt_log: tuple[Sequence[Any], ...] = ()
    """When each attempt of the running step (and of the step completed just before)
    began and how it ended, bounded: see ``seam.attempts``. Empty: none recorded."""

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

    def next_words(self, now: float | None = None) -> str | None:
        """Where a run that has not ended stands, in words (None: it has ended): ``now:``
        the attempt running now, or ``next:`` the one that runs next. ``attempt`` counts
        the starts of the next step, so a run that does not run now starts attempt
        ``attempt + 1`` (after a release by a stopping worker the count was given back,
        so that is the same number again). The round of retries is named only while the
        step is being retried after a recorded failure."""
        if self.status in ("completed", "cancelled"):
            return None
        step = self.step + 1
        t = _time.time() if now is None else now
        owner = self.owner
        held = owner is not None and self.lease_expires is not None and self.lease_expires > t
        if self.status == "running" and owner is not None and held and self.attempt >= 1:
            words = f"now: step {step}, attempt {self.attempt} (held by {owner_label(owner)})"
        else:
            words = f"next: step {step}, attempt {self.attempt + 1}"
            log = self.attempts_of(step)
            if log and log[-1].how == "released" and log[-1].number == self.attempt + 1:
                words += " (its worker stopped and gave the run back: a worker runs it again)"
            elif self.status == "running" and self.attempt == 0:
                words += " (not started yet: a worker takes it)"
        error = self.error
        retrying = self.status == "running" and error is not None and error.get("step") == step
        if retrying and error is not None and self.attempt > self.first_attempt:
            words += (
                f" -- retrying after {error.get('type')} (this round of retries began at "
                f"attempt {self.first_attempt})"
            )
        return words

    def attempts_of(self, step: int) -> tuple[Attempt, ...]:
        """The records of ``attempt_log`` (``seam.attempts``) of step ``step``."""
        return attempts.of_step(self.attempt_log, step)

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
    """What a waiting run waits for: a signal's name, or ``message:TOPIC`` for a message
    on TOPIC (``receiving`` names the topic alone); None: a sleep, or not waiting."""
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
    # -- the mailbox --
    receiving: str | None = None
    """The topic whose next message a waiting run's ``receive`` waits for."""


MESSAGE = "message:"
"""How ``RunInfo.waiting_for`` names a wait for a message: ``message:TOPIC``."""


def waits_for(waiting_for: str | None, receiving: str | None) -> str | None:
    """``RunInfo.waiting_for`` of a run: its signal, or its message wait."""
    return waiting_for if receiving is None else f"{MESSAGE}{receiving}"


def head_of(cp: Checkpoint) -> Checkpoint:
    """``cp`` as ``load_head`` gives it: its data not read."""
    return evolve(cp, state=NOT_READ, calls=())
