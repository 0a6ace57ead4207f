"""Child runs: a step starts runs of other workflows and waits for their results,
holding no worker while it waits.

``start_child(workflow, run_id, input)`` and ``await_child(run_id)`` (and
``start_child_async`` / ``await_child_async`` under ``run_async``) are durable
operations of the step's journal, numbered like ``call`` (``journal.take``):

- **start_child** creates the child -- a run of ``workflow`` (a ``Workflow`` or its
  name) for the workers, like ``Workflow.start``, its ``parent`` this run -- with a
  create-only save, then records that it did. A crash before the child exists starts
  it on the next attempt; a crash after it exists and before the record finds it there
  (same workflow, same parent) and records it: never lost, never two.
- **await_child** looks at the child's head. A finished child's outcome -- its final
  state, or its failure, or its cancellation -- is recorded in the journal and
  returned (a failure raises ``RunFailedError``, a cancellation ``RunCancelledError``,
  each naming the child): on replay the recorded outcome comes back without a read.
  An unfinished child suspends the parent like ``wait_for_signal``: the run is saved
  ``waiting`` for the signal ``child:RUN_ID``, its lease released, until ``poll``
  seconds from now at most.
- **The child wakes its parent.** After the child's final save (completed or failed)
  the runner delivers the signal ``child:RUN_ID`` to the parent's head -- one
  conditional head write, no polling of children -- so the parent is ``running``
  again and a worker resumes it; its ``await_child`` then finds the child finished. A
  crash between the child's final save and that delivery is covered by the parent's
  ``poll``: its wake time comes, a worker resumes it, and it looks at the child.
- **Cancelling the parent cancels its children**: ``cancel_run`` of a run waiting on a
  child cancels the children its running step started (their records are in its
  journal, read then), and theirs. Any child also looks at its parent's head before
  each of its steps (``parent_cancelled``): a parent cancelled while it ran, with
  children it had not awaited yet, stops them at their next step boundary. A child
  cancelled alone wakes its parent, whose ``await_child`` raises.

Fan-out and fan-in: start many children, then await each; the parent wakes as
children finish, and each ``await_child`` of a finished child returns at once.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping
from typing import Any, Protocol

from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import ConflictError, RunFailedError, StepMismatchError, Suspend
from ..seam.rules import check_name, check_run_id
from ..seam.state import freeze, frozen_state, thaw
from .changes import update_run
from .clock import now
from .errors import cancelled, not_found
from .journal import Journal, SaveRecord, _do_async, _do_sync, _journal
from .requests import Load, LoadHead, Request, Save, execute, execute_async
from .step import current_step
from .telemetry import log

ENDS = ("completed", "failed", "cancelled")
POLL = 60.0
"""How long a parent waits for a child's signal before it looks at the child itself."""


def child_signal(run_id: str) -> str:
    """The signal a child delivers to its parent when it ends."""
    return f"child:{run_id}"


class Named(Protocol):
    """A ``Workflow`` as a child is started by: its name."""

    @property
    def name(self) -> str: ...


def _name(workflow: Named | str) -> str:
    name = workflow if isinstance(workflow, str) else workflow.name
    return check_name(name, "start_child(workflow=...): a Workflow or a workflow's name")


def start_child(workflow: Named | str, run_id: str, input: Mapping[str, Any] | None = None) -> str:
    """Start run ``run_id`` of ``workflow`` as a child of this run (see the top); its
    run id. Inside a step run by ``run`` (``start_child_async`` under ``run_async``)."""
    journal = _journal("start_child")
    _sync_step(journal, "start_child")
    return execute(_start(journal, _name(workflow), run_id, input), _do(journal))


async def start_child_async(
    workflow: Named | str, run_id: str, input: Mapping[str, Any] | None = None
) -> str:
    """``start_child`` for steps run by ``run_async``."""
    journal = _journal("start_child_async")
    return await execute_async(_start(journal, _name(workflow), run_id, input), _ado(journal))


def await_child(run_id: str, *, poll: float = POLL) -> dict[str, Any]:
    """The final state of child ``run_id``; until it ends, the run waits holding no
    worker (see the top). ``RunFailedError`` or ``RunCancelledError`` if it did not
    complete."""
    journal = _journal("await_child")
    _sync_step(journal, "await_child")
    return execute(_await(journal, run_id, poll), _do(journal))


async def await_child_async(run_id: str, *, poll: float = POLL) -> dict[str, Any]:
    """``await_child`` for steps run by ``run_async``."""
    journal = _journal("await_child_async")
    return await execute_async(_await(journal, run_id, poll), _ado(journal))


def _sync_step(journal: Journal, what: str) -> None:
    if journal.driven.is_async:
        raise TypeError(f"{what}() inside a step run by run_async(): use 'await {what}_async()'")


def _do(journal: Journal) -> Any:
    """A sync step's requests: records through the run, other runs' I/O straight to the
    store (never through this run's lease keeper)."""
    io = journal.driven.io
    return lambda op: _do_sync(op) if isinstance(op, SaveRecord) else io(op)


def _ado(journal: Journal) -> Any:
    io = journal.driven.io

    async def do(op: Any) -> Any:
        return await (_do_async(op) if isinstance(op, SaveRecord) else io(op))

    return do


def _start(
    journal: Journal, workflow: str, run_id: str, input: Mapping[str, Any] | None
) -> Generator[Any, Any, str]:
    check_run_id(run_id)
    parent = journal.run.run_id
    key, record = journal.take("start_child", run_id)
    if record is not None:
        return run_id  # created and recorded by an earlier attempt
    journal.check()
    ctx = current_step()
    state = frozen_state({} if input is None else input, run_id)
    while True:
        head: Checkpoint | None = yield LoadHead(run_id)
        if head is not None:
            if (head.workflow, head.parent) != (workflow, parent):
                raise StepMismatchError(
                    f"run {parent!r} cannot start child {run_id!r}: a run of that id exists "
                    f"already (workflow {head.workflow!r}, parent {head.parent!r}); nothing "
                    "was started. Give children ids of their own, e.g. the parent's id and a "
                    "suffix",
                    run_id=parent,
                )
            break  # created by an attempt that died before recording it: not twice
        fresh = Checkpoint(
            run_id=run_id,
            step=-1,
            state=state,
            status="running",
            workflow=workflow,
            attempt=0,
            signals=freeze({}, "", run_id, 0, "signal payload"),
            parent=parent,
        )
        try:
            yield Save(fresh)
        except ConflictError:
            continue  # created meanwhile: look at what is there
        log.info("run %r started child %r (workflow %s)", parent, run_id, workflow)
        break
    done = {**key, "name": run_id, "kind": "start_child", "at": time.time()}
    done["step_attempt"] = ctx.attempt
    rec = freeze(done, "", parent, 0, "child record")
    yield SaveRecord(journal, rec)
    journal.recorded(key, rec)
    return run_id


def _await(journal: Journal, run_id: str, poll: float) -> Generator[Any, Any, dict[str, Any]]:
    check_run_id(run_id)
    if not (isinstance(poll, int | float) and poll > 0):
        raise ValueError(f"await_child(poll=...) takes positive seconds, not {poll!r}")
    key, record = journal.take("await_child", run_id)
    if record is not None and "outcome" in record:
        return _outcome(run_id, record["outcome"])
    journal.check()
    ctx = current_step()
    head: Checkpoint | None = yield LoadHead(run_id)
    if head is None:
        raise not_found(run_id, "await_child has no child to wait for (start it with start_child)")
    if head.status not in ENDS:
        raise Suspend(child_signal(run_id), now() + poll)
    outcome: dict[str, Any] = {"status": head.status}
    if head.status == "completed":
        whole: Checkpoint | None = yield Load(run_id)
        outcome["result"] = {} if whole is None else whole.state
    elif head.status == "failed":
        outcome["error"] = dict(head.error or {})
    else:
        outcome["reason"] = head.cancel_reason
    done = {**key, "name": run_id, "kind": "await_child", "at": time.time()}
    done |= {"step_attempt": ctx.attempt, "outcome": outcome}
    rec = freeze(done, "", journal.run.run_id, 0, "child record")
    yield SaveRecord(journal, rec)
    journal.recorded(key, rec)
    return _outcome(run_id, rec["outcome"])


def _outcome(run_id: str, outcome: Mapping[str, Any]) -> dict[str, Any]:
    status = outcome["status"]
    if status == "completed":
        result: dict[str, Any] = thaw(outcome["result"])
        return result
    if status == "cancelled":
        raise cancelled(run_id, outcome.get("reason"))
    error = dict(outcome.get("error") or {})
    kind, message = error.get("type"), error.get("message")
    raise RunFailedError(
        f"child run {run_id!r} failed in step {error.get('step')} ({kind}: {message}); see "
        f"'durable-steps runs show {run_id}', fix the cause and resume it, or handle the "
        "failure in the parent",
        run_id=run_id,
        error_type=kind,
        error_message=message,
    )


# -- the child's side: waking its parent ------------------------------------------------


def notify_parent(cp: Checkpoint) -> Generator[Request, Any, None]:
    """After the child ``cp``'s final save (or its cancellation): deliver its signal to
    its parent, which wakes if it waits for it. Nothing if it has no parent; a parent
    gone, ended, or told already is left as it is."""
    if cp.parent is None or cp.status not in ENDS:
        return
    name = child_signal(cp.run_id)

    def deliver(parent: Checkpoint) -> Checkpoint | None:
        if name in parent.signals or parent.status in ("completed", "cancelled"):
            return None
        wakes = parent.status == "waiting" and parent.waiting_for == name
        return evolve(
            parent,
            signals={**parent.signals, name: {"status": cp.status}},
            status="running" if wakes else parent.status,
            wake_at=None if wakes else parent.wake_at,
            updated_at=None,
        )

    try:
        yield from update_run(
            cp.parent,
            deliver,
            missing="its child's end was not told",
            doing=f"child {cp.run_id!r} told it it ended",
            undone="it will look at the child at its poll",
        )
    except Exception as exc:  # the parent's poll finds the child ended anyway
        # A warning: the parent's poll finds the child ended; no call runs again.
        log.warning("run %r: telling parent %r it ended failed: %s", cp.run_id, cp.parent, exc)


def parent_cancelled(cp: Checkpoint) -> Generator[Request, Any, str | None]:
    """Why child ``cp`` is to be cancelled before its next step: its parent was (None:
    it has none, or the parent goes on). One read of the parent's head."""
    if cp.parent is None:
        return None
    parent: Checkpoint | None = yield LoadHead(cp.parent)
    if parent is None or parent.status != "cancelled":
        return None
    return f"its parent {cp.parent!r} was cancelled"


def waits_on_child(cp: Checkpoint) -> bool:
    """Whether ``cp`` waited on a child (before it was cancelled, say)."""
    return (cp.waiting_for or "").startswith("child:")


def children_of(cp: Checkpoint) -> list[str]:
    """The children the running step of ``cp`` (loaded whole) started."""
    return [r["name"] for r in cp.calls if r.get("kind") == "start_child"]
