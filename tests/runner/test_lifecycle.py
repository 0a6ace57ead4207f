"""A run's life on every backend, through run() for the sync stores and run_async() for the
async ones: leases and their release, lease loss, signals, retries, recovery, schema 1."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Retry, Step, Workflow
from durable_steps.runner import store_io

from ..conftest import Backend
from ..helpers.waiting import wait_until


@dataclass
class Api:
    """The public calls, sync for sync stores and awaited (on the test loop) for async ones."""

    backend: Backend
    loop: asyncio.AbstractEventLoop

    @property
    def is_async(self) -> bool:
        return self.backend.name.endswith("-async")

    @property
    def store(self) -> Any:
        return self.backend.store

    def _call(
        self, sync: Callable[..., Any], aio: Callable[..., Any], *args: Any, **kw: Any
    ) -> Any:
        if not self.is_async:
            return sync(self.store, *args, **kw)
        future = asyncio.run_coroutine_threadsafe(aio(self.store.aio, *args, **kw), self.loop)
        return future.result(60)

    def run(self, run_id: str, steps: list[Step], **kw: Any) -> dict[str, Any]:
        return self._call(  # type: ignore[no-any-return]
            lambda s, *a, **k: ds.run(a[0], a[1], s, **k),
            lambda s, *a, **k: ds.run_async(a[0], a[1], s, **k),
            run_id,
            steps,
            **kw,
        )

    def start(self, w: Workflow, run_id: str, **kw: Any) -> dict[str, Any]:
        return self._call(  # type: ignore[no-any-return]
            lambda s, *a, **k: w.run(a[0], s, **k),
            lambda s, *a, **k: w.run_async(a[0], s, **k),
            run_id,
            **kw,
        )

    def create(self, w: Workflow, run_id: str, **kw: Any) -> bool:
        """``Workflow.start``: the run created for the workers, nothing run."""
        return self._call(  # type: ignore[no-any-return]
            lambda s, *a, **k: w.start(a[0], s, **k),
            lambda s, *a, **k: w.start_async(a[0], s, **k),
            run_id,
            **kw,
        )

    def signal(self, run_id: str, name: str, payload: Any = None) -> ds.Checkpoint:
        return self._call(ds.send_signal, ds.send_signal_async, run_id, name, payload)  # type: ignore[no-any-return]

    def recover(self, workflows: list[Workflow], **kw: Any) -> list[ds.Recovered]:
        return self._call(ds.recover, ds.recover_async, workflows, **kw)  # type: ignore[no-any-return]


@pytest.fixture
def api(backend: Backend, loop: asyncio.AbstractEventLoop) -> Api:
    return Api(backend, loop)


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake clock for retry backoff: pauses are recorded, not slept."""
    seen: list[float] = []

    async def asleep(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr(store_io, "_sleep", seen.append)
    monkeypatch.setattr(store_io, "_asleep", asleep)
    return seen


def blocking(api: Api, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A step function that may block (wait for an event, use the store through the sync
    facade): itself under run(), run in a worker thread under run_async, so that the
    event loop (and with it the async store and the heartbeat) stays free."""
    if not api.is_async:
        return fn

    async def in_a_thread(state: Any) -> Any:
        return await asyncio.to_thread(fn, state)

    return in_a_thread


class Effects:
    """Side effects counted per step, as a payment or an e-mail would be."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def step(self, name: str, body: Callable[[Any], Any] | None = None, **kw: Any) -> Step:
        def fn(state: Any) -> Any:
            self.log.append(f"{name}:{ds.current_step().attempt}")
            return body(state) if body else {name: True}

        return Step(name, fn, **kw)


# -- leases -----------------------------------------------------------------------------


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

    async def slow_async(state: Any) -> None:
        await steal()
        try:
            await asyncio.sleep(60)  # ended early by the cancellation, or the test fails
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    def slow_sync(state: Any) -> dict[str, int]:
        steal()
        return {"x": 1}

    step = Step("slow", slow_async if api.is_async else slow_sync)
    with pytest.raises(ds.LeaseLostError):
        api.run(run_id, [step], lease=0.3)
    assert cancelled == ([True] if api.is_async else [])
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

    async def pause_async(seconds: float) -> None:
        await asyncio.to_thread(pause, seconds)  # the loop stays free for the heartbeat

    monkeypatch.setattr(store_io, "_sleep", pause)
    monkeypatch.setattr(store_io, "_asleep", pause_async)

    def flaky(state: Any) -> None:
        if (exc := next(outcomes)) is not None:
            raise exc

    step = fx.step("f", flaky, retry=Retry(attempts=2, backoff=30))
    assert api.run(run_id, [step], lease=0.3) == {}
    assert fx.log == ["f:1", "f:2"]


# -- signals ----------------------------------------------------------------------------


def approval_steps(fx: Effects) -> list[Step]:
    def gate(state: Any) -> dict[str, Any]:
        decision = ds.wait_for_signal("approval")
        return {"decision": decision}

    return [fx.step("draft"), fx.step("gate", gate), fx.step("send")]


def test_wait_then_signal_then_resume_to_completion(api: Api, run_id: str) -> None:
    """A step waiting for a signal suspends the run (RunWaiting, lease released, status
    waiting); running it again before the signal raises RunWaiting and runs nothing; after
    send_signal the run resumes, the step gets the payload, earlier steps ran once."""
    fx = Effects()
    steps = approval_steps(fx)
    with pytest.raises(ds.RunWaiting) as waiting:
        api.run(run_id, steps)
    assert (waiting.value.run_id, waiting.value.signal) == (run_id, "approval")
    cp = api.store.load(run_id)
    assert (cp.status, cp.waiting_for, cp.step, cp.owner) == ("waiting", "approval", 0, None)
    with pytest.raises(ds.RunWaiting):
        api.run(run_id, steps)
    assert fx.log == ["draft:1", "gate:1"]
    api.signal(run_id, "approval", {"by": "ann", "ok": True})
    final = api.run(run_id, steps)
    assert final["decision"] == {"by": "ann", "ok": True}
    assert fx.log == ["draft:1", "gate:1", "gate:2", "send:1"]
    cp = api.store.load(run_id)
    assert (cp.status, dict(cp.signals)) == ("completed", {"approval": {"by": "ann", "ok": True}})


def test_a_signal_sent_before_the_wait_is_returned_at_once(api: Api, run_id: str) -> None:
    """A signal delivered before the step asks for it is kept and returned immediately."""
    fx = Effects()
    steps = approval_steps(fx)
    assert api.create(Workflow("approval", steps), run_id) is True
    api.signal(run_id, "approval", "yes")
    assert api.run(run_id, steps)["decision"] == "yes"
    assert fx.log == ["draft:1", "gate:1", "send:1"]


def test_duplicate_and_unknown_run_signals_are_refused(api: Api, run_id: str) -> None:
    """A second signal of the same name is a ConflictError (also after completion) and an
    unknown run a RunNotFoundError (also a LookupError); neither changes anything."""
    with pytest.raises(ds.RunNotFoundError) as missing:
        api.signal(run_id, "approval", 1)
    assert isinstance(missing.value, LookupError)
    assert api.store.load(run_id) is None
    api.run(run_id, [Step("a", lambda s: None)])
    api.signal(run_id, "approval", 1)
    before = api.store.load(run_id)
    with pytest.raises(ds.ConflictError, match="already has signal 'approval'"):
        api.signal(run_id, "approval", 2)
    assert api.store.load(run_id) == before


def test_a_signal_payload_follows_the_state_rules(api: Api, run_id: str) -> None:
    """A payload that is not JSON under the state rules is refused before any I/O."""
    api.run(run_id, [Step("a", lambda s: None)])
    before = api.store.load(run_id)
    with pytest.raises(ds.InvalidStateError, match=r"signal payload\['approval'\]"):
        api.signal(run_id, "approval", {"n": 2**60})
    assert api.store.load(run_id) == before


class FirstLoadOvertaken:
    """A store for send_signal whose first load, once read, waits until ``overtake()``
    has had the run's owner save: the delivery then saves over a stale etag."""

    def __init__(self, store: Any, overtake: Callable[[], None]) -> None:
        self.store, self.overtake, self.loads = store, overtake, 0

    def load(self, run_id: str) -> ds.Checkpoint | None:
        cp = self.store.load(run_id)
        self.loads += 1
        if self.loads == 1:
            self.overtake()
        return cp  # type: ignore[no-any-return]

    def save(self, cp: ds.Checkpoint) -> ds.Checkpoint:
        return self.store.save(cp)  # type: ignore[no-any-return]


class FirstLoadOvertakenAsync(FirstLoadOvertaken):
    async def load(self, run_id: str) -> ds.Checkpoint | None:  # type: ignore[override]
        cp = await self.store.load(run_id)
        self.loads += 1
        if self.loads == 1:
            await asyncio.to_thread(self.overtake)
        return cp  # type: ignore[no-any-return]

    async def save(self, cp: ds.Checkpoint) -> ds.Checkpoint:  # type: ignore[override]
        return await self.store.save(cp)  # type: ignore[no-any-return]


def test_a_signal_racing_the_owners_saves_is_never_lost(api: Api, run_id: str) -> None:
    """A delivery overtaken by a save of the run's owner loads again and retries; an owner
    whose save is overtaken by a delivery takes the signal over and saves again. Neither
    overwrites the other: the signal and every step's result are there at the end."""
    fx = Effects()
    in_a, leave_a, delivered = threading.Event(), threading.Event(), threading.Event()

    def a(state: Any) -> dict[str, int]:
        in_a.set()
        assert leave_a.wait(30)
        return {"a": 1}

    def b(state: Any) -> dict[str, int]:
        assert delivered.wait(30)  # so that b's save meets the delivery
        return {"b": 1}

    def owner_saves_a() -> None:
        leave_a.set()
        wait_until(lambda: api.store.load(run_id).step == 0, "the owner to save step a")

    results: list[Any] = []
    steps = [fx.step("a", blocking(api, a)), fx.step("b", blocking(api, b))]
    owner = threading.Thread(target=lambda: results.append(api.run(run_id, steps)))
    owner.start()
    try:
        assert in_a.wait(30)
        if api.is_async:
            sender: Any = FirstLoadOvertakenAsync(api.store.aio, owner_saves_a)
            send = ds.send_signal_async(sender, run_id, "note", "hello")
            asyncio.run_coroutine_threadsafe(send, api.loop).result(60)
        else:
            sender = FirstLoadOvertaken(api.store, owner_saves_a)
            ds.send_signal(sender, run_id, "note", "hello")
        delivered.set()
    finally:
        leave_a.set()
        delivered.set()
        owner.join()
    assert sender.loads == 2  # the delivery's first save met the owner's and was retried
    assert results == [{"a": 1, "b": 1}]  # the owner's save of b absorbed the delivery
    cp = api.store.load(run_id)
    assert (cp.status, dict(cp.signals), cp.step) == ("completed", {"note": "hello"}, 1)
    assert fx.log == ["a:1", "b:1"]


def test_a_signal_delivered_while_its_step_suspends_is_not_missed(api: Api, run_id: str) -> None:
    """The signal lands after the step asked for it but before the run was saved as
    waiting: the run does not wait for a signal it has -- the step runs again at once and
    gets the payload."""
    fx = Effects()

    def gate(state: Any) -> dict[str, Any]:
        if ds.current_step().attempt == 1:
            ds.send_signal(api.store, run_id, "approval", "yes")  # a person answers fast
        return {"decision": ds.wait_for_signal("approval")}

    assert api.run(run_id, [fx.step("gate", blocking(api, gate))]) == {"decision": "yes"}
    assert fx.log == ["gate:1", "gate:2"]
    cp = api.store.load(run_id)
    assert (cp.status, cp.owner, dict(cp.signals)) == ("completed", None, {"approval": "yes"})


def test_recover_leaves_a_waiting_run_until_it_is_signalled(api: Api, run_id: str) -> None:
    """recover() does not touch a waiting run; once its signal arrives, it resumes it."""
    fx = Effects()
    w = Workflow(f"approve-{run_id}", approval_steps(fx))
    with pytest.raises(ds.RunWaiting):
        api.start(w, run_id)
    assert api.recover([w]) == []
    api.signal(run_id, "approval", "ok")
    assert api.recover([w]) == [ds.Recovered(run_id, w.name, "completed")]
    assert fx.log == ["draft:1", "gate:1", "gate:2", "send:1"]


# -- retries ----------------------------------------------------------------------------


def test_retries_count_attempts_back_off_and_then_fail(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """A step raising an error in on= is retried with growing, jittered pauses; when the
    attempts are used up the run is failed with the error recorded and the error raised."""
    fx = Effects()

    def flaky(state: Any) -> None:
        raise TimeoutError("429 from the model")

    retry = Retry(attempts=4, backoff=1.0, max_backoff=3.0)
    with pytest.raises(TimeoutError, match="429"):
        api.run(run_id, [fx.step("flaky", flaky, retry=retry)])
    assert fx.log == ["flaky:1", "flaky:2", "flaky:3", "flaky:4"]
    assert len(pauses) == 3
    for n, pause in enumerate(pauses, start=1):
        cap = min(3.0, 2 ** (n - 1))
        assert cap / 2 <= pause <= cap
    cp = api.store.load(run_id)
    assert (cp.status, cp.owner, cp.attempt) == ("failed", None, 4)
    assert (cp.error["type"], cp.error["message"], cp.error["step"]) == (
        "TimeoutError",
        "429 from the model",
        0,
    )


def test_a_retried_step_that_then_succeeds_completes(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """Two failures, then success: the run completes, the error is cleared."""
    fx = Effects()
    outcomes = iter([ConnectionError("reset"), ConnectionError("reset"), None])

    def flaky(state: Any) -> dict[str, int]:
        if (exc := next(outcomes)) is not None:
            raise exc
        return {"ok": ds.current_step().attempt}

    assert api.run(run_id, [fx.step("f", flaky, retry=Retry(attempts=3))]) == {"ok": 3}
    cp = api.store.load(run_id)
    assert (cp.status, cp.error, len(pauses)) == ("completed", None, 2)


def test_only_the_errors_in_on_are_retried(api: Api, run_id: str, pauses: list[float]) -> None:
    """An exception outside on= fails the run at once, without a retry."""
    fx = Effects()

    def bug(state: Any) -> None:
        raise KeyError("a bug, not a blip")

    with pytest.raises(KeyError):
        api.run(run_id, [fx.step("f", bug, retry=Retry(attempts=5, on=(TimeoutError,)))])
    assert (fx.log, pauses) == (["f:1"], [])
    assert api.store.load(run_id).status == "failed"


def test_an_explicit_run_of_a_failed_run_starts_its_attempts_afresh(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """After the attempts are used up, running the failed run again gives the step a new
    round of attempts (attempt numbers keep counting), and recover() leaves it alone."""
    fx = Effects()

    def down(state: Any) -> None:
        raise TimeoutError("down")

    w = Workflow(f"retry-{run_id}", [fx.step("f", down, retry=Retry(attempts=2))])
    with pytest.raises(TimeoutError):
        api.start(w, run_id)
    assert api.recover([w]) == []
    with pytest.raises(TimeoutError):
        api.start(w, run_id)
    assert fx.log == ["f:1", "f:2", "f:3", "f:4"]


def test_interrupts_are_never_retried(api: Api, run_id: str, pauses: list[float]) -> None:
    """KeyboardInterrupt and SystemExit (CancelledError under run_async) are not retried
    even with on=(BaseException,); the lease is released and the run stays running, to
    resume there."""
    # An event loop lets KeyboardInterrupt and SystemExit escape run_forever (they would
    # stop the test's loop), so under run_async the interrupt is a cancellation.
    kinds = [asyncio.CancelledError] if api.is_async else [KeyboardInterrupt, SystemExit]
    for n, interrupt in enumerate(kinds):
        fx = Effects()

        def interrupted(state: Any, interrupt: type[BaseException] = interrupt) -> None:
            raise interrupt

        step = fx.step("f", interrupted, retry=Retry(attempts=5, on=(BaseException,)))
        # (a cancelled coroutine reaches this thread as concurrent.futures.CancelledError)
        with pytest.raises((interrupt, concurrent.futures.CancelledError)):
            api.run(f"{run_id}-{n}", [step])
        assert (fx.log, pauses) == (["f:1"], [])
        cp = api.store.load(f"{run_id}-{n}")
        assert (cp.status, cp.owner) == ("running", None)


# -- workflows and recovery -------------------------------------------------------------


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
