"""Workflows and recovery on every backend, through the sync and the async calls:
recover() resumes only orphaned runs of known workflows and reports each outcome; a
workflow records its name and input; a schema 1 checkpoint resumes as schema 2."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step, Workflow

from ..conftest import Api
from ..helpers.steps import Effects


def test_recover_resumes_only_orphaned_runs_of_known_workflows(api: Api, run_id: str) -> None:
    """recover() resumes running runs of known workflows with a free lease; runs of unknown
    workflows, plain runs, failed runs and live leases are left alone."""
    fx = Effects()
    w = Workflow(f"known-{run_id}", [fx.step("a"), fx.step("b")])
    gone = time.time() - 5

    def orphan(rid: str, workflow: str | None, **kw: Any) -> None:
        api.store.save(ds.Checkpoint(rid, 0, {"a": True}, steps=("a",), workflow=workflow, **kw))

    orphan(f"{run_id}-expired", w.name, owner="dead-worker", lease_expires=gone)
    orphan(f"{run_id}-released", w.name)
    orphan(f"{run_id}-live", w.name, owner="busy", lease_expires=time.time() + 600)
    orphan(f"{run_id}-failed", w.name, status="failed")
    orphan(f"{run_id}-unknown", f"other-{run_id}", lease_expires=gone, owner="x")
    orphan(f"{run_id}-plain", None)
    done = api.recover([w])
    assert sorted((r.run_id, r.outcome) for r in done) == [
        (f"{run_id}-expired", "completed"),
        (f"{run_id}-released", "completed"),
    ]
    assert fx.log == ["b:2", "b:2"]
    assert api.store.load(f"{run_id}-live").status == "running"
    assert api.store.load(f"{run_id}-unknown").step == 0


def test_recover_reports_failures_waits_and_respects_limit(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """Each run recover() looked at has an outcome: failed (with the error) or waiting;
    limit= bounds how many it takes in one pass."""

    def broken(state: Any) -> None:
        raise RuntimeError("still broken")

    w = Workflow(
        f"mixed-{run_id}",
        [Step("a", lambda s: None), Step("b", lambda s: ds.wait_for_signal("go"))],
    )
    bad = Workflow(f"bad-{run_id}", [Step("a", broken)])
    for i in range(3):
        api.store.save(ds.Checkpoint(f"{run_id}-w{i}", -1, {}, workflow=w.name))
    api.store.save(ds.Checkpoint(f"{run_id}-bad", -1, {}, workflow=bad.name))
    first = api.recover([w, bad], limit=2)
    assert len(first) == 2
    rest = api.recover([w, bad])
    outcomes = sorted((r.run_id, r.outcome) for r in first + rest)
    assert outcomes == [
        (f"{run_id}-bad", "failed"),
        (f"{run_id}-w0", "waiting"),
        (f"{run_id}-w1", "waiting"),
        (f"{run_id}-w2", "waiting"),
    ]
    failed = next(r for r in first + rest if r.outcome == "failed")
    assert isinstance(failed.error, RuntimeError)


def test_a_workflow_records_its_name_and_input(api: Api, run_id: str) -> None:
    """Workflow.run stores the workflow's name; input= is the initial state of a fresh run
    (ignored on resume); another workflow cannot take the run over."""
    w = Workflow("greet", [Step("hello", lambda s: {"greeting": f"hello {s['name']}"})])
    assert api.start(w, run_id, input={"name": "ann"}) == {
        "name": "ann",
        "greeting": "hello ann",
    }
    cp = api.store.load(run_id)
    assert (cp.workflow, cp.status) == ("greet", "completed")
    assert api.start(w, run_id, input={"name": "bob"})["name"] == "ann"
    other = Workflow("other", w.steps)
    with pytest.raises(ds.StepMismatchError, match="belongs to workflow 'greet'"):
        api.start(other, run_id)


def test_a_schema_1_checkpoint_resumes_and_is_rewritten_as_schema_2(api: Api, run_id: str) -> None:
    """A checkpoint written before leases existed (schema 1) loads, resumes, and is stored
    as schema 2 by its next save."""
    doc = {
        "schema": 1,
        "run_id": run_id,
        "step": 0,
        "steps": ["a"],
        "done": False,
        "attempt": 1,
        "updated_at": time.time(),
        "state": {"a": 1},
    }
    if api.backend.name.startswith(("file", "memory")):
        api.backend.write_raw(run_id, json.dumps({"etag": "0" * 24, **doc}).encode())
    else:
        api.backend.write_raw(run_id, doc)
    cp = api.store.load(run_id)
    assert (cp.status, cp.owner, cp.workflow, cp.state) == ("running", None, None, {"a": 1})
    assert api.run(run_id, [Step("a", lambda s: None), Step("b", lambda s: {"b": 2})]) == {
        "a": 1,
        "b": 2,
    }
    assert api.store.load(run_id).status == "completed"
