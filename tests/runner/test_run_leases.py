"""A run's lease on every backend, through run() for the sync stores and run_async() for
the async ones: released on failure, refusing a second runner, lost to another owner
(also found by the heartbeat), taken over after expiry, renewed by every save and by
the heartbeat during a retry pause. (Racing processes: test_leases.)"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Retry, Step

from ..conftest import Api, pause_with
from ..helpers.steps import Effects, blocking
from ..helpers.waiting import wait_until


def test_a_failed_step_releases_the_lease_so_a_rerun_resumes_at_once(api: Api, run_id: str) -> None:
    """A step that raises leaves the run failed with no owner; running it again right away
    (another call, so another owner) resumes it instead of waiting for the lease."""
    fx = Effects()
    calls = iter([ValueError("down"), None])

    def b(state: Any) -> None:
        if (exc := next(calls)) is not None:
            raise exc

    steps = [fx.step("a"), fx.step("b", b)]
    with pytest.raises(ValueError, match="down"):
        api.run(run_id, steps)
    cp = api.store.load(run_id)
    assert (cp.status, cp.owner, cp.lease_expires, cp.error["type"]) == (
        "failed",
        None,
        None,
        "ValueError",
    )
    api.run(run_id, steps)
    assert fx.log == ["a:1", "b:1", "b:2"]
    cp = api.store.load(run_id)
    assert (cp.status, cp.owner, cp.error) == ("completed", None, None)


def test_a_live_lease_refuses_a_second_runner_and_writes_nothing(api: Api, run_id: str) -> None:
    """While one call is inside a step, a second call on the same run raises
    RunLeasedError (a ConflictError with .owner and .expires_at) and changes nothing."""
    inside, leave = threading.Event(), threading.Event()
    results: list[Any] = []

    def hold(state: Any) -> None:
        inside.set()
        leave.wait(30)

    step = Step("hold", blocking(api, hold))
    t = threading.Thread(target=lambda: results.append(api.run(run_id, [step])))
    t.start()
    try:
        assert inside.wait(30)
        before = api.store.load(run_id)
        with pytest.raises(ds.RunLeasedError) as err:
            api.run(run_id, [step])
        assert isinstance(err.value, ds.ConflictError)
        assert err.value.owner == before.owner
        assert err.value.expires_at == before.lease_expires > time.time()
        assert api.store.load(run_id) == before
    finally:
        leave.set()
        t.join()
    assert results == [{}]


def thief(api: Api, run_id: str) -> Callable[[], Any]:
    """Take the run over as another worker would after a forced expiry: inside a step this
    is a plain call under run(), and an awaitable under run_async (the store is async)."""

    def stolen(cp: ds.Checkpoint) -> ds.Checkpoint:
        return replace(cp, owner="thief", lease_expires=time.time() + 600, updated_at=None)

    def steal() -> None:
        api.store.save(stolen(api.store.load(run_id)))

    async def steal_async() -> None:
        aio = api.store.aio
        await aio.save(stolen(await aio.load(run_id)))

    return steal_async if api.is_async else steal


def test_a_stolen_lease_is_lost_and_the_step_result_not_saved(api: Api, run_id: str) -> None:
    """Another owner takes the run over while a step runs (as after a forced expiry): the
    first runner raises LeaseLostError and does not save that step's result."""
    steal = thief(api, run_id)

    def victim(state: Any) -> dict[str, str]:
        steal()
        return {"result": "must not be saved"}

    async def victim_async(state: Any) -> dict[str, str]:
        await steal()
        return {"result": "must not be saved"}

    step = Step("victim", victim_async if api.is_async else victim)
    with pytest.raises(ds.LeaseLostError) as err:
        api.run(run_id, [Step("a", lambda s: {"a": 1}), step])
    assert isinstance(err.value, ds.ConflictError)
    cp = api.store.load(run_id)
    assert (cp.step, cp.owner, cp.state) == (0, "thief", {"a": 1})


def test_a_heartbeat_that_finds_another_owner_stops_the_step(api: Api, run_id: str) -> None:
    """With a short lease the heartbeat notices the takeover while the step is still
    running: run_async cancels the step; run cannot stop a blocking step, so it lets it end;
    neither saves its result."""
    steal = thief(api, run_id)
    cancelled: list[bool] = []
    noticed: list[bool] = []  # by the heartbeat, while the sync step still ran

    async def slow_async(state: Any) -> None:
        await steal()
        try:
            await asyncio.sleep(60)  # ended early by the cancellation, or the test fails
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    def slow_sync(state: Any) -> dict[str, int]:
        steal()
        keeper = ds.current_step().journal.driver.keep  # type: ignore[union-attr]
        try:  # an error here would end as LeaseLostError too: note what was seen instead
            wait_until(lambda: keeper.lost is not None, "the heartbeat to find the thief", 30)
        finally:
            noticed.append(keeper.lost is not None)
        return {"x": 1}

    step = Step("slow", slow_async if api.is_async else slow_sync)
    with pytest.raises(ds.LeaseLostError):
        api.run(run_id, [step], lease=0.3)
    assert (cancelled, noticed) == (([True], []) if api.is_async else ([], [True]))
    cp = api.store.load(run_id)
    assert (cp.step, cp.owner) == (-1, "thief")


def test_an_expired_lease_is_taken_over_with_the_next_attempt(api: Api, run_id: str) -> None:
    """A run whose owner's lease has expired (a worker on another host died) is taken
    over by the next run, resuming the step that was running with attempt + 1."""
    fx = Effects()
    api.store.save(
        ds.Checkpoint(
            run_id,
            0,
            {"a": True},
            steps=("a",),
            owner="worker-on-another-host",
            lease_expires=time.time() - 1,
        )
    )
    assert api.run(run_id, [fx.step("a"), fx.step("b")]) == {"a": True, "b": True}
    assert fx.log == ["b:2"]


def test_the_same_owner_resumes_its_own_lease_at_once(api: Api, run_id: str) -> None:
    """A restarted worker that passes its stable owner= resumes its live lease at once,
    with the next attempt (its previous incarnation died in that step)."""
    fx = Effects()
    api.store.save(ds.Checkpoint(run_id, -1, {}, owner="worker-7", lease_expires=time.time() + 600))
    with pytest.raises(ds.RunLeasedError):
        api.run(run_id, [fx.step("a")])
    assert api.run(run_id, [fx.step("a")], owner="worker-7") == {"a": True}
    assert fx.log == ["a:2"]


def test_every_save_renews_the_lease(api: Api, run_id: str) -> None:
    """Each step's save moves lease_expires to its own time + lease (no heartbeat is
    needed for steps shorter than a third of the lease)."""
    seen: list[tuple[float, float]] = []

    def look(state: Any) -> None:
        expires = api.store.load(run_id).lease_expires
        # Past the last save's clock, so that a renewal is told from none at all.
        wait_until(lambda: time.time() > expires - 600, "the clock to pass the last save")
        seen.append((time.time(), expires))

    api.run(run_id, [Step(f"s{i}", blocking(api, look)) for i in range(4)], lease=600)
    assert len(seen) == 4  # every step looked: the pairs below are three
    for (was, _), (_, renewed) in itertools.pairwise(seen):
        assert renewed >= was + 600  # saved after the previous step looked, + lease


def test_the_heartbeat_keeps_the_lease_during_a_retry_pause(
    api: Api, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a retry pauses, the heartbeat renews the lease: here the pause ends only once
    a renewal is seen in the store (a fake clock: nothing sleeps for luck)."""
    fx = Effects()
    outcomes = iter([TimeoutError("429"), None])

    def pause(seconds: float) -> None:
        before = api.store.load(run_id).lease_expires
        wait_until(lambda: api.store.load(run_id).lease_expires > before, "a heartbeat")

    pause_with(monkeypatch, pause)  # under run_async in a thread: the loop stays free

    def flaky(state: Any) -> None:
        if (exc := next(outcomes)) is not None:
            raise exc

    step = fx.step("f", flaky, retry=Retry(attempts=2, backoff=30))
    assert api.run(run_id, [step], lease=0.3) == {}
    assert fx.log == ["f:1", "f:2"]
