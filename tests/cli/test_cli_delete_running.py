"""`durable-steps runs delete --yes` while the run is in a step: its owner stops with a
LeaseLostError that says the run was deleted (not that its lease expired), whether the
step's own save or a heartbeat finds it gone; on the file store and cosmos-local, under
run() and run_async()."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli
from ..helpers.waiting import wait_until


def _owner(
    env: dict[str, str], run_id: str, mode: str, lease: float
) -> tuple[threading.Thread, threading.Event, threading.Event, dict[str, Any]]:
    """The run in a thread of its own, blocked in its second step until released: the
    thread, the step-started and release events, and what the run raised."""
    started, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def blocking(state: Any) -> dict[str, Any]:
        outcome["keeper"] = ds.current_step().journal.driver.keep  # type: ignore[union-attr]
        started.set()
        assert release.wait(60)
        return {"b": 1}

    async def blocking_async(state: Any) -> dict[str, Any]:
        outcome["keeper"] = ds.current_step().journal.driver.keep  # type: ignore[union-attr]
        started.set()
        while not release.is_set():  # awaiting, so that a cancellation ends it at once
            await asyncio.sleep(0.01)
        return {"b": 1}

    steps = [
        ds.Step("a", lambda s: {"a": 1}),
        ds.Step("b", blocking if mode == "sync" else blocking_async),
    ]

    async def run_async() -> None:
        async with ds.async_store_from_env(env) as store:
            await ds.run_async(run_id, steps, store, lease=lease)

    def main() -> None:
        try:
            if mode == "sync":
                with ds.store_from_env(env) as store:
                    ds.run(run_id, steps, store, lease=lease)
            else:
                asyncio.run(run_async())
        except BaseException as exc:
            outcome["error"] = exc
        outcome["ended"] = time.monotonic()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread, started, release, outcome


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("found_by", ["the-steps-save", "a-heartbeat"])
def test_deleting_a_running_run_tells_its_owner_it_was_deleted(
    env: dict[str, str], run_id: str, mode: str, found_by: str
) -> None:
    """The CLI deletes the run while its step blocks; the owner's next write (the step's
    save, or a heartbeat first when the lease is short and the step outlasts a beat)
    finds it gone: LeaseLostError naming the deletion and the step, not lease expiry,
    and nothing is saved after the delete."""
    lease = 60.0 if found_by == "the-steps-save" else 0.9  # a heartbeat every 0.3 s
    thread, started, release, outcome = _owner(env, run_id, mode, lease)
    try:
        assert started.wait(60), outcome
        deleted = Cli(env)("runs", "delete", run_id, "--yes")
        assert deleted.returncode == 0, deleted.stderr
        assert f"deleted run '{run_id}'" in deleted.stderr
        if found_by == "a-heartbeat":  # while the step still blocks
            keeper = outcome["keeper"]
            wait_until(lambda: keeper.lost is not None, "a heartbeat to find the run gone")
            if mode == "async":
                wait_until(lambda: "ended" in outcome, "run_async to cancel the step")
        released = time.monotonic()
    finally:
        release.set()
        thread.join(60)
    error = outcome.get("error")
    assert isinstance(error, ds.LeaseLostError), repr(error)
    message = str(error)
    assert f"run {run_id!r} was deleted while step 1 ran" in message
    assert "runs delete" in message and "start over" in message
    assert "expired" not in message and "another worker" not in message
    if found_by == "a-heartbeat" and mode == "async":
        assert outcome["ended"] < released  # run_async cancels the step at once
    with ds.store_from_env(env) as store:
        assert store.load(run_id) is None  # the step's result was not saved


def test_a_delete_that_meets_a_heartbeat_is_sent_again_one_that_meets_a_step_is_not(
    env: dict[str, str], run_id: str
) -> None:
    """Between the command's read and its delete, the worker renews the run's lease (a
    new etag, nothing shown changed): the delete goes through. A step saved in between
    (the run changed in what the operator saw) keeps the run: ConflictError."""
    from durable_steps.cli.change import _delete_as_read

    with ds.store_from_env(env) as store:
        for what in ("heartbeat", "step"):
            rid = f"{run_id}-{what}"
            read = store.save(
                ds.Checkpoint(rid, 0, {"a": 1}, steps=("a",), status="running", owner="w",
                              lease_expires=time.time() + 60)
            )  # fmt: skip
            if what == "heartbeat":
                store.save(replace(read, lease_expires=time.time() + 90, updated_at=None))
                assert _delete_as_read(store, rid, read) is True
                assert store.load(rid) is None
            else:
                store.save(replace(read, step=1, steps=("a", "b"), state={"a": 1, "b": 2}))
                with pytest.raises(ds.ConflictError):
                    _delete_as_read(store, rid, read)
                kept = store.load(rid)
                assert kept is not None and kept.step == 1
