"""Schedules: one run per tick of a cron expression, across any number of workers.

``Schedule(workflow, cron="*/5 * * * *", start_at=None, catch_up="one")`` is served
by the worker (``durable-steps worker`` given it among its workflows, or ``serve``):
at each look a worker asks which ticks have come (``due``) and starts them
(``Workflow.start``), then looks for runs to take as always. The cron expression is
read by croniter (the ``[schedules]`` extra): five fields, or six with seconds last;
ticks are in UTC.

- **One run per tick.** A tick's run is named by the schedule and the tick time --
  ``NAME@2026-12-04T18:00:00Z`` -- and created by a create-only start: a second
  worker starting the same tick finds it there and moves on. So any number of workers
  may race for a tick, and none is started twice, whatever crashes.
- **None missed while a worker lives.** The schedule's record -- a checkpoint of the
  reserved run id ``durable-schedule~NAME``, changed only by conditional saves --
  holds the newest tick handled (``last``). A look starts every tick after ``last``
  that came within ``grace`` seconds (default 60: a worker looks every
  ``--interval``, so only a tick that came while no worker lived is older), then
  moves ``last`` forward. A worker that dies between starting ticks and moving
  ``last`` leaves them to the next look, which finds them started already.
- **Ticks missed while no worker lived** -- older than ``grace`` when first seen --
  are, as ``catch_up`` says: ``"one"``: the newest of them is started once, with
  ``"caught_up": true`` in its input (however many were missed); ``"skip"``: none.
- ``start_at`` (a timezone-aware ``datetime`` or epoch seconds): no tick before it
  runs. Without it a new schedule begins with the first tick after a worker first
  sees it.
- A run's input is the schedule's ``input`` plus ``"scheduled_at"`` (the tick, epoch
  seconds) and ``"caught_up"``; its queue is its workflow's, so a queue's limits hold
  for scheduled runs too.
- ``schedule.start_due(store)`` (and ``start_due_async``) is one look, for code that
  serves a schedule without the worker (a platform's timer trigger, a test).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ..runner.drivers import _async_only, _sync_only
from ..runner.requests import Load, Request, Save, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.workflow import Workflow, placement, start_program
from ..seam.checkpoint import Checkpoint
from ..seam.errors import ConflictError, MissingExtraError, RunCancelledError
from ..seam.rules import check_name
from ..seam.state import freeze, frozen_state
from ..seam.store import AsyncStore, Store

RECORD_PREFIX = "durable-schedule~"
_TRIES = 8


def _croniter() -> Any:
    try:
        from croniter import croniter
    except ImportError as exc:
        raise MissingExtraError(
            "Schedule needs croniter, which reads cron expressions: pip install "
            "'durable-steps[schedules]'",
            variable="Schedule",
        ) from exc
    return croniter


@dataclass(frozen=True)
class Schedule:
    """Runs of ``workflow`` at each tick of ``cron`` (see the top)."""

    workflow: Workflow
    cron: str
    start_at: datetime | float | None = None
    catch_up: Literal["one", "skip"] = "one"
    name: str = ""
    """Names the schedule's record and its runs ("": the workflow's name)."""
    input: Mapping[str, Any] = field(default_factory=dict)
    grace: float = 60.0
    """A tick seen later than this (seconds) came while no worker lived: ``catch_up``."""

    def __post_init__(self) -> None:
        if not isinstance(self.workflow, Workflow):
            raise TypeError(f"Schedule needs a Workflow, not {self.workflow!r}")
        object.__setattr__(self, "name", check_name(self.name or self.workflow.name, "name"))
        if not isinstance(self.cron, str) or not _croniter().is_valid(self.cron):
            raise ValueError(
                f"schedule {self.name!r}: {self.cron!r} is not a cron expression; give five "
                "fields (minute hour day month weekday, e.g. '*/5 * * * *') or six with "
                "seconds last"
            )
        if self.catch_up not in ("one", "skip"):
            raise ValueError(
                f"schedule {self.name!r}: catch_up must be 'one' (start the newest missed "
                f"tick once) or 'skip', not {self.catch_up!r}"
            )
        if isinstance(self.start_at, datetime):
            if self.start_at.tzinfo is None:
                raise ValueError(
                    f"schedule {self.name!r}: start_at must be timezone-aware (e.g. "
                    "datetime(..., tzinfo=UTC)), or epoch seconds"
                )
            object.__setattr__(self, "start_at", self.start_at.timestamp())
        elif self.start_at is not None and (
            not isinstance(self.start_at, int | float) or isinstance(self.start_at, bool)
        ):
            raise TypeError(f"schedule {self.name!r}: start_at is {self.start_at!r}")
        if not (isinstance(self.grace, int | float) and self.grace > 0):
            raise ValueError(f"schedule {self.name!r}: grace must be positive seconds")
        object.__setattr__(self, "input", dict(self.input))

    def start_due(self, store: Store, *, now: float | None = None) -> list[str]:
        """Start the ticks that have come (what each look of a worker does); the run ids
        this call created. ``now``: the time to judge by (default: the clock's)."""
        _sync_only(store)
        return execute(due(self, time.time() if now is None else now), blocking_io(store))

    async def start_due_async(self, store: AsyncStore, *, now: float | None = None) -> list[str]:
        """``start_due`` for async stores."""
        _async_only(store)
        return await execute_on(due(self, time.time() if now is None else now), store)

    @property
    def record_id(self) -> str:
        return RECORD_PREFIX + self.name

    def run_id(self, tick: float) -> str:
        """The run of one tick: the schedule's name and the tick's UTC time."""
        return tick_run_id(self.name, tick)

    def ticks(self, last: float, now: float) -> tuple[list[float], float | None]:
        """The ticks after ``last`` up to ``now``: those within ``grace`` (oldest first),
        and the newest older one (missed while no worker lived), if any."""
        back = _croniter()(self.cron, datetime.fromtimestamp(now, UTC))
        recent: list[float] = []
        while (t := float(back.get_prev(float))) > last and t > now - self.grace:
            recent.append(t)
        return recent[::-1], (t if t > last else None)


def tick_run_id(name: str, tick: float) -> str:
    """The run id of schedule ``name``'s tick at ``tick``: the name and the tick's UTC
    time (also how the fleet overview finds a schedule's last run)."""
    when = datetime.fromtimestamp(tick, UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.microsecond:
        text += f".{when.microsecond:06d}"
    return f"{name}@{text}Z"


def due(schedule: Schedule, now: float) -> Generator[Request, Any, list[str]]:
    """Start the ticks of ``schedule`` that have come (see the top); the run ids this
    call created. A program of loads and saves, for a blocking or an async store."""
    rid, w = schedule.record_id, schedule.workflow
    q = w.queue
    placed = placement(None if q is None else q.name, None if q is None else q.priority, None)
    for _ in range(_TRIES):
        record: Checkpoint | None = yield Load(rid)
        if record is None:
            start_at = schedule.start_at  # (epoch seconds by now: __post_init__)
            last = now if not isinstance(start_at, int | float) else start_at - 1e-6
        else:
            last = float(record.state["last"])
        recent, missed = schedule.ticks(last, now)
        ticks = [(t, False) for t in recent]
        if missed is not None and schedule.catch_up == "one":
            ticks.insert(0, (missed, True))
        created: list[str] = []
        for tick, caught_up in ticks:
            run_id = schedule.run_id(tick)
            given = {**schedule.input, "scheduled_at": tick, "caught_up": caught_up}
            try:
                if (
                    yield from start_program(
                        w.name, run_id, given, version=w.version, timeout=w.timeout, placed=placed
                    )
                ):
                    created.append(run_id)
            except RunCancelledError:
                pass  # started, and cancelled since: it counts as started
        newest = max([last, *recent, *([missed] if missed is not None else [])])
        if record is not None and newest == last:
            return created
        saved = Checkpoint(
            run_id=rid,
            step=-1,
            state=frozen_state({"last": newest, "cron": schedule.cron}, rid),
            etag=None if record is None else record.etag,
            status="waiting",
            signals=freeze({}, "", rid, 0, "signal payload"),
        )
        try:
            yield Save(saved)
        except ConflictError:
            continue  # another worker moved it meanwhile: look again (starts are idempotent)
        return created
    return []  # busy beyond reason: the next look tries again


def split(targets: Iterable[Workflow | Schedule]) -> tuple[list[Workflow], list[Schedule]]:
    """A worker's targets: its workflows (a schedule's included) and its schedules."""
    workflows: list[Workflow] = []
    schedules: list[Schedule] = []
    for target in targets:
        if isinstance(target, Schedule):
            schedules.append(target)
        w = target.workflow if isinstance(target, Schedule) else target
        if not any(w is known for known in workflows):
            workflows.append(w)
    names = [s.name for s in schedules]
    if len(set(names)) != len(names):
        raise ValueError(f"two schedules share a name among {names}; give each a name=")
    return workflows, schedules


class Ticker:
    """A worker's side of its schedules: ``poll`` starts the due ticks of each, at most
    once per ``every`` seconds (monotonic), however often it is asked."""

    def __init__(self, store: Store, schedules: list[Schedule], every: float) -> None:
        self.store, self.schedules, self.every, self.next = store, schedules, every, 0.0

    def poll(self) -> list[str]:
        """The run ids of the ticks this call started."""
        if not self.schedules or time.monotonic() < self.next:
            return []
        self.next = time.monotonic() + self.every
        return [run_id for s in self.schedules for run_id in s.start_due(self.store)]
