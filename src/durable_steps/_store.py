"""The seam between the runner and storage: Checkpoint, the Store protocols and
the one document format every backend writes."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ._errors import ConflictError, CorruptCheckpointError, InvalidRunIdError, InvalidStateError

SCHEMA = 1
MAX_RUN_ID = 255
_FORBIDDEN = frozenset("/\\?#")


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
    """True once the step list the runner was given has completed."""
    attempt: int = 1
    """How many times the next step (index ``step + 1``) has been started."""
    updated_at: float | None = None
    """Seconds since the epoch of the last save. A store stamps the current time when
    this is None (the runner always passes None); a given time is kept, so that a
    migration between stores keeps each run's age."""


@dataclass(frozen=True)
class RunInfo:
    """A run as a store lists it (for operators; the runner never needs it)."""

    run_id: str
    step: int
    step_name: str | None
    done: bool
    updated_at: float | None
    size: int
    etag: str | None
    error: str | None = field(default=None)
    """Set when the stored checkpoint cannot be read; the other fields are then best effort."""


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
    and is returned with its new etag; a reader never sees it half-written.
    """

    def load(self, run_id: str) -> Checkpoint | None: ...

    def save(self, checkpoint: Checkpoint) -> Checkpoint: ...


@runtime_checkable
class AsyncStore(Protocol):
    """The same contract as ``Store``, awaited; implementations never block the loop."""

    async def load(self, run_id: str) -> Checkpoint | None: ...

    async def save(self, checkpoint: Checkpoint) -> Checkpoint: ...


def check_run_id(run_id: object) -> str:
    """Apply the run-id rules shared by every store (Cosmos DB's id rules), before any I/O."""
    if not isinstance(run_id, str):
        raise InvalidRunIdError(
            f"run id must be a str, not {type(run_id).__name__}: pass the id as text",
            run_id=repr(run_id),
        )
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
    if problem:
        shown = run_id if len(run_id) <= 60 else run_id[:57] + "..."
        raise InvalidRunIdError(
            f"invalid run id {shown!r}: {problem} (the same rules hold in every store)",
            run_id=run_id,
        )
    return run_id


def _check_json(value: object, path: str, run_id: str) -> None:
    """Walk the state once so an error names the offending key, not just a type."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidStateError(
                f"run {run_id!r}: state{path} is {value}, which JSON cannot hold; "
                "store it as a string or None",
                run_id=run_id,
            )
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidStateError(
                    f"run {run_id!r}: state{path} has a {type(key).__name__} key {key!r}; "
                    "JSON object keys must be str",
                    run_id=run_id,
                )
            _check_json(item, f"{path}[{key!r}]", run_id)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", run_id)
        return
    raise InvalidStateError(
        f"run {run_id!r}: state{path} is a {type(value).__name__}, which is not JSON; "
        "return plain dict/list/str/int/float/bool/None from steps (convert it first)",
        run_id=run_id,
    )


def to_document(cp: Checkpoint, *, etag: str | None = None) -> dict[str, Any]:
    """The stored form of a checkpoint: plain JSON with a schema version."""
    check_run_id(cp.run_id)
    if not isinstance(cp.state, dict):
        raise InvalidStateError(
            f"run {cp.run_id!r}: state must be a dict, not {type(cp.state).__name__}",
            run_id=cp.run_id,
        )
    _check_json(cp.state, "", cp.run_id)
    # The etag leads, so a store can read a file's version from its first bytes.
    doc: dict[str, Any] = {} if etag is None else {"etag": etag}
    doc |= {
        "schema": SCHEMA,
        "run_id": cp.run_id,
        "step": cp.step,
        "steps": list(cp.steps),
        "done": cp.done,
        "attempt": cp.attempt,
        "updated_at": cp.updated_at or time.time(),
        "state": cp.state,
    }
    return doc


def dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def decode(raw: bytes, run_id: str, where: str) -> Checkpoint:
    """A checkpoint from its stored bytes (the etag is part of the document)."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise corrupt_error(run_id, where, f"not JSON ({exc})") from None
    etag = doc.get("etag") if isinstance(doc, dict) else None
    return from_document(doc, run_id, etag if isinstance(etag, str) else None, where)


def from_document(doc: object, run_id: str, etag: str | None, where: str) -> Checkpoint:
    """Read a stored document back, refusing anything this version would misread."""

    def corrupt(why: str) -> CorruptCheckpointError:
        return corrupt_error(run_id, where, why)

    if not isinstance(doc, dict):
        raise corrupt(f"expected a JSON object, found {type(doc).__name__}")
    schema = doc.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA:
        raise CorruptCheckpointError(
            f"checkpoint of run {run_id!r} at {where} was written with schema {schema}, "
            f"newer than this durable-steps reads ({SCHEMA}): upgrade durable-steps",
            run_id=run_id,
        )
    if schema != SCHEMA:
        raise corrupt(f"schema is {schema!r}, expected {SCHEMA}")
    step, steps, state = doc.get("step"), doc.get("steps"), doc.get("state")
    attempt, done, updated = doc.get("attempt", 1), doc.get("done", False), doc.get("updated_at")
    if doc.get("run_id") != run_id:
        raise corrupt(f"it belongs to run {doc.get('run_id')!r}")
    if not isinstance(step, int) or isinstance(step, bool) or step < -1:
        raise corrupt(f"step is {step!r}")
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise corrupt("steps is not a list of names")
    if len(steps) != step + 1:
        raise corrupt(f"step {step} does not match {len(steps)} completed step names")
    if not isinstance(state, dict):
        raise corrupt("state is not a JSON object")
    if not etag:
        raise corrupt("it has no etag")
    if not isinstance(attempt, int) or not isinstance(done, bool):
        raise corrupt("attempt or done has the wrong type")
    if updated is not None and not isinstance(updated, int | float):
        raise corrupt("updated_at is not a number")
    return Checkpoint(
        run_id=run_id,
        step=step,
        state=state,
        etag=etag,
        steps=tuple(steps),
        done=done,
        attempt=attempt,
        updated_at=updated,
    )


def corrupt_error(run_id: str, where: str, why: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"checkpoint of run {run_id!r} at {where} is unreadable: {why}. It was not "
        "treated as a fresh start (that would repeat every finished step); restore it "
        "or delete the run to start over",
        run_id=run_id,
    )


def conflict(run_id: str, expected: str | None, missing: bool) -> ConflictError:
    """The ConflictError of a conditional save that lost, saying why."""
    if expected is None:
        what = "it already has a checkpoint"
    elif missing:
        what = "its checkpoint was deleted meanwhile"
    else:
        what = "another writer saved it after you loaded it"
    return ConflictError(
        f"run {run_id!r} was not saved: {what}. Nothing was written; reload it and "
        "retry, or run one worker per run id",
        run_id=run_id,
    )
