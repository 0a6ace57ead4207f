"""A FileStore journal built save by save, as the tests of the journal format need it:
saves the way the runner makes them, a history of every kind of record, and the
comparison of two checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import durable_steps as ds
from durable_steps.seam.state import frozen_state, mark_stored


@dataclass
class Saved:
    end: int
    """The file's length once this save's record was written."""
    checkpoint: ds.Checkpoint


def advance(store: ds.FileStore, cp: ds.Checkpoint, updates: dict[str, Any], **fields: Any) -> Any:
    """One save the way the runner makes it: the state's updates on top of a frozen state."""
    state = cp.state.updated(updates, cp.run_id) if updates else cp.state
    saved = store.save(replace(cp, state=state, updated_at=None, **fields))
    mark_stored(state, saved.etag)
    return replace(saved, state=state)


def history(store: ds.FileStore, run_id: str = "r") -> list[Saved]:
    """A journal of a snapshot and several kinds of records: new keys, an extended list,
    a replaced value, new step names, a signal, a heartbeat (the lease only)."""
    first = store.save(ds.Checkpoint(run_id, -1, {"messages": []}))
    cp = replace(first, state=frozen_state(first.state, run_id, stored_as=first.etag))
    target = store.file_for(run_id)
    out = [Saved(target.stat().st_size, first)]
    changes: list[tuple[Any, dict[str, Any]]] = [
        (lambda s: {"a": "ü" * 40}, {"step": 0, "steps": ("a",)}),
        (lambda s: {"messages": [*s["messages"], "hi", {"role": "tool"}]}, {"step": 1}),
        (lambda s: {"messages": [*s["messages"], "bye"]}, {"step": 2}),
        (lambda s: {}, {"lease_expires": 2e9, "owner": "me"}),
        (lambda s: {"a": 1.5, "n": None}, {"step": 3, "attempt": 2}),
        (
            lambda s: {},
            {"signals": {"ok": {"by": "ann"}}, "status": "waiting", "waiting_for": "ok"},
        ),
        (lambda s: {"deep": {"x": [1, [2, 3]]}}, {"step": 4}),
    ]
    for updates, fields in changes:
        if "step" in fields:
            fields["steps"] = tuple("abcde"[: fields["step"] + 1])
        cp = advance(store, cp, updates(cp.state), **fields)
        out.append(Saved(target.stat().st_size, cp))
    return out


def same(a: ds.Checkpoint | None, b: ds.Checkpoint) -> bool:
    return a is not None and (a.etag, a.step, a.steps, a.state, dict(a.signals), a.status) == (
        b.etag,
        b.step,
        b.steps,
        dict(b.state),
        dict(b.signals),
        b.status,
    )
