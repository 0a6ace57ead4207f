"""Workflows: named step lists.

``Workflow(name, steps)`` is a step list with a name; ``workflow.run(run_id,
store, input=...)`` is ``run`` that also records the name in the checkpoint, so
that a run can be resumed by anyone who knows the workflow, not only by the
code that started it (``workers.recovery``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..seam.store import AsyncStore, Store, check_name
from .drivers import _async_only, _sync_only, drive, drive_async
from .run import RunProgram
from .step import Step


@dataclass(frozen=True)
class Workflow:
    """A named list of steps; runs started through it can be recovered by name."""

    name: str
    steps: Sequence[Step]

    def __post_init__(self) -> None:
        check_name(self.name, "workflow name")
        object.__setattr__(self, "steps", tuple(self.steps))
        RunProgram("check", self.steps)  # bad step lists fail here, not at the first run

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
        return drive(self._run(run_id, input, lease, owner, None), store)

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
        return await drive_async(self._run(run_id, input, lease, owner, None), store)

    def _run(
        self,
        run_id: str,
        input: Mapping[str, Any] | None,
        lease: float,
        owner: str | None,
        stop: Callable[[], bool] | None,
    ) -> RunProgram:
        return RunProgram(
            run_id, self.steps, lease=lease, owner=owner, workflow=self.name, input=input, stop=stop
        )
