"""Child runs on every backend, sync and async: started and awaited as durable
operations of the parent's step, the parent waiting without a worker and woken by its
child's end, results and failures coming back, cancellation cascading, fan-out and
fan-in. Real processes killed at each point are ``test_children_processes``."""

from __future__ import annotations

from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api

FANOUT = 100


def flows(api: Api, run_id: str, n: int, fail: int | None = None) -> tuple[ds.Workflow, ...]:
    """A parent that starts ``n`` children and sums their results; children that
    double their input (child ``fail`` raises)."""

    def double(state: Any) -> dict[str, Any]:
        if state["x"] == fail:
            raise ValueError(f"child {state['x']} refuses")
        return {"y": 2 * state["x"]}

    child = ds.Workflow(f"child-{run_id}", [ds.Step("double", double)], max_attempts=None)

    async def fan(state: Any) -> dict[str, Any]:
        ids = [f"{state['id']}.c{i}" for i in range(n)]
        for i, cid in enumerate(ids):
            await ds.start_child_async(child, cid, {"x": i})
        return {"total": sum([(await ds.await_child_async(cid))["y"] for cid in ids])}

    def fan_sync(state: Any) -> dict[str, Any]:
        ids = [ds.start_child(child, f"{state['id']}.c{i}", {"x": i}) for i in range(n)]
        return {"total": sum(ds.await_child(cid)["y"] for cid in ids)}

    step = ds.Step("fan", fan) if api.is_async else ds.Step("fan", fan_sync)
    return ds.Workflow(f"parent-{run_id}", [step]), child


def settle(api: Api, workflows: tuple[ds.Workflow, ...], run_id: str) -> ds.RunInfo:
    """Recover until the parent has ended (a worker's passes, in this process)."""
    for _ in range(20):
        api.recover(list(workflows))
        info = api.store.run_info(run_id)
        if info.status in ("completed", "failed", "cancelled"):
            return info  # type: ignore[no-any-return]
    raise AssertionError(f"run {run_id} never ended: {info}")


def test_fan_out_and_fan_in_of_a_hundred_children(api: Api, run_id: str) -> None:
    """A step starts 100 children and awaits each: the parent waits on the first
    unfinished one holding no worker (``waiting`` for its signal), the children run,
    their ends wake it, and the sum of their results comes back; each child names its
    parent, and none runs twice. (100 once per backend; its async twin fans out 10.)"""
    n = 10 if api.is_async else FANOUT
    parent, child = flows(api, run_id, n)
    api.create(parent, run_id, input={"id": run_id})
    assert api.recover([parent])[0].outcome == "waiting"
    info = api.store.run_info(run_id)
    assert (info.status, info.waiting_for, info.owner) == ("waiting", f"child:{run_id}.c0", None)
    assert api.store.load(f"{run_id}.c7").parent == run_id
    assert settle(api, (parent, child), run_id).status == "completed"
    assert api.result(run_id, timeout=5) == {"id": run_id, "total": n * (n - 1)}
    assert all(api.store.run_info(f"{run_id}.c{i}").attempt == 1 for i in range(n))


def test_a_childs_failure_comes_back_as_an_error_naming_it(api: Api, run_id: str) -> None:
    """A failed child fails the parent's await with ``RunFailedError`` naming the
    child and its error; the parent (no retry) fails with it."""
    parent, child = flows(api, run_id, 2, fail=1)
    api.create(parent, run_id, input={"id": run_id})
    assert settle(api, (parent, child), run_id).status == "failed"
    with pytest.raises(ds.RunFailedError) as failed:
        api.result(run_id, timeout=5)
    assert failed.value.error_type == "durable_steps.RunFailedError"
    assert f"child run '{run_id}.c1' failed" in (failed.value.error_message or "")
    assert "ValueError: child 1 refuses" in (failed.value.error_message or "")


def test_cancelling_a_waiting_parent_cancels_its_children(api: Api, run_id: str) -> None:
    """``cancel_run`` of a parent waiting on its children cancels each of them (they
    run nothing more), with a reason naming the parent."""
    parent, child = flows(api, run_id, 3)
    api.create(parent, run_id, input={"id": run_id})
    assert api.recover([parent])[0].outcome == "waiting"
    assert api.cancel(run_id, reason="enough")
    for i in range(3):
        cp = api.store.load(f"{run_id}.c{i}")
        assert cp.status == "cancelled", cp.status
        assert cp.cancel_reason == f"its parent {run_id!r} was cancelled"
    assert api.recover([child]) == []


def test_a_child_id_of_another_run_is_refused(api: Api, run_id: str) -> None:
    """A child id that names an existing run of another parent (or none) is a
    ``StepMismatchError`` before anything is started."""
    other = ds.Workflow(f"other-{run_id}", [ds.Step("s", lambda s: None)])
    api.create(other, f"{run_id}.c0")
    parent, _child = flows(api, run_id, 1)
    api.create(parent, run_id, input={"id": run_id})
    [outcome] = api.recover([parent])
    assert outcome.outcome == "failed"
    assert isinstance(outcome.error, ds.StepMismatchError)
    assert "a run of that id exists already" in str(outcome.error)


def test_children_of_a_parent_cancelled_meanwhile_stop_before_their_next_step(
    api: Api, run_id: str
) -> None:
    """Children whose parent was cancelled while it did something else (here: waited
    for a signal) look at their parent before a step, and are cancelled instead of
    running it."""
    ran: list[str] = []
    child = ds.Workflow(f"child-{run_id}", [ds.Step("s", lambda s: ran.append("s"))])

    def spawn(state: Any) -> None:
        for i in range(2):
            ds.start_child(child, f"{run_id}.c{i}")
        ds.wait_for_signal("go")

    async def spawn_async(state: Any) -> None:
        for i in range(2):
            await ds.start_child_async(child, f"{run_id}.c{i}")
        ds.wait_for_signal("go")

    step = ds.Step("spawn", spawn_async if api.is_async else spawn)
    parent = ds.Workflow(f"parent-{run_id}", [step])
    api.create(parent, run_id)
    assert api.recover([parent])[0].outcome == "waiting"
    assert api.cancel(run_id)
    outcomes = api.recover([child])
    assert [o.outcome for o in outcomes] == ["cancelled", "cancelled"] and ran == []
    cp = api.store.load(f"{run_id}.c1")
    assert (cp.status, cp.cancel_reason) == ("cancelled", f"its parent {run_id!r} was cancelled")
