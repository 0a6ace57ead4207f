"""The replayer: a run's current step re-run against code, every durable operation
answered from the run's record, nothing executed and nothing written.

Temporal's ``Replayer`` is the model: before a deploy, run the new code against the
runs in flight, and stop the deploy if one of them would take another path than the
one it recorded -- a divergence found in CI rather than as a failed (or repeated)
run in production. ``durable_steps.testing.replay`` and ``durable-steps replay``
check the runs of a store; ``upgrade_run`` checks one run against the version it
is moved to.

Design. A replay is the engine's own replay with the store's writes taken away. The
run's current step (index ``step + 1``) runs on the run's state, with a ``Journal``
of the run's records -- the journal every step attempt has: its numbering by task,
its matching of kind and name, its refusals -- and a *replay driver* in place of
``run``'s, which reads (a stream's items) but has no way to write:

- an operation with a result recorded returns it, as on any resume;
- the first operation that would do new work -- a call with no result recorded,
  a message not received yet, a child not started yet, a stream chunk not written
  yet -- finds its run "no longer ours" (``keep.lost``: how the engine stops a step
  whose lease was lost) and ends the step there, with ``StepInterrupted``: nothing
  runs. A sleep or a wait that has no record suspends the step, as it would;
- a save, which nothing reaches once the step is stopped, is refused as well.

What the step did then is the verdict (``RunReplay.outcome``):

- **replays**: each recorded operation it reached was asked for, in order, by the
  same kind and name: it stopped at its first unrecorded operation (records further
  on, e.g. of other tasks cut short by that stop, are counted as not reached), or it
  completed, suspended or raised its own error after asking for all of them;
- **diverges**: it asked for an operation that the record has under another kind or
  name (the journal's error, ``DIVERGED``), or it completed, suspended or raised
  while recorded operations were never asked for, or a recorded value no longer
  loads (an error of ours): on this code the run would fail, or do work again;
- **cannot be checked**: no such run; a plain ``run()`` or a run of a workflow (or
  version) not among those given; a completed run; completed steps this code does
  not have; or a current step that has recorded nothing yet (it starts afresh on
  any code).

A step's own code runs between its durable operations during a replay, as on every
resume: a step that writes a file or calls a service outside ``call`` does it during
a replay too. Steps must not do that anyway (each resume repeats it; Temporal asks
the same of workflow code): keep side effects inside ``call``.

One program per run (``check_run``; ``check_against`` for one given workflow),
carried out by two drivers (``replay_driver``): ``SyncReplay`` (a blocking store) and
``AsyncReplay`` (an async one). A step that is a coroutine
function runs on an event loop under either (a fresh one under ``SyncReplay``); a
plain step under ``AsyncReplay`` runs in a thread, its reads sent to the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..seam.checkpoint import STATUSES, Checkpoint
from ..seam.errors import (
    DurableError,
    NondeterminismError,
    StepMismatchError,
    Suspend,
)  # fmt: skip
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store
from .drivers import _async_only, _sync_only
from .identity import labels
from .replay_driver import AsyncReplay, NotRun, Replaying, ReplayJournal, SyncReplay
from .requests import (
    Call,
    Load,
    Request,
    execute,
    execute_async,
)  # fmt: skip
from .step import Step, StepContext
from .store_io import AsyncStoreIO, blocking_io
from .workflow import Workflow

Outcome = Literal["replays", "diverges", "cannot be checked"]
DEFAULT_STATUSES = ("running", "waiting", "failed")
"""The runs in flight: what a deploy's new code meets."""

DIVERGED: tuple[type[BaseException], ...] = (StepMismatchError,)
"""What the journal raises when a step departs from its record (``NondeterminismError``,
a ``StepMismatchError``), or refuses how it asks (``tasks``: a call from a thread)."""
Refused = NondeterminismError
"""What ``upgrade_run`` raises when a move would diverge."""


@dataclass(frozen=True)
class RunReplay:
    """One run's replay: its ``outcome`` and, in ``detail``, why."""

    run_id: str
    outcome: Outcome
    detail: str
    workflow: str | None = None
    version: str | None = None
    step: int | None = None
    step_name: str | None = None
    recorded: int = 0
    """The step's recorded operations."""
    asked: int = 0
    """How many of them the code asked for."""
    where: str | None = None
    """The operation where the replay stopped or diverged, as errors name it: ``lookup
    (1)``, ``b2 (1/1)`` (task 1's second), ``lookup [tool:call_7]`` (a keyed call)."""
    was: str | None = None
    """What the record has there (a divergence): ``call 'lookup'``."""
    now: str | None = None
    """What the code asked for there (a divergence): ``call 'enrich'``."""
    etag: str | None = None
    """The version of the run that was replayed (``upgrade_run`` moves that one only)."""
    recorded_ops: tuple[str, ...] = ()
    """The step's recorded operations, as errors name them: ``lookup (0)``, ``x [key]``."""
    asked_ops: tuple[str, ...] = ()
    """The operations the code asked for, in order."""

    @property
    def diverges(self) -> bool:
        return self.outcome == "diverges"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- the program ------------------------------------------------------------------------


def workflows_of(workflows: Workflow | Iterable[Workflow]) -> list[Workflow]:
    found = [workflows] if isinstance(workflows, Workflow) else list(workflows)
    for w in found:
        if not isinstance(w, Workflow):
            raise TypeError(f"replay() checks runs against Workflows, not {w!r}")
    return found


def check_run(run_id: str, workflows: list[Workflow]) -> Generator[Request, Any, RunReplay]:
    """Replay run ``run_id`` against the workflow of its name and version."""
    loaded: Checkpoint | None = yield Load(run_id)
    if loaded is None:
        return RunReplay(run_id, "cannot be checked", "no such run")
    chosen = _workflow_of(loaded, workflows)
    if isinstance(chosen, str):
        return _unchecked(loaded, chosen)
    return (yield from check_against(loaded, chosen))


def _workflow_of(cp: Checkpoint, workflows: list[Workflow]) -> Workflow | str:
    """The workflow whose code runs ``cp``, or why there is none."""
    if cp.workflow is None:
        return "a plain run() (no workflow name): its code is not known to the replayer"
    named = [w for w in workflows if w.name == cp.workflow]
    if not named:
        return f"no workflow {cp.workflow!r} among those given"
    same = [w for w in named if w.version == cp.version]
    if same:
        return same[0]
    if cp.version is None and len(named) == 1:
        return named[0]  # unpinned: the first claim pins it to the code that runs it
    have = ", ".join(sorted(repr(w.version) for w in named))
    return f"no version {cp.version!r} of workflow {cp.workflow!r} among those given ({have})"


def _unchecked(cp: Checkpoint, why: str, step: Step | None = None) -> RunReplay:
    return RunReplay(
        cp.run_id, "cannot be checked", why, cp.workflow, cp.version, cp.step + 1,
        None if step is None else step.name, len(cp.calls), etag=cp.etag,
    )  # fmt: skip


def check_against(loaded: Checkpoint, workflow: Workflow) -> Generator[Request, Any, RunReplay]:
    """Replay ``loaded``'s current step against ``workflow``'s code (see the top)."""
    if loaded.status == "completed":
        return _unchecked(loaded, "completed: it has no step in flight")
    names = tuple(s.name for s in workflow.steps)
    if names[: len(loaded.steps)] != loaded.steps:
        return _unchecked(loaded, f"this code's steps differ: {difference(loaded.steps, names)}")
    i = loaded.step + 1
    if i >= len(workflow.steps):
        return _unchecked(loaded, f"this code has no step {i} (it has {len(names)} steps)")
    step = workflow.steps[i]
    if not loaded.calls:
        return _unchecked(loaded, f"step {i} {step.name!r} has recorded nothing yet", step)
    program = Replaying(
        loaded.run_id, workflow.steps, workflow=workflow.name, version=workflow.version,
        max_attempts=None,
    )  # fmt: skip
    program.adopt(loaded)
    cp = program.cp
    journal = ReplayJournal(program, step)
    ctx = StepContext(
        cp.run_id, i, step.name, cp.attempt, cp.signals, cp.first_attempt, None, journal
    )
    ended: BaseException | None = None
    try:
        yield Call(step, ctx, program.state)
    except (GeneratorExit, KeyboardInterrupt, SystemExit, asyncio.CancelledError):
        raise
    except BaseException as exc:  # what the step did is the verdict
        ended = exc
    return _verdict(cp, workflow, step, journal, ended)


def _verdict(
    cp: Checkpoint,
    workflow: Workflow,
    step: Step,
    journal: ReplayJournal,
    ended: BaseException | None,
) -> RunReplay:
    suspended = isinstance(ended, Suspend)
    unasked = journal.asked.unasked(journal.records, journal.scopes.made, suspended=False)
    n = len(cp.calls)
    asked = n - len(unasked)

    def report(outcome: Outcome, detail: str, **more: Any) -> RunReplay:
        return RunReplay(
            cp.run_id, outcome, detail, cp.workflow, workflow.version, cp.step + 1, step.name,
            n, asked, etag=cp.etag, recorded_ops=tuple(labels(journal.records)),
            asked_ops=tuple(journal.asked.asked), **more,
        )  # fmt: skip

    diverged = journal.failed if isinstance(journal.failed, DIVERGED) else ended
    if journal.mismatch is not None or isinstance(diverged, DIVERGED):
        where, was, now = journal.mismatch or (None, None, None)
        return report("diverges", str(diverged), where=where, was=was, now=now)
    if isinstance(journal.failed, NotRun):
        stopped = getattr(journal.driver, "stopped", None) or "?"
        detail = f"stopped at {stopped}, the first with no result recorded; asked for "
        detail += f"{asked} of {n} recorded operation(s), in order"
        if unasked:
            detail += f"; not reached: {', '.join(labels(unasked[:5]))}"
        return report("replays", detail, where=stopped)
    if error := journal.unasked(suspended=suspended):
        return report("diverges", str(error), where=labels(unasked[:1])[0] if unasked else None)
    if isinstance(ended, Suspend):
        what = f"waited for {ended.signal or ended.topic or 'its timer'}"
    elif ended is None:
        what = "completed"
    else:
        what = f"raised {type(ended).__name__}: {ended}"
    if isinstance(ended, DurableError):
        return report("diverges", f"the step {what} on its recorded values")
    return report("replays", f"the step {what}, having asked for all {n} recorded operation(s)")


def difference(done: tuple[str, ...], names: tuple[str, ...]) -> str:
    """Where the completed steps ``done`` and a new step list ``names`` part."""
    for i, name in enumerate(done):
        if i >= len(names):
            return (
                f"it completed {len(done)} steps and the new step list has {len(names)}: "
                f"completed step {i} {name!r} is not in it"
            )
        if names[i] != name:
            return f"its completed step {i} is {name!r}; the new step list has {names[i]!r}"
    return "the step lists agree"  # (never reached: called on a difference)


# -- the API ----------------------------------------------------------------------------


def replay(
    workflows: Workflow | Iterable[Workflow],
    store: Store,
    run_ids: Iterable[str] | None = None,
    *,
    statuses: Iterable[str] = DEFAULT_STATUSES,
) -> list[RunReplay]:
    """Replay each of ``run_ids`` (default: every run of ``statuses``: those in flight)
    against the workflow of its name and version among ``workflows``, with nothing run
    and nothing written; one ``RunReplay`` per run (see the top)."""
    _sync_only(store)
    table = workflows_of(workflows)
    ids = _ids(run_ids, statuses, lambda s: [i.run_id for i in store.list_runs(status=s)])
    driver = SyncReplay(blocking_io(store))
    return [execute(check_run(run_id, table), driver.do) for run_id in ids]


async def replay_async(
    workflows: Workflow | Iterable[Workflow],
    store: AsyncStore,
    run_ids: Iterable[str] | None = None,
    *,
    statuses: Iterable[str] = DEFAULT_STATUSES,
) -> list[RunReplay]:
    """``replay`` for async stores."""
    _async_only(store)
    table = workflows_of(workflows)
    listed: dict[str, list[str]] = {}
    if run_ids is None:
        for status in _statuses(statuses):
            listed[status] = [i.run_id async for i in store.list_runs(status=status)]
    ids = _ids(run_ids, statuses, listed.__getitem__)
    driver = AsyncReplay(AsyncStoreIO(store))
    return [await execute_async(check_run(run_id, table), driver.do) for run_id in ids]


def _statuses(statuses: Iterable[str]) -> list[str]:
    chosen = [statuses] if isinstance(statuses, str) else list(statuses)
    for s in chosen:
        if s not in STATUSES:
            raise ValueError(f"statuses: {s!r} is not a status (one of {', '.join(STATUSES)})")
    return chosen


def _ids(
    run_ids: Iterable[str] | None, statuses: Iterable[str], listed: Callable[[str], list[str]]
) -> list[str]:
    if run_ids is not None:
        if isinstance(run_ids, str):
            raise TypeError(f"run_ids takes a list of run ids, not the string {run_ids!r}")
        return [check_run_id(r) for r in run_ids]
    seen: dict[str, None] = {}
    for status in _statuses(statuses):
        seen.update(dict.fromkeys(sorted(listed(status))))
    return list(seen)
