"""A run's history from outside: ``run_history(store, run_id)`` lists
its completed steps as the store keeps them, ``load_at(store, run_id, step)`` gives
its state after one of them (and their ``_async`` twins).

What is kept, and how each store keeps it without writing an update twice, is
``seam.history``'s (the setting is the store's: ``history="steps"`` by default,
``"none"``, ``keep_last=N``). A run that does not exist is ``RunNotFoundError``; a
step that is not kept, ``StepNotKeptError`` naming the steps that are.
"""

from __future__ import annotations

from typing import Any

from ..runner.errors import not_found
from ..seam.history import StepRecord
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store


def run_history(store: Store, run_id: str) -> list[StepRecord]:
    """The run's completed steps that ``store`` keeps, oldest first: each one's index,
    name, completion time, attempts and update size (``StepRecord``)."""
    found = store.run_history(check_run_id(run_id))
    if found is None:
        raise not_found(run_id, "it has no history")
    return found


async def run_history_async(store: AsyncStore, run_id: str) -> list[StepRecord]:
    """``run_history`` for async stores."""
    found = await store.run_history(check_run_id(run_id))
    if found is None:
        raise not_found(run_id, "it has no history")
    return found


def load_at(store: Store, run_id: str, step: int) -> dict[str, Any]:
    """The run's state after completed step ``step`` (a step its history keeps)."""
    cp = store.load_at(check_run_id(run_id), _step(step))
    if cp is None:
        raise not_found(run_id, "it has no state to load")
    return dict(cp.state)


async def load_at_async(store: AsyncStore, run_id: str, step: int) -> dict[str, Any]:
    """``load_at`` for async stores."""
    cp = await store.load_at(check_run_id(run_id), _step(step))
    if cp is None:
        raise not_found(run_id, "it has no state to load")
    return dict(cp.state)


def _step(step: object) -> int:
    if type(step) is not int or step < 0:
        raise ValueError(
            f"step must be the index of a completed step (an int from 0), not {step!r}"
        )
    return step
