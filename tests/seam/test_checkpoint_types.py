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


def test_the_records_the_runner_writes_are_the_typed_shapes() -> None:
    """Every key of a journal record and of a mailbox, as the runner writes them, is a
    key of ``CallRecord`` / ``MailboxRecord`` (and its ``Topic``, ``Message``): the
    types say what is stored, not a subset of it."""
    import durable_steps as ds
    from durable_steps.seam.checkpoint import CallRecord, MailboxRecord, Message, Topic
    from durable_steps.stores.memory import MemoryStore

    store = MemoryStore()
    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 2:
            raise ConnectionError("once")
        return "ok"

    def step(state: dict[str, object]) -> dict[str, object]:
        ds.call("flaky", flaky, retry=ds.Retry(attempts=3, backoff=0.0))
        ds.patched("new-path")  # its marker is saved with the next record
        ds.call("keyed", lambda: 1, key="k")
        raise RuntimeError("stop here: the step's journal is kept")

    with pytest.raises(RuntimeError, match="stop here"):
        ds.run("r", [ds.Step("s", step)], store, max_attempts=1)
    ds.send_message(store, "r", "chat", {"hi": 1}, idempotency_key="once")
    ds.send_message(store, "r", "chat", {"hi": 2})
    cp = store.load("r")
    assert cp is not None
    records = [dict(r) for r in cp.calls]
    assert {r.get("kind") for r in records} == {None, "patch"}
    assert any("key" in r for r in records)
    assert any("step_attempt" in r and "result" in r for r in records)
    for record in records:
        assert record.keys() <= CallRecord.__annotations__.keys(), record
    box = cp.mailbox
    assert box is not None and box["topics"]["chat"]["pending"]
    assert box.keys() <= MailboxRecord.__annotations__.keys()
    for topic in box["topics"].values():
        assert topic.keys() == Topic.__annotations__.keys()
        for message in topic["pending"]:
            assert message.keys() == Message.__annotations__.keys()
