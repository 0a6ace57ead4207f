"""The one document format every backend stores: a checkpoint as plain JSON with a
schema version, and back. A document from a newer schema is refused, never misread;
documents of every earlier schema still load (``seam.formats`` upgrades them to this
one as they are read) and are rewritten as the current one by their next save. This
module reads today's schema only:

- 4: the state, the step names, status, workflow, lease (``owner``,
  ``lease_expires``), signals, the last error, retry rounds (``first_attempt``), the
  first attempt's ``trace``, the running step's journal (``calls``), a waiting run's
  ``wake_at`` and a cancelled run's ``cancel_reason``; a journal record may name the
  task scope it belongs to (``"task"``, see ``runner.tasks``): records of concurrent
  branches are keyed by scope and index, which a version that numbered calls across
  the step would mix up, so it refuses them. Version 0.1 refuses schemas from 3 on
  ("upgrade").
- 4, optional fields (absent meaning none): ``forked_from`` (a fork's source).
- 4, optional fields: ``mailbox`` and ``receiving`` (``seam.mailbox``).
- 4, optional fields: ``queue``, ``priority``, ``partition`` (``workers.queues``);
  ``parent`` (``runner.children``).
- 4, optional field: ``attempt_log`` (``seam.attempts``).
- 4, optional field: ``started_at``, the run's first save, kept for its life (a
  queue's order); absent in earlier documents, which read their ``updated_at``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from . import formats, mailbox
from .checkpoint import STATUSES, Checkpoint, RunInfo, StateNotRead, waits_for
from .errors import CorruptCheckpointError, InvalidStateError, StepMismatchError, corrupt_error
from .rules import check_run_id
from .state import check_json, is_checked, is_record

SCHEMA = 4
"""The schema this version writes (see the top); 1 to 3 still load."""


def to_document(cp: Checkpoint, *, etag: str | None = None) -> dict[str, Any]:
    """The stored form of a checkpoint: plain JSON with a schema version.

    The state is checked against the JSON rules (``state``) unless the runner
    already froze it, which checked it once, value by value, as steps returned it.
    A checkpoint read without its state (``load_head``) is refused: saved whole, it
    would replace the run's state (``save_head`` saves it).
    """
    if isinstance(cp.state, StateNotRead):
        raise TypeError(
            f"run {cp.run_id!r}: this checkpoint was read without its state (load_head); "
            "save it with save_head, which keeps the stored state, or load the run whole"
        )
    doc = head_document(cp, etag=etag)
    if not is_checked(cp.state):
        if not isinstance(cp.state, dict):
            raise InvalidStateError(
                f"run {cp.run_id!r}: state must be a dict, not {type(cp.state).__name__}",
                run_id=cp.run_id,
            )
        check_json(cp.state, cp.run_id)
    calls = cp.calls
    if calls and not is_checked(calls) and not all(is_checked(r) for r in calls):
        check_json(list(calls), cp.run_id, "call result")
    doc["calls"] = calls if is_checked(calls) else list(calls)  # (a tuple encodes as a list)
    doc["state"] = cp.state
    return doc


def head_document(cp: Checkpoint, *, etag: str | None = None) -> dict[str, Any]:
    """``to_document`` but the data: every field of the checkpoint except ``calls`` and
    ``state``, checked (what a store writes of a head-only save, ``save_head``)."""
    check_run_id(cp.run_id)
    if not isinstance(cp.step, int) or isinstance(cp.step, bool) or cp.step < -1:
        raise StepMismatchError(
            f"run {cp.run_id!r}: a checkpoint's step must be an int from -1 (no step "
            f"completed) up, not {cp.step!r} (nothing was saved)",
            run_id=cp.run_id,
        )
    if len(cp.steps) != cp.step + 1:
        raise StepMismatchError(
            f"run {cp.run_id!r}: a checkpoint at step {cp.step} has {len(cp.steps)} "
            f"completed step names, not {cp.step + 1}: give steps= one name per completed "
            "step (nothing was saved)",
            run_id=cp.run_id,
        )
    if not is_checked(cp.signals):
        check_json(dict(cp.signals), cp.run_id, "signal payload")
    # The etag leads, so a store can read a file's version from its first bytes.
    doc: dict[str, Any] = {} if etag is None else {"etag": etag}
    doc |= {
        "schema": SCHEMA,
        "run_id": cp.run_id,
        "workflow": cp.workflow,
        "status": cp.status,
        "step": cp.step,
        "steps": list(cp.steps),
        "attempt": cp.attempt,
        "first_attempt": cp.first_attempt,
        "owner": cp.owner,
        "lease_expires": cp.lease_expires,
        "waiting_for": cp.waiting_for,
        "error": None if cp.error is None else dict(cp.error),
        "trace": cp.trace,
        "wake_at": cp.wake_at,
        "cancel_reason": cp.cancel_reason,
        # fork: optional in schema 4, absent meaning "not a fork"
        "forked_from": None if cp.forked_from is None else dict(cp.forked_from),
        "updated_at": cp.updated_at or time.time(),
        # a run's first save stamps it; kept by every later save (a queue's order)
        "started_at": cp.started_at,
        "signals": cp.signals,
        # queues (workers.queues): optional in schema 4, absent meaning none
        "queue": cp.queue,
        "priority": cp.priority,
        "partition": cp.partition,
        # child runs (runner.children): optional in schema 4, absent meaning none
        "parent": cp.parent,
    }
    if doc["started_at"] is None:
        doc["started_at"] = doc["updated_at"]
    # -- lifecycle: versions and resume; absent in earlier documents: none
    doc["version"] = cp.version
    doc["resumed"] = [dict(r) for r in cp.resumed] or None
    # -- the mailbox (seam.mailbox): written only when there is one, so that runs
    # without messages are stored exactly as before it
    if cp.mailbox is not None:
        if not is_checked(cp.mailbox):
            check_json(dict(cp.mailbox), cp.run_id, "mailbox message")
        doc["mailbox"] = cp.mailbox
    if cp.receiving is not None:
        doc["receiving"] = cp.receiving
    # -- run deadlines: written when set, absent meaning none ---------------------------
    if cp.deadline is not None:
        doc["deadline"] = cp.deadline
    # -- the attempt log (seam.attempts): written when there is one -------------------
    if cp.attempt_log:
        doc["attempt_log"] = cp.attempt_log  # (rows of JSON scalars; a tuple encodes as a list)
    return doc


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _c_encoder() -> Any:
    """The C encoder that ``_ENCODER.encode`` builds anew for every call, built once (a
    save encodes twice). Without the circular-reference check: what is encoded was
    checked first (``state`` refuses nesting deeper than ``MAX_DEPTH``, so no cycle
    gets here). None where the C accelerator is missing or differs from this."""
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    sample = {"a": [1, 2.5, None, True, "é\n\u2028\x00"], "b": {}, "c": -1e300}
    try:
        encoder = make(  # the arguments of Python 3.11 to 3.13
            None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",",
            False, False, False,
        )  # fmt: skip
        return encoder if "".join(encoder(sample, 0)) == _ENCODER.encode(sample) else None
    except TypeError:  # None, or other arguments
        return None


_C_ENCODER = _c_encoder()


def dumps(doc: Any) -> bytes:
    """Compact UTF-8 JSON of a checked value (usually a document)."""
    if _C_ENCODER is not None:
        return "".join(_C_ENCODER(doc, 0)).encode()
    return _ENCODER.encode(doc).encode()


def loads(raw: bytes | str, run_id: str, where: str) -> Any:
    """JSON from stored bytes; anything unreadable (nested absurdly deep included) is corrupt."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        why = "nested too deep to read" if isinstance(exc, RecursionError) else f"not JSON ({exc})"
        raise corrupt_error(run_id, where, why) from None


def decode(raw: bytes, run_id: str, where: str) -> Checkpoint:
    """A checkpoint from its stored bytes (the etag is part of the document)."""
    doc = loads(raw, run_id, where)
    etag = doc.get("etag") if isinstance(doc, dict) else None
    return from_document(doc, run_id, etag if isinstance(etag, str) else None, where)


def _opt(doc: dict[str, Any], key: str, kinds: Any) -> Any:
    value = doc.get(key)
    if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
        raise ValueError(f"{key} is {value!r}")
    return value


def from_document(doc: object, run_id: str, etag: str | None, where: str) -> Checkpoint:
    """Read a stored document back, refusing anything this version would misread."""

    def corrupt(why: str) -> CorruptCheckpointError:
        return corrupt_error(run_id, where, why)

    doc = _today(doc, run_id, where)
    step, steps, state = doc.get("step"), doc.get("steps"), doc.get("state")
    attempt, updated = doc.get("attempt", 1), doc.get("updated_at")
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
    if not isinstance(attempt, int) or isinstance(attempt, bool):
        raise corrupt("attempt has the wrong type")
    if updated is not None and (not isinstance(updated, int | float) or isinstance(updated, bool)):
        raise corrupt("updated_at is not a number")
    try:
        extra = _fields(doc)
    except ValueError as exc:
        raise corrupt(str(exc)) from None
    return Checkpoint(
        run_id=run_id,
        step=step,
        state=state,
        etag=etag,
        steps=tuple(steps),
        attempt=attempt,
        updated_at=updated,
        **extra,
    )


_SCHEMAS = (*formats.EARLIER, SCHEMA)


def _today(doc: object, run_id: str, where: str) -> dict[str, Any]:
    """A stored document as today's schema: an earlier one upgraded (``seam.formats``),
    a newer one refused ("upgrade durable-steps"), anything else corrupt."""
    if not isinstance(doc, dict):
        raise corrupt_error(run_id, where, f"expected a JSON object, found {type(doc).__name__}")
    schema = doc.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA:
        raise CorruptCheckpointError(
            f"checkpoint of run {run_id!r} at {where} was written with schema {schema}, "
            f"newer than this durable-steps reads ({SCHEMA}): upgrade durable-steps",
            run_id=run_id,
        )
    if schema not in _SCHEMAS or isinstance(schema, bool):
        raise corrupt_error(run_id, where, f"schema is {schema!r}, expected 1 to {SCHEMA}")
    try:
        return formats.upgrade(doc)
    except ValueError as exc:
        raise corrupt_error(run_id, where, str(exc)) from None


def _fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The fields beyond the state, the step names, the attempt and the time, of a
    document of today's schema (an optional one absent: none)."""
    status, signals, error = doc.get("status"), doc.get("signals") or {}, doc.get("error")
    if status not in STATUSES:
        raise ValueError(f"status is {status!r}")
    if not isinstance(signals, dict) or (error is not None and not isinstance(error, dict)):
        raise ValueError("signals or error is not a JSON object")
    return {
        "status": status,
        "workflow": _opt(doc, "workflow", str),
        "owner": _opt(doc, "owner", str),
        "lease_expires": _opt(doc, "lease_expires", int | float),
        "waiting_for": _opt(doc, "waiting_for", str),
        "trace": _opt(doc, "trace", str),
        "first_attempt": _opt(doc, "first_attempt", int) or 1,
        "signals": signals,
        "error": error,
        "wake_at": _opt(doc, "wake_at", int | float),
        "cancel_reason": _opt(doc, "cancel_reason", str),
        "calls": _calls(doc.get("calls")),
        "forked_from": _opt(doc, "forked_from", dict),
        # -- lifecycle: versions and resume
        "version": _opt(doc, "version", str),
        "resumed": _resumed(doc.get("resumed")),
        # the mailbox (seam.mailbox)
        "mailbox": mailbox.read(doc.get("mailbox")),
        "receiving": _opt(doc, "receiving", str),
        "deadline": _opt(doc, "deadline", int | float),  # run deadlines
        # queues (workers.queues)
        "queue": _opt(doc, "queue", str),
        "priority": _opt(doc, "priority", int),
        "partition": _opt(doc, "partition", str),
        "parent": _opt(doc, "parent", str),  # child runs (runner.children)
        "attempt_log": _attempt_log(doc.get("attempt_log")),  # seam.attempts
        # a document from before it: its last save is the best age it has
        "started_at": _opt(doc, "started_at", int | float) or _opt(doc, "updated_at", int | float),
    }


def _attempt_log(rows: object) -> tuple[list[Any], ...]:
    """The attempt log as stored: a list of lists (anything else, none: it only
    describes, so a malformed one never makes a run unreadable)."""
    if not isinstance(rows, list):
        return ()
    return tuple(r for r in rows if isinstance(r, list))


def _resumed(records: object) -> tuple[dict[str, Any], ...]:
    """The records of a run's resumptions (``runs.resume``): a list of objects."""
    if records is None:
        return ()
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError("resumed is not a list of objects")
    return tuple(records)


def _calls(calls: object) -> tuple[dict[str, Any], ...]:
    """A journal's records as stored: a list of objects, each with its index and name."""
    if calls is None:
        return ()
    if not isinstance(calls, list) or not all(is_record(r) for r in calls):
        raise ValueError("calls is not a list of call records")
    return tuple(calls)


def info_of(cp: Checkpoint, size: int) -> RunInfo:
    """The listing entry of a checkpoint."""
    return RunInfo(
        run_id=cp.run_id,
        step=cp.step,
        step_name=cp.steps[-1] if cp.steps else None,
        done=cp.done,
        updated_at=cp.updated_at,
        size=size,
        etag=cp.etag,
        status=cp.status,
        workflow=cp.workflow,
        lease_expires=cp.lease_expires,
        owner=cp.owner,
        waiting_for=waits_for(cp.waiting_for, cp.receiving),
        attempt=cp.attempt,
        wake_at=cp.wake_at,
        version=cp.version,
        deadline=cp.deadline,
        queue=cp.queue,
        priority=cp.priority,
        partition=cp.partition,
        receiving=cp.receiving,
        started_at=cp.started_at,
    )


def info_of_meta(meta: object, etag: str, size: int, label: str, where: str) -> RunInfo:
    """The listing entry of a checkpoint from its fields without state, step names and
    signals (a document of ``to_document`` less those, plus ``step_name``): what a
    store lists without reading the state. ``label`` names the run in errors."""
    if not isinstance(meta, dict):
        raise corrupt_error(label, where, "its fields are not a JSON object")
    try:
        if meta.get("schema") not in (2, 3, SCHEMA) or isinstance(meta.get("schema"), bool):
            raise ValueError(f"schema is {meta.get('schema')!r}, expected 2 to {SCHEMA}")
        meta = formats.upgrade(meta)
        run_id, step, attempt = meta.get("run_id"), meta.get("step"), meta.get("attempt")
        if not isinstance(run_id, str):
            raise TypeError("it does not name its run")
        if not isinstance(step, int) or isinstance(step, bool) or step < -1:
            raise TypeError(f"step is {step!r}")
        if not isinstance(attempt, int) or isinstance(attempt, bool):
            raise TypeError("attempt has the wrong type")
        step_name, updated = _opt(meta, "step_name", str), _opt(meta, "updated_at", int | float)
        extra = _fields(meta)
    except (TypeError, ValueError) as exc:
        raise corrupt_error(label, where, str(exc)) from None
    return RunInfo(
        run_id=run_id,
        step=step,
        step_name=step_name,
        done=extra["status"] == "completed",
        updated_at=updated,
        size=size,
        etag=etag,
        status=extra["status"],
        workflow=extra["workflow"],
        lease_expires=extra["lease_expires"],
        owner=extra["owner"],
        waiting_for=waits_for(extra["waiting_for"], extra["receiving"]),
        attempt=attempt,
        wake_at=extra["wake_at"],
        version=extra["version"],
        deadline=extra["deadline"],
        queue=extra["queue"],
        priority=extra["priority"],
        partition=extra["partition"],
        receiving=extra["receiving"],
        started_at=extra["started_at"],
    )
