"""Errors of durable-steps.

    DurableError
    ├── ConflictError           another writer saved the run first (stale etag)
    │   ├── RunLeasedError      another live worker holds the run's lease
    │   └── LeaseLostError      this worker's lease was taken over while it worked
    ├── RunWaiting              the run waits for a signal (not a failure)
    ├── RunNotFoundError        (also a LookupError) the run has no checkpoint
    ├── StepMismatchError       the completed part of the step list changed
    ├── CorruptCheckpointError  a stored checkpoint exists but cannot be read
    ├── InvalidRunIdError       (also a ValueError) breaks the run-id rules
    ├── InvalidStateError       (also a TypeError) state is not plain JSON
    ├── StateTooLargeError      the checkpoint is over the backend's item limit
    ├── ConfigurationError      the environment does not describe a usable store
    │   └── MissingExtraError   (also an ImportError) an optional extra is not installed
    └── StoreError              the backend failed (unreachable, auth, throttled)

Every message says what happened and what to do next. Errors keep their
attributes through pickling (they cross process boundaries in tests and CLIs).

At the end, apart from the tree: the runner's control-flow exceptions (``Suspend``,
``StopRequested``), which never leave the library.
"""

from __future__ import annotations

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
    """The run is suspended until ``signal`` is delivered (``send_signal``); its lease
    is released and its completed steps are kept."""

    run_id: str
    signal: str


class RunNotFoundError(DurableError, LookupError):
    """The run has no checkpoint in the store."""

    run_id: str


class StepMismatchError(DurableError):
    """A resumed run was given steps whose completed part differs from the checkpoint."""

    run_id: str


class CorruptCheckpointError(DurableError):
    """A checkpoint exists but cannot be read; never treated as a fresh start."""

    run_id: str


class InvalidRunIdError(DurableError, ValueError):
    """The run id breaks the rules shared by every store."""

    run_id: str


class InvalidStateError(DurableError, TypeError):
    """The state holds something that is not plain JSON."""

    run_id: str


class StateTooLargeError(DurableError):
    """The checkpoint is larger than the backend accepts."""

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


# -- control flow, not errors; never leave the library -----------------------------------


class Suspend(BaseException):
    """Raised by wait_for_signal() to suspend the run; a BaseException so that a
    step's ``except Exception`` does not swallow it."""

    def __init__(self, signal: str) -> None:
        super().__init__(signal)
        self.signal = signal


class StopRequested(DurableError):
    """A worker asked to stop: the run released its lease between two steps."""

    run_id: str
