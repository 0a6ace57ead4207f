"""Errors of durable-steps.

    DurableError
    ├── ConflictError           another writer saved the run first (stale etag)
    │   ├── RunLeasedError      another live worker holds the run's lease
    │   └── LeaseLostError      this worker's lease was taken over while it worked
    ├── RunWaiting              the run waits for a signal or a timer (not a failure)
    ├── RunCancelledError       the run was cancelled (cancel_run): nothing more runs
    ├── RunFailedError          the awaited run failed (wait_for_result)
    ├── TooManyAttemptsError    a step was started max_attempts times, none finished
    ├── SignalTimeoutError      a signal's deadline passed before it came (in the step)
    │   └── MessageTimeoutError a receive's deadline passed with no message (in the step)
    ├── RunNotFoundError        (also a LookupError) the run has no checkpoint
    ├── StepNotKeptError        (also a LookupError) history keeps no such step or call
    ├── StepMismatchError       the completed part of the step list changed
    │   └── NondeterminismError a step's replay departed from its recorded calls
    ├── CorruptCheckpointError  a stored checkpoint exists but cannot be read
    ├── CodecError              a value is encrypted with a key this store does not have
    ├── InvalidRunIdError       (also a ValueError) breaks the run-id rules
    ├── InvalidStateError       (also a TypeError) state is not plain JSON
    ├── StateTooLargeError      the state is over the size limit (the same in every store)
    ├── ConfigurationError      the environment does not describe a usable store
    │   └── MissingExtraError   (also an ImportError) an optional extra is not installed
    └── StoreError              the backend failed (unreachable, auth, throttled)

Every message says what happened and what to do next. Errors keep their
attributes through pickling (they cross process boundaries in tests and CLIs).

At the end, apart from the tree: the runner's control-flow exceptions (``Suspend``,
``StepInterrupted``, ``StopRequested``), which never leave the library.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


class DurableError(Exception):
    """Base class of every error raised by durable-steps."""

    def __init__(self, message: str, **attrs: Any) -> None:
        super().__init__(message)
        self._attrs = attrs
        for name, value in attrs.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), str(self), self._attrs))


def _rebuild(cls: type[DurableError], message: str, attrs: dict[str, Any]) -> DurableError:
    return cls(message, **attrs)


class ConflictError(DurableError):
    """A conditional save lost: the stored checkpoint is not the one the caller read."""

    run_id: str


class RunLeasedError(ConflictError):
    """Another worker holds a live lease on the run; nothing ran and nothing was written."""

    run_id: str
    owner: str
    expires_at: float


class LeaseLostError(ConflictError):
    """This worker's lease was taken by another while it worked; its step was not saved."""

    run_id: str


class RunWaiting(DurableError):
    """The run is suspended until ``signal`` is delivered (``send_signal``), a message
    on ``topic`` is sent (``send_message``) or, for a ``sleep`` or a wait with a
    deadline, until ``wake_at`` (seconds since the epoch; ``wake_time``: the same moment
    as a datetime); its lease is released and its completed steps are kept."""

    run_id: str
    signal: str | None
    wake_at: float | None
    topic: str | None

    @property
    def wake_time(self) -> datetime | None:
        """``wake_at`` as a timezone-aware datetime in UTC (None: no wake time)."""
        wake_at = getattr(self, "wake_at", None)
        return None if wake_at is None else datetime.fromtimestamp(wake_at, UTC)


class RunCancelledError(DurableError):
    """The run was cancelled (``cancel_run``): it starts no other step or call."""

    run_id: str
    reason: str | None


class RunFailedError(DurableError):
    """The run that ``wait_for_result`` awaited failed: ``error_type`` and
    ``error_message`` are the recorded error's (the run's status is ``failed``)."""

    run_id: str
    error_type: str | None
    error_message: str | None


class TooManyAttemptsError(DurableError):
    """A claim found step ``step`` (``step_name``) started ``attempts`` times in this
    round without recording anything new -- its processes killed, its leases lost --
    which is its workflow's ``max_attempts`` (attempts that recorded a call do not
    count): instead of starting it again, the run was saved as ``failed`` with this
    error. An explicit ``run`` starts a new round."""

    run_id: str
    step: int
    step_name: str
    attempts: int


class SignalTimeoutError(DurableError):
    """Raised in a step by ``wait_for_signal(name, timeout=...)`` when the run resumed
    after the deadline without the signal (and no ``default`` was given)."""

    run_id: str
    signal: str
    deadline: float


class MessageTimeoutError(SignalTimeoutError):
    """Raised in a step by ``receive(topic, timeout=...)`` when the run resumed after
    the deadline with no message on ``topic`` (and no ``default`` was given); ``signal``
    is the topic too, so that code catching ``SignalTimeoutError`` catches this."""

    topic: str


class RunNotFoundError(DurableError, LookupError):
    """The run has no checkpoint in the store."""

    run_id: str


class StreamNotFoundError(DurableError, LookupError):
    """The run has no stream ``stream`` and, as far as the reader asked, will not have
    one: it ended without writing it, or the reader did not ask to wait for it
    (``read_stream(wait=True)``). ``streams``: the names of the streams it has."""

    run_id: str
    stream: str
    streams: list[str]


class StepNotKeptError(DurableError, LookupError):
    """The run's history keeps no checkpoint after that step, or the step's journal
    has fewer recorded calls than asked for (``load_at``, ``fork_run``)."""

    run_id: str
    step: int


class StepMismatchError(DurableError):
    """A resumed run was given steps whose completed part differs from the checkpoint."""

    run_id: str


class NondeterminismError(StepMismatchError):
    """A step's replay departed from its record: it asked for a call the record has
    under another name at that place (or key), or it completed -- or suspended --
    while recorded operations of it were never asked for. Going on would run a
    recorded call again (an email sent twice) or lose what it returned, so the run
    is failed with its record kept: fix the code (or mark the step
    ``replay="lenient"``), then ``resume_run``. ``step``/``step_name`` name the step;
    ``recorded`` lists the calls its record holds, ``asked`` the calls this attempt
    asked for (``"name (task/i)"``, ``"name [key]"``). A subclass of
    ``StepMismatchError``: code catching that catches this too."""

    run_id: str
    step: int
    step_name: str
    recorded: list[str]
    asked: list[str]


class CorruptCheckpointError(DurableError):
    """A checkpoint exists but cannot be read; never treated as a fresh start."""

    run_id: str


class CodecError(DurableError):
    """A stored value is encrypted with a key this store does not have (or the codec it
    names is not installed); nothing was read or written. ``key_id`` names the key."""

    run_id: str
    key_id: str | None


class InvalidRunIdError(DurableError, ValueError):
    """The run id breaks the rules shared by every store."""

    run_id: str


class InvalidStateError(DurableError, TypeError):
    """The state holds something that is not plain JSON."""

    run_id: str


class StateTooLargeError(DurableError):
    """The state (with the running step's call results) is larger than the store's
    limit, the same in every store (64 MiB of JSON unless configured)."""

    run_id: str
    size: int
    limit: int


class ConfigurationError(DurableError):
    """The environment (or mapping) given to store_from_env() is not usable."""

    variable: str


class MissingExtraError(ConfigurationError, ImportError):
    """An optional dependency is not installed; the message has the pip command."""

    variable: str


class StoreError(DurableError):
    """The backend failed: unreachable, refused the credentials, throttled, ..."""

    status_code: int | None


# -- the errors every store raises alike -------------------------------------------


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


def damaged_value(run_id: str, why: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"run {run_id!r}: an encoded value is damaged ({why}); it was not used and nothing "
        "was overwritten. Restore the run, or delete it to start over",
        run_id=run_id,
    )


def missing_key(run_id: str, key_id: str) -> CodecError:
    return CodecError(
        f"run {run_id!r} holds values encrypted with key {key_id!r}, which this store does not "
        "have; nothing was read or written. Configure that key (DURABLE_KEY with "
        "DURABLE_KEY_ID, or DURABLE_KEYS_FILE for old keys)",
        run_id=run_id,
        key_id=key_id,
    )


def no_items(store: str, run_id: str, kind: str) -> StoreError:
    return StoreError(
        f"run {run_id!r}: {store} keeps no per-run items, so it has no {kind!r} (streams, "
        "events and Agent Framework checkpoints need them): use a store that keeps them, "
        "or give this backend append_item, put_item and read_items (docs/stores.md)",
        status_code=None,
    )


def wrong_key(run_id: str, key_id: str) -> CodecError:
    return CodecError(
        f"run {run_id!r} holds values encrypted with key {key_id!r}, and the key this store "
        f"has under {key_id!r} is another key (its check value differs); nothing was read or "
        "written, and the run is intact. Configure the key those values were written with "
        f"under {key_id!r} (DURABLE_KEY, or DURABLE_KEYS_FILE), and give a new key a new id "
        "(DURABLE_KEY_ID)",
        run_id=run_id,
        key_id=key_id,
    )


def key_or_damage(run_id: str, key_id: str) -> CodecError:
    return CodecError(
        f"run {run_id!r} holds a value encrypted with key {key_id!r} that does not open with "
        f"the key this store has under {key_id!r}: wrong key or damaged (it was written "
        "before values carried their key's check value, so the two cannot be told apart). "
        "Nothing was read or written. Check that the key configured under that id is the "
        "one the run was written with (DURABLE_KEY, DURABLE_KEYS_FILE) before anything else",
        run_id=run_id,
        key_id=key_id,
    )


# -- control flow, not errors; never leave the library -----------------------------------


class Suspend(BaseException):
    """Raised by ``wait_for_signal`` and ``sleep`` to suspend the run until ``signal``
    comes or ``wake_at`` passes; ``record`` is the journal entry to save with the
    suspension (the sleep's wake time, the wait's deadline), if it is new. A
    BaseException so that a step's ``except Exception`` does not swallow it."""

    def __init__(
        self,
        signal: str | None,
        wake_at: float | None,
        record: dict[str, Any] | None = None,
        topic: str | None = None,
    ) -> None:
        super().__init__(signal or topic or wake_at)
        self.signal, self.wake_at, self.record = signal, wake_at, record
        self.topic = topic
        """The mailbox topic a ``receive`` waits on (``runner.mailbox``), else None."""


class StepInterrupted(BaseException):
    """Raised into a step when its run cannot go on there: a record of its journal
    could not be saved (the store failed, the record is over the size limit), or the
    run is no longer ours (its lease lost, the run cancelled or deleted). ``error`` is
    that error: the runner raises it, with its own type, when the step ends, whatever
    the step did meanwhile. A BaseException, as ``Suspend`` and asyncio's cancellation
    are, so that agent code catching ``Exception`` around ``call`` does not swallow it
    and go on unrecorded."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(
            f"this step cannot go on: {type(error).__name__}: {error} -- let this through "
            "(a BaseException, so that 'except Exception' does not catch it); the run "
            "raises that error when the step ends"
        )
        self.error = error


class StopRequested(DurableError):
    """A worker asked to stop: the run released its lease between two steps."""

    run_id: str
