"""Fork and rewind: ``fork_run(store, run_id, new_run_id, at_step=k,
update=None, at_call=None)`` (and ``fork_run_async``) makes a new run whose state is
the source's after step k (its history keeps it: ``seam.history``), plus ``update`` (a
JSON object of top-level keys), continuing at step k+1.

- ``at_step=-1`` (or ``at_step`` left out with ``at_call`` given): before the first
  step -- the run's input, and the first step's calls. A code-first run
  (``durable.workflow``) is one step whose history is its calls, so this is how it is
  forked: ``fork_run(store, rid, new, at_call=3)`` (``RunHandle.fork(new, at_call=3)``,
  ``runs fork RID NEW --at-call 3``) replays its first three recorded calls from their
  results and runs the rest live. A step-list run forked there starts over from its
  input, keeping the first step's first n calls.
- ``at_call=n``: the new run keeps the first n recorded operations (calls, sleeps,
  waits) of step k+1 in the order they were made (the time each was recorded, as
  ``runs history`` lists them), as the source's journal held them when that step
  completed (or holds them now, when the source is there): run again, the step replays
  those -- each by its place or its key -- and runs the rest: an agent rewound to just
  before a model request, to run it again with a changed prompt (``update``).
- The new run's next step has not been started (attempt 0, as a run ``start`` made):
  however often the source tried it, its first attempt in the fork is attempt 1 --
  for ``current_step().attempt``, its ``Retry``, ``max_attempts`` and its history.
- The new run is recorded as forked (``Checkpoint.forked_from``: source, step, call,
  when; ``runs show`` says so), carries the source's workflow, and its ``trace`` is the
  source's first attempt's, so its first span links to the source's trace.
- It is one create-only save (``etag=None``) after reads: the source is never written,
  and a crash at any point leaves the new run absent or whole (the stores' create is
  atomic: a new file renamed into place; segments, then the head that commits them).
- Bad input changes nothing: an unknown source (``RunNotFoundError``), a step its
  history does not keep or a call beyond those recorded (``StepNotKeptError``), a new
  id that exists (``ConflictError``), a bad argument (``ValueError``, ``InvalidStateError``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Mapping
from typing import Any

from ..runner.errors import not_found
from ..runner.requests import LoadAt, LoadHead, Request, Save, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.telemetry import log
from ..seam.checkpoint import CallRecord, Checkpoint
from ..seam.errors import ConflictError, StepNotKeptError
from ..seam.rules import check_run_id
from ..seam.state import check_json
from ..seam.store import AsyncStore, Store


def fork_run(
    store: Store,
    run_id: str,
    new_run_id: str,
    *,
    at_step: int | None = None,
    update: Mapping[str, Any] | None = None,
    at_call: int | None = None,
) -> Checkpoint:
    """Fork ``run_id`` after step ``at_step`` (-1, or left out with ``at_call``: before
    the first step) into ``new_run_id`` (see the top); the new run's checkpoint as
    stored. Run it (``run``, ``Workflow.run``, a worker) to go on."""
    return execute(_fork(run_id, new_run_id, at_step, update, at_call), blocking_io(store))


async def fork_run_async(
    store: AsyncStore,
    run_id: str,
    new_run_id: str,
    *,
    at_step: int | None = None,
    update: Mapping[str, Any] | None = None,
    at_call: int | None = None,
) -> Checkpoint:
    """``fork_run`` for async stores."""
    return await execute_on(_fork(run_id, new_run_id, at_step, update, at_call), store)


def _fork(
    run_id: str,
    new_run_id: str,
    at_step: object,
    update: Mapping[str, Any] | None,
    at_call: object,
) -> Generator[Request, Any, Checkpoint]:
    check_run_id(run_id)
    check_run_id(new_run_id)
    if new_run_id == run_id:
        raise ValueError(f"a fork needs a new run id, not the source's own ({run_id!r})")
    if at_call is not None and (type(at_call) is not int or at_call < 0):
        raise ValueError(f"at_call must be a number of recorded calls (from 0), not {at_call!r}")
    if at_step is None:
        if at_call is None:
            raise ValueError(
                "give at_step (the completed step to fork after) or at_call (the recorded "
                "calls of the first step to keep: a code-first run's calls); nothing was forked"
            )
        at_step = -1
    if type(at_step) is not int or at_step < -1:
        raise ValueError(
            f"at_step must be a completed step's index (from 0), or -1 for before the first "
            f"step, not {at_step!r}"
        )
    if update is not None:
        if not isinstance(update, Mapping):
            raise ValueError(
                f"update must be a JSON object of top-level keys, not a {type(update).__name__}"
            )
        check_json(dict(update), new_run_id)
    source = yield LoadAt(run_id, at_step)
    if source is None:
        raise not_found(run_id, "nothing was forked")
    calls = _first_calls(source, at_call)
    if (yield LoadHead(new_run_id)) is not None:
        raise ConflictError(
            f"run {new_run_id!r} exists already, so {run_id!r} was not forked into it: "
            "choose another id for the fork (or delete that run first)",
            run_id=new_run_id,
        )
    state = dict(source.state)
    if update:
        state.update(update)
    fork = Checkpoint(
        run_id=new_run_id,
        step=at_step,
        state=state,
        steps=source.steps,
        status="running",
        attempt=0,  # step k+1 has not been started in the fork: its first claim is attempt 1
        workflow=source.workflow,
        trace=source.trace,
        calls=calls,
        forked_from={"run": run_id, "step": at_step, "call": at_call, "at": time.time()},
    )
    saved: Checkpoint = yield Save(fork)  # create-only: a run made meanwhile wins
    log.info("run %r forked from %r after step %d, call %s", new_run_id, run_id, at_step, at_call)
    return saved


def _first_calls(source: Checkpoint, at_call: int | None) -> tuple[CallRecord, ...]:
    """The first ``at_call`` records of the next step, in the order they were made: by
    the time recorded, as ``runs history`` lists them (unfinished ones last). A call
    replays by its place or its key, whichever records are kept: those left out run."""
    if not at_call:
        return ()
    made = sorted(
        source.calls,
        key=lambda r: (_when(r), str(r.get("task", "")), r.get("i", 0)),
    )
    if len(made) < at_call:
        raise StepNotKeptError(
            f"run {source.run_id!r}: step {source.step + 1} has {len(made)} recorded calls "
            f"kept, fewer than at_call={at_call}: give at_call from 0 to {len(made)}; nothing "
            "was forked (see 'durable-steps runs show' and 'runs history')",
            run_id=source.run_id,
            step=source.step + 1,
        )
    return tuple(made[:at_call])


def _when(record: Mapping[str, Any]) -> float:
    at = record.get("at")
    return float(at) if isinstance(at, int | float) and not isinstance(at, bool) else math.inf
