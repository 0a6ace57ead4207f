"""``Checkpoint``'s fields read by concern (lease, placement, lineage) and its status a
closed set: the grouped views show exactly the fields they stand for, a checkpoint made
field by field (as backends and migrations make them) still works, and a status outside
the set is refused where it is made."""

from __future__ import annotations

import pytest

from durable_steps import Checkpoint
from durable_steps.seam.checkpoint import (
    STATUSES,
    ForkedFrom,
    Lease,
    Lineage,
    Placement,
    ResumeRecord,
    evolve,
)


def test_the_groups_read_the_fields_they_stand_for() -> None:
    resumed: ResumeRecord = {
        "at": 1.0,
        "status": "failed",
        "step": 1,
        "attempt": 3,
        "error": {"type": "ValueError", "message": "bad", "step": 1, "attempt": 3, "at": 0.5},
        "cancel_reason": None,
    }
    cp = Checkpoint(
        "r",
        0,
        {},
        owner="w1",
        lease_expires=99.0,
        queue="mail",
        priority=2,
        partition="p",
        parent="boss",
        forked_from={"run": "src", "step": 0, "call": None, "at": 2.0},
        resumed=(resumed,),
    )
    assert cp.lease == Lease("w1", 99.0)
    assert cp.placement == Placement("mail", 2, "p")
    fork: ForkedFrom = {"run": "src", "step": 0, "call": None, "at": 2.0}
    assert cp.lineage == Lineage("boss", fork, (resumed,))
    moved = evolve(cp, owner=None, lease_expires=None, queue=None, priority=None, partition=None)
    assert (moved.lease, moved.placement) == (Lease(), Placement())
    assert moved.lineage == cp.lineage


def test_a_status_outside_the_set_is_refused() -> None:
    assert STATUSES == ("running", "waiting", "failed", "completed", "cancelled")
    assert Checkpoint("r", 0, {}, status="waiting").status == "waiting"
    with pytest.raises(ValueError, match="status must be one of"):
        Checkpoint("r", 0, {}, status="paused")  # type: ignore[arg-type]
