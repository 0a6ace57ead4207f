"""``Store.takeable``, the look of a worker (issue 31 item 3): every backend answers
the runs a worker may take -- free or expired lease, due timers, started runs -- and
not the runs live workers hold, as leases move, runs wait, end and go."""

from __future__ import annotations

import time
from dataclasses import replace

import durable_steps as ds

from ..conftest import Backend


def test_takeable_answers_runs_to_take_and_follows_their_saves(
    backend: Backend, run_id: str
) -> None:
    """Started, orphaned and due runs are takeable; leased, not-yet-due, signal-waiting,
    finished runs and other workflows' are not; a renewed lease hides a run, a released
    one shows it, a deleted run is gone."""
    store, t, wf = backend.store, time.time(), f"wf-{run_id}"

    def put(name: str, workflow: str = wf, **fields: object) -> ds.Checkpoint:
        return store.save(ds.Checkpoint(f"{run_id}-{name}", -1, {}, workflow=workflow, **fields))

    put("started")
    expired = put("expired", owner="dead", lease_expires=t - 10)
    leased = put("leased", owner="live", lease_expires=t + 600)
    put("due", status="waiting", wake_at=t - 1)
    put("later", status="waiting", wake_at=t + 600)
    put("signal", status="waiting", waiting_for="ok")
    put("done", status="completed")
    put("failed", status="failed")
    put("other", workflow=f"other-{run_id}")

    def takeable() -> set[str]:
        return {i.run_id.removeprefix(f"{run_id}-") for i in store.takeable([wf], at=time.time())}

    assert takeable() == {"started", "expired", "due"}
    store.save(replace(expired, owner="me", lease_expires=t + 600))  # taken, renewed
    store.save(replace(leased, owner=None, lease_expires=None))  # released
    assert takeable() == {"started", "leased", "due"}
    assert store.delete(f"{run_id}-started")
    assert takeable() == {"leased", "due"}
