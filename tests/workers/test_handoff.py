"""Handing runs to workers and awaiting them: ``Workflow.start`` creates a run that a
real worker process picks up, ``wait_for_result`` waits for it (reading metadata,
not state, while it polls); timers that come due while no worker runs are resumed
when one comes back."""

from __future__ import annotations

import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api, Clock
from ..helpers.waiting import wait_until
from ..helpers.worker_process import stderr_of, worker, workers_die_with_their_test  # noqa: F401

FLOWS = textwrap.dedent(
    """
    import durable_steps as ds

    def total(state):
        return {"total": sum(state["items"])}

    def nap(state):
        ds.sleep(state["seconds"])
        return {"rested": True}

    SUM = ds.Workflow("sum", [ds.Step("total", total)])
    NAP = ds.Workflow("nap", [ds.Step("nap", nap)])
    WORKFLOWS = [SUM, NAP]
    """
)


@pytest.fixture
def flows(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    (tmp_path / "flows.py").write_text(FLOWS)
    return env


def _total(state: Any) -> dict[str, Any]:
    return {"total": sum(state["items"])}


SUM = ds.Workflow("sum", [ds.Step("total", _total)])


def test_start_creates_the_run_for_the_workers_once(api: Api, run_id: str) -> None:
    """start runs nothing: the run is created running, with no lease, no step done, the
    workflow and the input as its state. Starting it again starts nothing (False); a
    run of another workflow, or of a plain run(), is StepMismatchError."""
    assert api.create(SUM, run_id, input={"items": [1, 2, 3]}) is True
    cp = api.store.load(run_id)
    assert (cp.status, cp.step, cp.owner, cp.workflow, dict(cp.state)) == (
        "running",
        -1,
        None,
        "sum",
        {"items": [1, 2, 3]},
    )
    assert api.create(SUM, run_id, input={"items": [9]}) is False
    assert api.store.load(run_id) == cp
    with pytest.raises(ds.StepMismatchError, match="workflow 'sum', not 'other'"):
        api.create(ds.Workflow("other", SUM.steps), run_id)
    api.run(f"{run_id}-plain", list(SUM.steps), input={"items": []})
    with pytest.raises(ds.StepMismatchError, match="plain run"):
        api.create(SUM, f"{run_id}-plain")


def test_recover_runs_a_started_run_and_wait_for_result_returns_it(api: Api, run_id: str) -> None:
    """A started run is recovered like an orphaned one (its first attempt is 1); then
    wait_for_result gives its final state."""
    api.create(SUM, run_id, input={"items": [4, 5]})
    assert [(r.run_id, r.outcome) for r in api.recover([SUM])] == [(run_id, "completed")]
    assert api.result(run_id, timeout=10) == {"items": [4, 5], "total": 9}
    cp = api.store.load(run_id)
    assert cp.attempt == 1


def test_wait_for_result_reports_how_a_run_ended(api: Api, run_id: str, clock: Clock) -> None:
    """Failed: RunFailedError with the recorded error's type and message. Cancelled:
    RunCancelledError. Missing: RunNotFoundError. Still running at the timeout:
    TimeoutError (the fake clock moves with each poll's pause)."""

    with pytest.raises(ValueError, match="bad sku"):
        api.run(run_id, [api.step("s", _raising)])
    with pytest.raises(ds.RunFailedError, match="bad sku") as failed:
        api.result(run_id, timeout=5)
    assert (failed.value.error_type, failed.value.error_message) == ("ValueError", "bad sku")
    api.create(SUM, f"{run_id}-c")
    api.cancel(f"{run_id}-c", reason="no longer needed")
    with pytest.raises(ds.RunCancelledError, match="no longer needed"):
        api.result(f"{run_id}-c")
    with pytest.raises(ds.RunNotFoundError):
        api.result(f"{run_id}-missing")
    api.create(SUM, f"{run_id}-w")
    start = clock.now
    with pytest.raises(TimeoutError, match="did not finish within 30"):
        api.result(f"{run_id}-w", timeout=30, interval=4)
    assert clock.now - start == pytest.approx(30)


async def _raising(state: Any) -> None:
    raise ValueError("bad sku")


def test_a_failure_is_recorded_under_the_name_its_type_is_imported_by(
    api: Api, run_id: str
) -> None:
    """Our errors are recorded as ``durable_steps.X``, the name users import them by; a
    run failed by an earlier version, which recorded ``durable_steps._errors.X``, loads
    and is reported under the same new name."""

    async def unreachable(state: Any) -> None:
        raise ds.StoreError("the store is down", status_code=503)

    with pytest.raises(ds.StoreError):
        api.run(run_id, [api.step("s", unreachable)])
    with pytest.raises(ds.RunFailedError) as failed:
        api.result(run_id, timeout=5)
    assert failed.value.error_type == "durable_steps.StoreError"
    assert api.store.load(run_id).error["type"] == "durable_steps.StoreError"
    module, _, name = failed.value.error_type.rpartition(".")
    assert module == "durable_steps" and getattr(ds, name) is ds.StoreError

    old = {"type": "durable_steps._errors.StepMismatchError", "message": "m", "step": 0}
    api.store.save(ds.Checkpoint(f"{run_id}-old", -1, {}, status="failed", error=old))
    assert api.store.load(f"{run_id}-old").error["type"] == "durable_steps.StepMismatchError"
    with pytest.raises(ds.RunFailedError) as failed:
        api.result(f"{run_id}-old", timeout=5)
    assert failed.value.error_type == "durable_steps.StepMismatchError"


def test_polling_reads_metadata_and_the_state_once(run_id: str, clock: Clock) -> None:
    """While it polls, wait_for_result asks the store for the run's metadata (run_info),
    never its state; the state is read once, at the end."""
    inner = ds.MemoryStore()
    asked: list[str] = []

    class Counting:
        def load(self, rid: str) -> Any:
            asked.append("load")
            return inner.load(rid)

        def save(self, cp: ds.Checkpoint) -> Any:
            return inner.save(cp)

        def run_info(self, rid: str) -> Any:
            asked.append("info")
            if asked.count("info") == 5:  # the run completes while it is awaited
                SUM.run(rid, inner)
            return inner.run_info(rid)

    SUM.start(run_id, inner, input={"items": [1]})
    assert ds.wait_for_result(Counting(), run_id, interval=1) == {"items": [1], "total": 1}
    assert asked == ["info"] * 5 + ["load"]


@pytest.mark.slow
def test_a_worker_picks_up_a_started_run_within_its_interval(
    flows: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """A web-handler-shaped start (the CLI, importing no workflow code) and a worker
    process: the worker picks the run up, and wait_for_result returns its state."""
    proc = worker(flows, tmp_path, "flows:WORKFLOWS", "--interval", "0.2")
    store = ds.store_from_env(flows)
    started = ds.Workflow("sum", []).start(run_id, store, input={"items": [2, 3]})
    assert started is True
    assert ds.wait_for_result(store, run_id, timeout=90, interval=0.05) == {
        "items": [2, 3],
        "total": 5,
    }
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert f"run {run_id} (sum): completed" in out


@pytest.mark.slow
def test_a_timer_that_came_due_while_no_worker_ran_is_resumed_by_the_next(
    flows: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """A worker runs a step that sleeps 1 s: the run waits, holding no worker. The
    worker stops; the wake time passes; a new worker resumes the run at once."""
    store = ds.store_from_env(flows)
    ds.Workflow("nap", []).start(run_id, store, input={"seconds": 1.0})
    first = worker(flows, tmp_path, "flows:WORKFLOWS", "--interval", "0.2")
    wait_until(lambda: store.load(run_id).status == "waiting", "the run to go to sleep")
    first.send_signal(signal.SIGTERM)
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and f"run {run_id} (nap): waiting" in out, stderr_of(tmp_path)
    wake_at = store.load(run_id).wake_at
    wait_until(lambda: time.time() > wake_at, "the wake time to pass")
    assert store.load(run_id).status == "waiting"  # nobody resumed it meanwhile
    second = worker(flows, tmp_path, "flows:WORKFLOWS", "--interval", "0.2")
    assert ds.wait_for_result(store, run_id, timeout=90, interval=0.05)["rested"] is True
    second.send_signal(signal.SIGTERM)
    second.communicate(timeout=60)
    assert second.returncode == 0, stderr_of(tmp_path)
