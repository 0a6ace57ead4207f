"""A run's start time (``started_at``): stamped by its first save, kept by every later
save -- a claim, a step, a head-only change -- on each store and in its listing; a
document written before it existed reads its last-saved time."""

from __future__ import annotations

import contextlib
import time
import uuid

import durable_steps as ds
from durable_steps.seam.document import from_document, to_document


def test_a_runs_start_time_is_kept_by_every_save(env: dict[str, str]) -> None:
    store = ds.store_from_env(env)
    run_id = f"started-{uuid.uuid4().hex[:8]}"
    flow = ds.Workflow(
        "w", [ds.Step("a", lambda s: {"n": 1}), ds.Step("b", lambda s: ds.wait_for_signal("go"))]
    )
    before = time.time()
    flow.start(run_id, store)
    head = store.load_head(run_id)
    assert head is not None and head.started_at is not None
    started = head.started_at
    assert before - 1 <= started <= time.time() + 1
    with contextlib.suppress(ds.RunWaiting):
        flow.run(run_id, store)  # a claim, a step, a wait: saves that move updated_at
    ds.send_signal(store, run_id, "go", 1)  # a head-only save
    cp = store.load(run_id)
    assert cp is not None and cp.started_at == started
    assert cp.updated_at is not None and cp.updated_at >= started
    (info,) = [i for i in store.list_runs() if i.run_id == run_id]
    assert info.started_at == started
    (due,) = [i for i in store.takeable(["w"], at=time.time()) if i.run_id == run_id]
    assert due.started_at == started
    store.close()


def test_a_document_without_a_start_time_reads_its_last_save() -> None:
    cp = ds.Checkpoint(run_id="old", step=-1, state={}, updated_at=1_000.0)
    doc = to_document(cp, etag="e1")
    assert doc["started_at"] == 1_000.0  # (a save without one takes the time it stamps)
    del doc["started_at"]
    assert from_document(doc, "old", "e1", "here").started_at == 1_000.0
