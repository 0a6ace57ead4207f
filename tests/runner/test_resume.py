"""resume_run on every backend, sync and async: a failed or cancelled run is running
again from its last checkpoint, for the workers; its earlier ending stays in its
record; its retry rounds start over; anything else is refused and changes nothing."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api


def resume(api: Api, run_id: str) -> ds.Checkpoint:
    return api._call(ds.resume_run, ds.resume_run_async, run_id)  # type: ignore[no-any-return]


def flaky_workflow(ran: Counter[str], fails: int) -> ds.Workflow:
    """Step ``b`` fails its first ``fails`` attempts; Retry(attempts=2) per round."""

    def b(state: Any) -> dict[str, Any]:
        ran["b"] += 1
        if ran["b"] <= fails:
            raise ValueError(f"b failed ({ran['b']})")
        return {"b": ran["b"]}

    def a(state: Any) -> dict[str, Any]:
        ran["a"] += 1
        return {"a": 1}

    retry = ds.Retry(attempts=2, backoff=0.0, max_backoff=0.0)
    return ds.Workflow("flaky", [ds.Step("a", a), ds.Step("b", b, retry=retry)])


def test_a_failed_run_resumes_for_the_workers_with_fresh_retries(api: Api, run_id: str) -> None:
    """Failed after its 2 attempts, resumed: status running, no lease, its error in its
    ``resumed`` record; a worker's recover runs step b with 2 attempts again (it needs
    a third and fourth), and step a never runs again."""
    ran: Counter[str] = Counter()
    w = flaky_workflow(ran, fails=3)
    with pytest.raises(ValueError, match="b failed"):
        api.start(w, run_id)
    assert api.store.load_head(run_id).status == "failed"

    cp = resume(api, run_id)
    assert (cp.status, cp.owner, cp.lease_expires, cp.step) == ("running", None, None, 0)
    head = api.store.load_head(run_id)
    assert head.status == "running"
    [record] = head.resumed
    assert (record["status"], record["step"], record["attempt"]) == ("failed", 1, 2)
    assert record["error"]["type"] == "ValueError"
    assert "b failed (2)" in record["error"]["message"]

    [done] = api.recover([w])
    assert done.outcome == "completed", done.error
    assert api.result(run_id) == {"a": 1, "b": 4}
    assert ran == Counter(a=1, b=4)
    assert api.store.load_head(run_id).resumed == head.resumed  # kept for its life


def test_a_cancelled_run_resumes_and_its_reason_is_kept(api: Api, run_id: str) -> None:
    """A run started for the workers and cancelled before it ran: resumed, a worker runs
    it to its end; the cancellation's reason stays in its record."""
    ran: Counter[str] = Counter()
    w = flaky_workflow(ran, fails=0)
    assert api.create(w, run_id)
    assert api.cancel(run_id, reason="wrong input")
    assert api.recover([w]) == []  # cancelled: left alone

    cp = resume(api, run_id)
    assert (cp.status, cp.cancel_reason) == ("running", None)
    [done] = api.recover([w])
    assert done.outcome == "completed", done.error
    [record] = api.store.load_head(run_id).resumed
    assert (record["status"], record["cancel_reason"], record["error"]) == (
        "cancelled",
        "wrong input",
        None,
    )
    assert ran == Counter(a=1, b=1)


def test_only_failed_and_cancelled_runs_resume_and_a_refusal_changes_nothing(
    api: Api, run_id: str
) -> None:
    """A completed, a running (started) and an unknown run: each one clear error; the
    stored runs keep their etags."""
    w = flaky_workflow(Counter(), fails=0)
    api.start(w, f"{run_id}-done")
    assert api.create(w, f"{run_id}-queued")
    for rid, error, says in (
        (f"{run_id}-done", ds.ConflictError, "it has completed"),
        (f"{run_id}-queued", ds.ConflictError, "it is running"),
        (f"{run_id}-none", ds.RunNotFoundError, "does not exist, so it was not resumed"),
    ):
        before = api.store.load_head(rid)
        with pytest.raises(error, match=says):
            resume(api, rid)
        after = api.store.load_head(rid)
        assert (after and after.etag) == (before and before.etag)


def test_a_poisoned_run_resumed_gets_its_max_attempts_again(api: Api, run_id: str) -> None:
    """A run whose step was started max_attempts times without a result (each process
    killed) is failed as poisoned; resumed, its next claim starts a new round instead
    of failing it again at once."""
    ran: Counter[str] = Counter()
    w = ds.Workflow("flaky", flaky_workflow(ran, fails=0).steps, max_attempts=3)
    killed_thrice = ds.Checkpoint(run_id, 0, {"a": 1}, steps=("a",), workflow="flaky", attempt=3)
    api.store.save(killed_thrice)
    with pytest.raises(ds.TooManyAttemptsError):
        api.start(w, run_id)
    assert api.store.load_head(run_id).status == "failed"
    resume(api, run_id)
    assert api.start(w, run_id) == {"a": 1, "b": 1}
    assert ran == Counter(b=1)
