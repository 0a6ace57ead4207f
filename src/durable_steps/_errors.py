"""Errors of durable-steps.

    DurableError
    ├── ConflictError           another writer saved the run first (stale etag)
    ├── StepMismatchError       the completed part of the step list changed
    ├── CorruptCheckpointError  a stored checkpoint exists but cannot be read
    ├── InvalidRunIdError       (also a ValueError) breaks the run-id rules
    ├── InvalidStateError       (also a TypeError) state is not plain JSON
    ├── StateTooLargeError      the checkpoint is over the backend's item limit
    ├── ConfigurationError      the environment does not describe a usable store
    └── StoreError              the backend failed (unreachable, auth, throttled)

Every message says what happened and what to do next. Errors keep their
attributes through pickling (they cross process boundaries in tests and CLIs).
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


class StoreError(DurableError):
    """The backend failed: unreachable, refused the credentials, throttled, ..."""

    status_code: int | None
