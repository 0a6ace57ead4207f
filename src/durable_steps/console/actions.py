"""What an operator can do to a run from the console: one ``Action`` entry each.

Each action is the same library call as the command line's (``send_signal`` as
``runs signal``, ``cancel_run`` as ``runs cancel``), made only after the operator
confirmed it on a page that says what it will do. What the library refuses it refuses
here: its error's message is shown on the page (``Refused``), and nothing else is
changed. A payload that is not JSON is refused before any call.

Adding an action is one entry in ``ACTIONS``: its fields (the form is drawn from them),
the question it asks, the call, and when it is offered. The calls: ``send_signal``,
``send_message`` (``runs send``), ``cancel_run``, ``resume_run`` (``runs resume``),
``fork_run`` (``runs fork``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import durable_steps as ds
from durable_steps import Checkpoint, DurableError, Store

ENDED = ("completed", "cancelled")


class Refused(Exception):
    """The action did not happen; the message says why (the library's own, when it
    refused)."""


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    kind: str = "text"
    """``text``, ``json`` (parsed; empty means null) or ``int``."""
    required: bool = False
    hint: str = ""


@dataclass(frozen=True)
class Action:
    name: str
    title: str
    question: str
    """Asked before it happens; ``{run}`` and the fields' names are filled in."""
    fields: tuple[Field, ...]
    call: Callable[[Store, str, dict[str, Any]], str]
    """``(store, run_id, values) -> what happened``, in words."""
    offered: Callable[[Checkpoint], bool] = lambda cp: True
    danger: bool = False


def _signal(store: Store, run_id: str, v: dict[str, Any]) -> str:
    cp = ds.send_signal(store, run_id, v["name"], v["payload"])
    then = (
        "it resumes at its next run (recover or a worker runs it)"
        if cp.status not in ENDED
        else f"the run is {cp.status}"
    )
    return f"signal {v['name']} delivered to run {run_id}: {then}"


def _cancel(store: Store, run_id: str, v: dict[str, Any]) -> str:
    if ds.cancel_run(store, run_id, reason=v["reason"] or None):
        return f"cancelled run {run_id}: it starts no other step or call"
    return f"run {run_id} was cancelled already; nothing changed"


def _resume(store: Store, run_id: str, v: dict[str, Any]) -> str:
    ds.resume_run(store, run_id)
    return f"run {run_id} is running again from its last checkpoint: a worker picks it up"


def _fork(store: Store, run_id: str, v: dict[str, Any]) -> str:
    ds.fork_run(store, run_id, v["new_run_id"], at_step=v["at_step"], update=v["update"])
    return f"forked run {run_id} after step {v['at_step']} as run {v['new_run_id']}"


def _message(store: Store, run_id: str, v: dict[str, Any]) -> str:
    key = v["idempotency_key"] or None
    ds.send_message(store, run_id, v["topic"], v["payload"], idempotency_key=key)
    return f"message sent to run {run_id} on topic {v['topic']}"


def _unfinished(cp: Checkpoint) -> bool:
    return cp.status not in ENDED


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action(
            "signal",
            "Send a signal",
            "Deliver signal {name} to run {run}? A signal is delivered once.",
            (
                Field("name", "signal", required=True, hint="the name wait_for_signal waits for"),
                Field("payload", "payload (JSON)", "json", hint='e.g. {"ok": true}; empty: null'),
            ),
            _signal,
            _unfinished,
        ),
        Action(
            "message",
            "Send a message",
            "Send a message on topic {topic} to run {run}?",
            (
                Field("topic", "topic", required=True),
                Field("payload", "payload (JSON)", "json"),
                Field(
                    "idempotency_key", "idempotency key", hint="a repeated key is delivered once"
                ),
            ),
            _message,
            _unfinished,
        ),
        Action(
            "resume",
            "Resume",
            "Make run {run} running again from its last checkpoint, for the workers?",
            (),
            _resume,
            lambda cp: cp.status in ("failed", "cancelled"),
        ),
        Action(
            "fork",
            "Fork",
            "Start run {new_run_id} from the state of run {run} after step {at_step}?",
            (
                Field("new_run_id", "new run id", required=True),
                Field("at_step", "after step", "int", required=True),
                Field("update", "update (JSON object)", "json", hint="merged into the state"),
            ),
            _fork,
        ),
        Action(
            "cancel",
            "Cancel the run",
            "Cancel run {run}? It starts no other step or call, and nothing runs it again.",
            (Field("reason", "reason", hint="kept with the run"),),
            _cancel,
            _unfinished,
            danger=True,
        ),
    )
}


def offered(cp: Checkpoint) -> list[Action]:
    """The actions the run's page offers."""
    return [a for a in ACTIONS.values() if a.offered(cp)]


def values(action: Action, form: Mapping[str, str]) -> dict[str, Any]:
    """The action's fields from a submitted form; ``Refused`` for a bad value."""
    out: dict[str, Any] = {}
    for f in action.fields:
        text = form.get(f.name, "").strip()
        if f.required and not text:
            raise Refused(f"{f.label}: required")
        if f.kind == "json":
            try:
                out[f.name] = json.loads(text) if text else None
            except ValueError as exc:
                raise Refused(
                    f'{f.label}: not JSON ({exc}); give a JSON value, e.g. {{"ok": true}}'
                ) from None
        elif f.kind == "int":
            if not text.lstrip("-").isdigit():
                raise Refused(f"{f.label}: {text!r} is not a whole number")
            out[f.name] = int(text)
        else:
            out[f.name] = text
    return out


def values_of_json(action: Action, body: Mapping[str, Any]) -> dict[str, Any]:
    """The action's fields from a JSON object (the API): a JSON field takes any value,
    a text field a string, a whole number an int; ``Refused`` naming a bad or unknown
    field."""
    names = {f.name for f in action.fields}
    unknown = sorted(set(body) - names - {"run_ids"})
    if unknown:
        known = ", ".join(sorted(names)) or "none"
        raise Refused(
            f"{action.name} takes no field {', '.join(map(repr, unknown))}; its fields: {known}"
        )
    out: dict[str, Any] = {}
    for f in action.fields:
        value = body.get(f.name)
        if f.required and value in (None, ""):
            raise Refused(f"{f.name}: required")
        if f.kind == "json":
            out[f.name] = value
        elif f.kind == "int":
            if not isinstance(value, int) or isinstance(value, bool):
                raise Refused(f"{f.name}: {value!r} is not a whole number")
            out[f.name] = value
        else:
            if value is not None and not isinstance(value, str):
                raise Refused(f"{f.name}: {value!r} is not a string")
            out[f.name] = (value or "").strip()
    return out


def question(action: Action, run_id: str, v: Mapping[str, Any]) -> str:
    shown = {k: (val if isinstance(val, str) else json.dumps(val)) for k, val in v.items()}
    return action.question.format(run=run_id, **shown)


def perform(action: Action, store: Store, run_id: str, v: dict[str, Any]) -> str:
    """Make the call; what the library refuses is ``Refused`` with its message."""
    try:
        return action.call(store, run_id, v)
    except (DurableError, ValueError, TypeError) as exc:  # a bad name or value: refused
        raise Refused(str(exc)) from exc
