"""The seam between the runner and storage: Checkpoint, RunInfo, the Store protocols,
and the rules every store applies before any I/O (run ids, names, listing filters).
The stored form of a checkpoint is ``document``'s."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn, Protocol, runtime_checkable

from .errors import (
    ConflictError,
    CorruptCheckpointError,
    InvalidRunIdError,
    StateTooLargeError,
)

MAX_RUN_ID = 255
_FORBIDDEN = frozenset("/\\?#")
_SUSPECT = re.compile(r"[/\\?#\x00-\x1f\x7f-\x9f\ud800-\udfff]|\A\.\.?\Z|\A\s|\s\Z")
"""Matches every run id ``check_run_id`` refuses for its characters (a fast first look)."""
STATUSES = ("running", "waiting", "failed", "completed", "cancelled")
ENDED = ("completed", "cancelled")
"""Statuses after which nothing more runs (retention deletes these)."""


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
    status: str | None = None
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
    error: Mapping[str, Any] | None = None
    """The last failure of the next step: {"type", "message", "step", "attempt", "at"}."""
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
    status: str | None = None
    """As in Checkpoint; None for an unreadable checkpoint."""
    workflow: str | None = None
    lease_expires: float | None = None
    owner: str | None = None
    waiting_for: str | None = None
    attempt: int = 1
    wake_at: float | None = None
    """When a waiting run is due (a sleep's wake time, a signal's deadline)."""


def matches(
    info: RunInfo,
    status: str | None,
    workflow: str | None,
    updated_before: float | None,
    due_before: float | None = None,
) -> bool:
    """The filters of ``list_runs``, for stores that apply them while reading. An
    unreadable run matches only a listing without filters. ``due_before``: runs whose
    ``wake_at`` is at or before it (waiting runs due by then)."""
    if info.error is not None:
        return status is None and workflow is None and updated_before is None and due_before is None
    return (
        (status is None or info.status == status)
        and (workflow is None or info.workflow == workflow)
        and (updated_before is None or (info.updated_at or 0) < updated_before)
        and (due_before is None or (info.wake_at is not None and info.wake_at <= due_before))
    )


def check_filters(status: str | None, limit: int | None) -> None:
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int, not {limit!r}")


@runtime_checkable
class Store(Protocol):
    """Where checkpoints live. The runner needs only these two methods.

    ``load(run_id)`` returns the stored checkpoint, or ``None`` when the run has
    none. A checkpoint that exists but cannot be read raises
    ``CorruptCheckpointError``: never a silent fresh start.

    ``save(checkpoint)`` is conditional. With ``etag=None`` it succeeds only if
    the run has no checkpoint; otherwise only if the stored etag still equals
    ``checkpoint.etag``. A mismatch raises ``ConflictError`` and writes nothing.
    Once ``save`` returns, the checkpoint is durable (as the backend defines it)
    and is returned with its new etag; a reader never sees it half-written. A
    save whose outcome the store could not see is settled by reading back: it
    never reports "nothing was written" about a write that landed.

    Every store refuses, before writing anything, a state whose JSON (with the
    running step's call results) is over its ``max_state_bytes`` (``MAX_STATE_BYTES``
    unless configured): ``StateTooLargeError``, the same limit in every store.

    The stores of this package also offer ``delete(run_id, *, etag=None)``,
    ``list_runs(*, status=None, workflow=None, updated_before=None,
    due_before=None, limit=None)`` (filters applied by the backend, results
    streamed, no state read), ``run_info(run_id)`` (one run's ``RunInfo``, or
    None: its metadata without its state) and ``close()``, and are context
    managers. They also read and write a run's *head* -- its checkpoint but its
    data (the state and the running step's journal) -- alone (``HeadStore``):
    ``load_head(run_id)`` and ``save_head(checkpoint)``, what a signal, a
    cancellation and ``Workflow.start`` use.
    """

    def load(self, run_id: str) -> Checkpoint | None: ...

    def save(self, checkpoint: Checkpoint) -> Checkpoint: ...


@runtime_checkable
class AsyncStore(Protocol):
    """The same contract as ``Store``, awaited; implementations never block the loop."""

    async def load(self, run_id: str) -> Checkpoint | None: ...

    async def save(self, checkpoint: Checkpoint) -> Checkpoint: ...


@runtime_checkable
class HeadStore(Store, Protocol):
    """A ``Store`` that reads and writes a run's head -- its checkpoint but its data --
    without its data: a change from outside (a signal, a cancellation) then costs the
    head, whatever the state's size. Every store of this package is one; a store of
    ``load`` and ``save`` alone still works, read and written whole.

    ``load_head(run_id)`` returns the stored checkpoint but its data: ``state`` is
    ``NOT_READ`` (a stand-in that refuses to be read) and ``calls`` is empty; every
    other field is as ``load`` gives it, the etag too. ``None``: the run has no
    checkpoint. Unreadable fields raise ``CorruptCheckpointError``, as ``load``.

    ``save_head(checkpoint)`` saves every field of ``checkpoint`` but its data, on top
    of the stored version at ``checkpoint.etag``, whose state and journal stay as they
    are (``checkpoint.state`` and ``.calls`` are ignored). Conditional like ``save``
    (a stored etag other than ``checkpoint.etag``, or no run: ``ConflictError``,
    nothing written; ``etag=None``: ``ValueError``, a head changes a stored run), as
    durable, and settled the same way when its answer is lost. It returns the
    checkpoint as stored, its state ``NOT_READ``, its calls empty, with its new etag.
    """

    def load_head(self, run_id: str) -> Checkpoint | None: ...

    def save_head(self, checkpoint: Checkpoint) -> Checkpoint: ...


@runtime_checkable
class AsyncHeadStore(AsyncStore, Protocol):
    """``HeadStore`` for asyncio: the same contract, awaited."""

    async def load_head(self, run_id: str) -> Checkpoint | None: ...

    async def save_head(self, checkpoint: Checkpoint) -> Checkpoint: ...


def head_of(cp: Checkpoint) -> Checkpoint:
    """``cp`` as ``load_head`` gives it: its data not read."""
    return evolve(cp, state=NOT_READ, calls=())


def head_etag(cp: Checkpoint) -> str:
    """The etag a ``save_head`` changes; ``ValueError`` if there is none."""
    if cp.etag is None:
        raise ValueError(
            f"run {cp.run_id!r}: save_head changes a stored run's head and needs the etag "
            "it was read at (load_head); save() creates a run"
        )
    return cp.etag


MAX_STATE_BYTES = 64 * 1024 * 1024
"""The default limit of a run's state as JSON (``DURABLE_MAX_STATE_BYTES``)."""


def state_limit(limit: object) -> int:
    """A store's ``max_state_bytes=``, checked (None: ``MAX_STATE_BYTES``)."""
    if limit is None:
        return MAX_STATE_BYTES
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"max_state_bytes must be a positive int of bytes, not {limit!r}")
    return limit


def check_size(run_id: str, size: int, limit: int) -> None:
    """``StateTooLargeError`` when a state of ``size`` bytes of JSON is over ``limit``."""
    if size > limit:
        raise StateTooLargeError(
            f"run {run_id!r}: its state would be {size:,} bytes of JSON, over the limit of "
            f"{limit:,} (the same in every store); nothing was saved and the previous "
            "checkpoint stays. Keep large data (documents, files) outside the state -- a "
            "file path, a blob URL -- or raise DURABLE_MAX_STATE_BYTES (max_state_bytes=)",
            run_id=run_id,
            size=size,
            limit=limit,
        )


def check_run_id(run_id: object) -> str:
    """Apply the run-id rules shared by every store (Cosmos DB's id rules), before any I/O."""
    if not isinstance(run_id, str):
        raise InvalidRunIdError(
            f"run id must be a str, not {type(run_id).__name__}: pass the id as text",
            run_id=repr(run_id),
        )
    if 1 <= len(run_id) <= MAX_RUN_ID and _SUSPECT.search(run_id) is None:
        return run_id  # every save checks it: the common case in one regex search
    problem = None
    if not 1 <= len(run_id) <= MAX_RUN_ID:
        problem = f"it has {len(run_id)} characters; use 1 to {MAX_RUN_ID}"
    elif bad := sorted(_FORBIDDEN.intersection(run_id)):
        problem = f"it contains {' '.join(bad)}; none of / \\ ? # may appear"
    elif any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in run_id):
        problem = "it contains a control character"
    elif run_id in (".", ".."):
        # Cosmos DB addresses items by URL path, where these two are path
        # segments (".." reaches the container): no client can read such an item.
        problem = "'.' and '..' cannot be addressed in Cosmos DB's REST paths"
    elif run_id != run_id.strip():
        # The Cosmos SDK refuses ids that end in whitespace; a leading one is as
        # invisible in every listing. Refused everywhere, so no id works only locally.
        problem = "it starts or ends with whitespace; strip it"
    elif any(0xD800 <= ord(c) <= 0xDFFF for c in run_id):
        problem = "it contains a lone surrogate (not valid unicode text)"
    if problem:
        shown = run_id if len(run_id) <= 60 else run_id[:57] + "..."
        quoted = ascii(shown) if "surrogate" in problem else repr(shown)
        raise InvalidRunIdError(
            f"invalid run id {quoted}: {problem} (the same rules hold in every store)",
            run_id=run_id,
        )
    return run_id


def check_name(name: object, what: str) -> str:
    """Step, workflow and signal names: non-empty text without control characters."""
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= MAX_RUN_ID
        or any(ord(c) < 0x20 or 0xD800 <= ord(c) <= 0xDFFF for c in name)
    ):
        raise ValueError(
            f"{what} must be a str of 1 to {MAX_RUN_ID} printable characters, not {name!r}"
        )
    return name


def corrupt_error(run_id: str, where: str, why: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"checkpoint of run {run_id!r} at {where} is unreadable: {why}. It was not "
        "treated as a fresh start (that would repeat every finished step); restore it "
        "or delete the run to start over",
        run_id=run_id,
    )


def why_lost(expected: str | None, missing: bool) -> str:
    """Why a conditional save (made on ``expected``, None: a new run) lost."""
    if expected is None:
        return "it already has a checkpoint"
    if missing:
        return "its checkpoint was deleted meanwhile"
    return "another writer saved it after you loaded it"


def conflict(run_id: str, expected: str | None, missing: bool) -> ConflictError:
    """The ConflictError of a conditional save that lost, saying why."""
    return ConflictError(
        f"run {run_id!r} was not saved: {why_lost(expected, missing)}. Nothing was "
        "written; reload it and "
        "retry, or run one worker per run id",
        run_id=run_id,
    )


def delete_conflict(run_id: str) -> ConflictError:
    """The ConflictError of a conditional delete whose run changed since it was listed."""
    return ConflictError(
        f"run {run_id!r} was not deleted: it changed since you read it (resumed or "
        "saved by a worker). Nothing was deleted; list it again to decide",
        run_id=run_id,
    )
