"""One Agent Framework checkpoint as the state of one step of our run, in parts.

A ``WorkflowCheckpoint`` becomes a JSON object whose top-level keys are its *parts*,
so that a save sends only the parts that changed since the chain's previous
checkpoint (our saves write a step's top-level updates, and a list that only grew as
its new items: ``seam.delta``):

- ``meta``: the checkpoint's small fields (id, previous id, timestamp, names, hash,
  iteration, metadata, version) and the list of its parts (``parts``);
- ``messages``, ``pending``: the messages in flight and the pending requests;
- ``["s", KEY]``: each key of the workflow's shared state;
- ``["x", EXECUTOR, FIELD]``: each field of an executor's state (an agent executor's
  conversation is one of them: a list that grows by the new messages), or
  ``["x", EXECUTOR]`` for an executor state that is not an object with fields.

Keys of parts are the JSON text of those lists (``'["s","topic"]'``), so no name of a
state key or an executor can collide with another. A part that a later checkpoint no
longer has is set to ``null`` (our states never lose a key) and left out of ``parts``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ._values import Values

EXECUTORS = "_executor_state"
META, MESSAGES, PENDING = "meta", "messages", "pending"
_FIXED = (META, MESSAGES, PENDING)


def part_key(*path: str) -> str:
    return json.dumps(list(path), ensure_ascii=False, separators=(",", ":"))


def to_parts(cp: Any, values: Values) -> dict[str, Any]:
    """The parts of checkpoint ``cp`` (a ``WorkflowCheckpoint``), encoded: raises
    ``InvalidStateError`` naming the value that cannot be kept, before any I/O."""
    where = cp.checkpoint_id
    parts: dict[str, Any] = {
        MESSAGES: values.encode(cp.messages, where, "messages"),
        PENDING: values.encode(
            cp.pending_request_info_events, where, "pending_request_info_events"
        ),
    }
    for key, value in cp.state.items():
        if key == EXECUTORS and type(value) is dict and all(type(k) is str for k in value):
            for executor, fields in value.items():
                at = f"state[{EXECUTORS!r}][{executor!r}]"
                if type(fields) is dict and fields and all(type(f) is str for f in fields):
                    for name, field in fields.items():
                        parts[part_key("x", executor, name)] = values.encode(
                            field, where, f"{at}[{name!r}]"
                        )
                else:
                    parts[part_key("x", executor)] = values.encode(fields, where, at)
        elif type(key) is str:
            parts[part_key("s", key)] = values.encode(value, where, f"state[{key!r}]")
        else:
            values.encode({key: value}, where, "state")  # refuses it, naming the key
    meta = {
        "checkpoint_id": cp.checkpoint_id,
        "previous_checkpoint_id": cp.previous_checkpoint_id,
        "timestamp": cp.timestamp,
        "workflow_name": cp.workflow_name,
        "graph_signature_hash": cp.graph_signature_hash,
        "iteration_count": cp.iteration_count,
        "metadata": values.encode(cp.metadata, where, "metadata"),
        "version": cp.version,
        "parts": [k for k in parts if k not in _FIXED],
    }
    parts[META] = values.encode(meta, where, "")
    return parts


def from_parts(state: Mapping[str, Any], values: Values, checkpoint_type: Any) -> Any:
    """The ``WorkflowCheckpoint`` that ``to_parts`` made ``state`` of."""
    meta = state[META]
    where = str(meta["checkpoint_id"])
    shared: dict[str, Any] = {}
    executors: dict[str, Any] = {}
    for key in meta["parts"]:
        path = json.loads(key)
        value = values.decode(state[key], where)
        if path[0] == "s":
            shared[path[1]] = value
        elif len(path) == 2:
            executors[path[1]] = value
        else:
            executors.setdefault(path[1], {})[path[2]] = value
    if executors:
        shared[EXECUTORS] = executors
    return checkpoint_type(
        workflow_name=meta["workflow_name"],
        graph_signature_hash=meta["graph_signature_hash"],
        checkpoint_id=meta["checkpoint_id"],
        previous_checkpoint_id=meta["previous_checkpoint_id"],
        timestamp=meta["timestamp"],
        messages=values.decode(state[MESSAGES], where),
        state=shared,
        pending_request_info_events=values.decode(state[PENDING], where),
        iteration_count=meta["iteration_count"],
        metadata=values.decode(meta["metadata"], where),
        version=meta["version"],
    )


_MISSING = object()


def updates(before: Mapping[str, Any], parts: Mapping[str, Any]) -> dict[str, Any]:
    """What to save so that ``before`` (the chain's stored state) holds ``parts``: the
    changed parts, a list that only grew as the old list plus its new items (the old
    items themselves, so that the save sends only the new ones), and ``null`` for parts
    that are gone."""
    changed: dict[str, Any] = {}
    for key, value in parts.items():
        old = before.get(key, _MISSING)
        if old is _MISSING:
            changed[key] = value
        elif isinstance(old, list) and isinstance(value, list) and len(value) >= len(old):
            if value[: len(old)] == old:
                if len(value) > len(old):
                    changed[key] = [*old, *value[len(old) :]]
            else:
                changed[key] = value
        elif old != value:
            changed[key] = value
    for key, old in before.items():
        if key not in parts and old is not None:
            changed[key] = None
    return changed


def epoch(timestamp: object) -> float | None:
    """A checkpoint's ISO 8601 timestamp in seconds since the epoch (None: unreadable)."""
    try:
        return datetime.fromisoformat(str(timestamp)).timestamp()
    except ValueError:
        return None
