"""Workflows: named step lists, run here or handed to the workers.

``Workflow(name, steps)`` is a step list with a name; ``workflow.run(run_id,
store, input=...)`` is ``run`` that also records the name in the checkpoint, so
that a run can be resumed by anyone who knows the workflow, not only by the
code that started it (``workers.recovery``).

``workflow.start(run_id, store, input=...)`` runs nothing: it creates the run's
checkpoint -- status ``running``, no lease, no step done, the workflow's name and
``input`` as its initial state -- with a create-only save, for ``recover`` and the
worker to pick up. ``True``: it created the run; ``False``: that run of this
workflow exists already (a retried request starts nothing twice); a run of
another workflow (or of a plain ``run``) is ``StepMismatchError``, a cancelled one
``RunCancelledError``. Starting needs no import of the workflow's code: only its
name (``durable-steps runs start``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..seam.checkpoint import Checkpoint, Placement
from ..seam.errors import ConflictError, StepMismatchError
from ..seam.rules import check_name, check_run_id
from ..seam.state import freeze, frozen_state
from ..seam.store import AsyncStore, Store
from .claim import MAX_ATTEMPTS
from .deadlines import begun, check_timeout
from .drivers import _async_only, _sync_only, drive, drive_async
from .errors import cancelled
from .queues import Queue, check_partition, check_priority
from .requests import LoadHead, Request, Save, execute
from .run import RunProgram
from .step import Step
from .store_io import blocking_io, execute_on
from .telemetry import log
from .typed import typed_steps
from .versions import check_version


@dataclass(frozen=True)
class Workflow:
    """A named list of steps; runs started through it can be recovered by name."""

    name: str
    steps: Sequence[Step]
    max_attempts: int | None = field(default=MAX_ATTEMPTS, kw_only=True)
    """How many times a step of a run is started, in one round, before the run is
    failed instead (``TooManyAttemptsError``): a poison run -- its process killed
    every time, by the OOM killer say -- stops there rather than loop forever through
    the workers. 10 by default (``claim.MAX_ATTEMPTS`` says why); a step's ``Retry``
    with more attempts raises it for that step; None: no limit."""
    # -- lifecycle: versions
    version: str | None = field(default=None, kw_only=True)
    """The version of this code (e.g. ``"2026-12"``): each run is pinned to the version
    it began on, and only code of that version runs it (``versions``)."""

    # -- run deadlines ---------------------------------------------------------------------
    timeout: float | None = field(default=None, kw_only=True)
    """Seconds from a run's beginning to its deadline: a run not finished by then is
    cancelled (reason ``"deadline"``; ``runner.deadlines``). None: no deadline."""

    queue: Queue | None = field(default=None, kw_only=True)
    """The queue its runs are taken under (``runner.queues``, ``workers.queues``)."""

    state: Any = field(default=None, kw_only=True)
    """The type of the run's state (a Pydantic model or a dataclass of its fields): each
    step gets the state validated as it instead of a mapping (``typed.typed_steps``).
    None: a read-only mapping."""

    def __post_init__(self) -> None:
        check_name(self.name, "workflow name")
        check_version(self.version)
        object.__setattr__(self, "timeout", check_timeout(self.timeout, "Workflow(timeout=)"))
        if self.queue is not None and not isinstance(self.queue, Queue):
            raise TypeError(f"workflow {self.name!r}: queue= takes a Queue, not {self.queue!r}")
        object.__setattr__(self, "steps", tuple(self.steps))
        if self.state is not None:
            object.__setattr__(self, "steps", typed_steps(self.steps, self.state))
        # bad step lists and limits fail here, not at the first run
        RunProgram("check", self.steps, max_attempts=self.max_attempts)

    def run(
        self,
        run_id: str,
        store: Store,
        *,
        input: Mapping[str, Any] | None = None,
        lease: float = 60.0,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """``run`` of this workflow; ``input`` is the initial state of a fresh run."""
        _sync_only(store)
        return drive(self.program(run_id, input, lease, owner, None), store)

    async def run_async(
        self,
        run_id: str,
        store: AsyncStore,
        *,
        input: Mapping[str, Any] | None = None,
        lease: float = 60.0,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """``run_async`` of this workflow."""
        _async_only(store)
        return await drive_async(self.program(run_id, input, lease, owner, None), store)

    def start(
        self,
        run_id: str,
        store: Store,
        *,
        input: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        queue: Queue | str | None = None,
        priority: int | None = None,
        partition: str | None = None,
    ) -> bool:
        """Create the run for the workers (see the top); True if this call created it.
        ``queue`` (default: the workflow's), ``priority`` (default: the queue's) and
        ``partition``: how the workers take it (``workers.queues``). ``timeout``: this
        run's deadline, in seconds from now (default the workflow's)."""
        _sync_only(store)
        placed = self._placed(queue, priority, partition)
        return execute(
            start_program(
                self.name,
                run_id,
                input,
                version=self.version,
                timeout=self._timeout(timeout),
                placed=placed,
            ),
            blocking_io(store),
        )

    async def start_async(
        self,
        run_id: str,
        store: AsyncStore,
        *,
        input: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        queue: Queue | str | None = None,
        priority: int | None = None,
        partition: str | None = None,
    ) -> bool:
        """``start`` for async stores."""
        _async_only(store)
        placed = self._placed(queue, priority, partition)
        return await execute_on(
            start_program(
                self.name,
                run_id,
                input,
                version=self.version,
                timeout=self._timeout(timeout),
                placed=placed,
            ),
            store,
        )

    def _timeout(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else check_timeout(timeout, "start(timeout=)")

    # -- queues: where a started run is placed --
    def _placed(
        self, queue: Queue | str | None, priority: int | None, partition: str | None
    ) -> Placement:
        chosen = self.queue if queue is None else queue
        if chosen is not None and not isinstance(chosen, Queue | str):
            raise TypeError(f"queue= takes a Queue or a queue's name, not {chosen!r}")
        return placement(
            chosen.name if isinstance(chosen, Queue) else chosen,
            priority if priority is not None or not isinstance(chosen, Queue) else chosen.priority,
            partition,
        )

    def program(
        self,
        run_id: str,
        input: Mapping[str, Any] | None,
        lease: float,
        owner: str | None,
        stop: Callable[[], bool] | None,
    ) -> RunProgram:
        """The program of one run of this workflow, for a driver to carry out: what
        ``run`` and ``run_async`` drive here, and what the workers drive for a run they
        took (``owner``: the lease's owner id, None for this process's; ``stop``: asked
        at each call and step boundary, true when the worker is stopping). Within the
        package only: applications call ``run``, ``run_async`` or ``start``."""
        return RunProgram(
            run_id,
            self.steps,
            lease=lease,
            owner=owner,
            workflow=self.name,
            input=input,
            stop=stop,
            max_attempts=self.max_attempts,
            version=self.version,
            timeout=self.timeout,
        )


UNPLACED = Placement()
"""A run of no queue (frozen: one shared default is safe)."""


def placement(queue: str | None, priority: int | None, partition: str | None) -> Placement:
    """A checked ``Placement`` (a priority or a partition needs a queue)."""
    if queue is None and (priority is not None or partition is not None):
        raise ValueError(
            "priority= and partition= (--priority, --partition) place a run in a queue: "
            "give queue= (--queue) too, or start a workflow that has one"
        )
    if queue is not None:
        check_name(queue, "queue name")
    if priority is not None:
        check_priority(priority, "start")
    if partition is not None:
        check_partition(partition)
    return Placement(queue, priority, partition)


def start_program(
    workflow: str,
    run_id: str,
    input: Mapping[str, Any] | None,
    *,
    version: str | None = None,
    timeout: float | None = None,
    placed: Placement = UNPLACED,
) -> Generator[Request, Any, bool]:
    """``Workflow.start`` of a workflow known by its name (the CLI's ``runs start``);
    ``version``: the version the run is pinned to (None: its first claim pins it)."""
    check_run_id(run_id)
    check_name(workflow, "workflow name")
    check_version(version)
    state = frozen_state({} if input is None else input, run_id)
    while True:
        cp = yield LoadHead(run_id)  # the head tells whether it exists, and as what
        if cp is not None:
            if cp.workflow != workflow:
                of = f"workflow {cp.workflow!r}" if cp.workflow else "a plain run()"
                raise StepMismatchError(
                    f"run {run_id!r} exists already, as {of}, not {workflow!r}; nothing was "
                    "started. Use another run id",
                    run_id=run_id,
                )
            if cp.status == "cancelled":
                raise cancelled(run_id, cp.cancel_reason)
            return False
        fresh = begun(
            Checkpoint(
                run_id=run_id,
                step=-1,
                state=state,
                status="running",
                workflow=workflow,
                version=version,
                attempt=0,  # its first step has not been started yet
                signals=freeze({}, "", run_id, 0, "signal payload"),
                queue=placed.queue,
                priority=placed.priority,
                partition=placed.partition,
            ),
            timeout,
        )
        try:
            yield Save(fresh)
        except ConflictError:
            continue  # created meanwhile (a retried request): look at what is there
        log.info("run %r started for the workers (workflow %s)", run_id, workflow)
        return True
