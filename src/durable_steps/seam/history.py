"""History: each completed step of a run as its store keeps it.

What is kept is a setting of the *store* -- ``history="steps"`` (the default: every
completed step), ``"none"`` (only the latest checkpoint, as before) or
``keep_last=N`` (at least the last N completed steps) -- given where the store is
made (``FileStore(path, history=...)``, ``CosmosStore(..., history=...)``,
``MemoryStore(history=...)``, or ``DURABLE_HISTORY`` / ``DURABLE_HISTORY_KEEP_LAST``
for ``store_from_env``). Why the store and not the run: history is what a store
*retains* of what its saves wrote anyway, decided where it compacts (the file log) or
folds (Cosmos DB segments); the runner writes the same saves either way, so it needs
no setting, no head carries one, and every run of a store is kept alike (like
``finished_ttl``, the other retention setting).

History shares bytes with the saves, per backend:

- the file store's log of records *is* each save's update: a compaction moves the
  superseded log into ``history/`` (a hard link, no copy) instead of dropping it;
- Cosmos DB's delta segments are each save's update: a fold keeps the generations it
  supersedes, and with history on the data is inline in the head only until the
  run's first step completes, so each step's update is a segment (a step's completing
  save always writes one, with a small ``hist`` marker: the step, its name, time,
  attempts and size);
- the memory store keeps each completing save's document (bytes it made anyway).

A step's entry (``StepRecord``): its index, name, when it completed, how many
attempts it took, the bytes of its update and the index of its calls
(``seam.callindex``: each store builds it from the journal the completing save drops,
the file log's walk from the version before). ``load_at(run_id, k)`` gives the
checkpoint after step k, with ``calls`` = the journal of step k+1 as it stood when
that step completed (or as it stands, when the run is at step k+1): what a fork with
``at_call`` keeps. ``load_at(run_id, -1)`` is the run before its first step: its input,
with step 0's journal -- a code-first run is one step whose history is its calls, so a
fork at one of them starts there. Walking a run's versions in order (``Walk``) is shared by the
stores that replay a log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import attempts, callindex
from .attempts import Attempt
from .callindex import CallEntry
from .checkpoint import Checkpoint
from .errors import ConfigurationError, StepNotKeptError

MODES = ("steps", "none")


@dataclass(frozen=True)
class StepRecord:
    """One completed step as history keeps it."""

    step: int
    name: str
    at: float | None
    """When it completed (seconds since the epoch); None where not kept."""
    attempts: int | None = None
    """How many attempts it took (None: not known, e.g. ``history="none"``)."""
    size: int | None = None
    """The bytes its update took as the store wrote it."""
    calls: tuple[CallEntry, ...] | None = None
    """Its durable operations in the order made, never their results
    (``seam.callindex``); None: not kept (an entry written before they were)."""
    calls_left_out: int = 0
    """How many earlier operations the bounded index left out."""
    attempt_log: tuple[Attempt, ...] = ()
    """Its attempts: when each began and how it ended (``seam.attempts``); empty:
    not recorded (an entry written before they were)."""


def with_calls(entry: StepRecord, stored: object) -> StepRecord:
    """``entry`` with the call index stored beside it (``callindex.build``), if any,
    and the step's attempt records kept there."""
    calls, left_out = callindex.read(stored)
    if calls is not None:
        entry = replace(entry, calls=calls, calls_left_out=left_out)
    if isinstance(stored, Mapping) and isinstance(stored.get("a"), list):
        entry = replace(entry, attempt_log=attempts.of_step(stored["a"], entry.step))
    return entry


def index_of(
    records: Iterable[Mapping[str, Any]] | None, log: object, step: int
) -> dict[str, Any] | None:
    """What a store keeps beside a completed step's entry: the index of its journal
    (None: not known) and its attempt records from the completing save's log."""
    rows = attempts.stored_of_step(log if isinstance(log, list | tuple) else None, step)
    return callindex.build(records, rows)


@dataclass(frozen=True)
class Keep:
    """What a store keeps: ``history`` is ``"steps"`` or ``"none"``; ``keep_last``:
    at least the last N completed steps (None: all)."""

    history: str = "steps"
    keep_last: int | None = None

    @property
    def on(self) -> bool:
        return self.history == "steps"


def keep(history: object = "steps", keep_last: object = None) -> Keep:
    """The store's history setting, checked."""
    if history not in MODES:
        raise ConfigurationError(
            f"history must be one of {', '.join(MODES)}, not {history!r} (DURABLE_HISTORY)",
            variable="DURABLE_HISTORY",
        )
    if keep_last is not None and (type(keep_last) is not int or keep_last < 1):
        raise ConfigurationError(
            f"keep_last must be a whole number of steps from 1, not {keep_last!r} "
            "(DURABLE_HISTORY_KEEP_LAST)",
            variable="DURABLE_HISTORY_KEEP_LAST",
        )
    return Keep(str(history), keep_last)


def latest(cp: Checkpoint | None) -> list[StepRecord] | None:
    """The history of a store that keeps none: the latest completed step alone."""
    if cp is None:
        return None
    if cp.step < 0:
        return []
    return [StepRecord(cp.step, cp.steps[-1], None)]


def latest_at(cp: Checkpoint | None, step: int) -> Checkpoint | None:
    """``load_at`` of a store that keeps no history: the latest checkpoint, if asked."""
    if cp is None:
        return None
    if step != cp.step:
        raise not_kept(cp.run_id, step, [] if cp.step < 0 else [cp.step])
    return cp


def not_kept(run_id: str, step: int, kept: Iterable[int]) -> StepNotKeptError:
    steps = sorted(kept)
    if step == -1:
        return StepNotKeptError(
            f"run {run_id!r} keeps no checkpoint before its first step (its input and the "
            "first step's calls): it was started before history kept them, or its store "
            "keeps fewer (history='none', keep_last=N); see 'durable-steps runs history RUN'",
            run_id=run_id,
            step=step,
        )
    have = (
        "it has no completed step"
        if not steps
        else f"its kept steps are {steps[0]} to {steps[-1]}"
        if steps == list(range(steps[0], steps[-1] + 1))
        else f"its kept steps are {steps}"
    )
    return StepNotKeptError(
        f"run {run_id!r} has no kept checkpoint after step {step}: {have} "
        "(see 'durable-steps runs history RUN'; a store with history='none' or keep_last=N "
        "keeps fewer)",
        run_id=run_id,
        step=step,
    )


@dataclass
class Version:
    """One stored version of a run, as a log replays it: its fields (a document but
    its data), its data readers, and the bytes of the update that made it."""

    fields: Mapping[str, Any]
    size: int
    state: Callable[[], dict[str, Any]]
    """The state after it (a copy the walk may keep)."""
    calls: Callable[[], list[Any]]
    """The journal after it (a copy)."""


class Walk:
    """Walks a run's versions in order; notes each completed step and, when asked for
    step ``want``, the version after it and the journal of step ``want + 1`` as it
    stood when that step completed (or at the end)."""

    def __init__(self, want: int | None = None) -> None:
        self.want = want
        self.entries: list[StepRecord] = []
        self.step = -1
        self.attempt: int | None = None
        self.found: tuple[Mapping[str, Any], dict[str, Any]] | None = None
        self.journal: list[Any] | None = None
        """Step ``want + 1``'s journal when it completed; None until it does."""
        self._pending: list[Any] | None = None
        self._before: Version | None = None

    def add(self, v: Version) -> None:
        step = v.fields["step"]
        if self.want == -1 and self._before is None and step == -1:
            self.found = (v.fields, v.state())  # the run's first version: its input
        if step > self.step:
            names = v.fields.get("steps")
            name = v.fields.get("step_name") or (names[-1] if names else "")
            entry = StepRecord(step, str(name), v.fields.get("updated_at"), self.attempt, v.size)
            # The journal the completing save dropped is the version before's.
            before = self._before
            known = before is not None and before.fields.get("step") == step - 1
            journal = before.calls() if before is not None and known else None
            entry = with_calls(entry, index_of(journal, v.fields.get("attempt_log"), step))
            self.entries.append(entry)
            if self.found is not None and self.journal is None:
                self.journal = self._pending or []
            if step == self.want:
                self.found, self.journal = (v.fields, v.state()), None
        self.step = step
        self._before = v
        self.attempt = v.fields.get("attempt")
        if self.found is not None and self.journal is None:
            # Taken now: a log's replay changes the journal in place as it goes on.
            self._pending = v.calls()

    def at(self, run_id: str) -> tuple[Mapping[str, Any], dict[str, Any], list[Any]]:
        """The version after step ``want``: its fields, state and the journal above."""
        if self.found is None or self.want is None:
            raise not_kept(run_id, -1 if self.want is None else self.want, self.kept())
        journal = self.journal if self.journal is not None else self._pending or []
        return self.found[0], self.found[1], journal

    def kept(self) -> list[int]:
        return [e.step for e in self.entries]


def checkpoint_at(
    run_id: str, fields: Mapping[str, Any], state: dict[str, Any], calls: list[Any]
) -> Checkpoint:
    """The checkpoint after a kept step, as ``load_at`` gives it: the version's fields
    and state, the next step's journal ``calls``; no etag (it is not the run's latest)."""
    steps = tuple(fields.get("steps") or ())
    step = fields["step"]
    return Checkpoint(
        run_id=run_id,
        step=step,
        state=state,
        steps=steps[: step + 1],
        updated_at=fields.get("updated_at"),
        status="completed" if fields.get("status") == "completed" else "running",
        workflow=fields.get("workflow"),
        trace=fields.get("trace"),
        calls=tuple(calls),
    )
