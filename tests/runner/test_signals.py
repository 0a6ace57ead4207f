"""Signals on every backend, through run() and run_async(): a run that waits, is
signalled and resumes; signals sent early, twice, to no run, not JSON; a delivery racing
the owner's saves; one that lands while its step suspends; recover() and waiting runs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step, Workflow

from ..conftest import Api
from ..helpers.around import Around, AroundAsync
from ..helpers.steps import Effects, blocking
from ..helpers.waiting import wait_until


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
    assert api.create(ds.Workflow("approval", steps), run_id) is True
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


class FirstHeadOvertaken(Around):
    """For send_signal (which reads and writes the head alone): a store whose first
    head read, once read, waits until ``overtake()`` has had the run's owner save: the
    delivery then saves over a stale etag."""

    def __init__(self, store: Any, overtake: Callable[[], None]) -> None:
        super().__init__(store)
        self.overtake, self.loads = overtake, 0

    def load_head(self, run_id: str) -> ds.Checkpoint | None:
        cp = self.inner.load_head(run_id)
        self.loads += 1
        if self.loads == 1:
            self.overtake()
        return cp


class FirstHeadOvertakenAsync(AroundAsync):
    def __init__(self, store: Any, overtake: Callable[[], None]) -> None:
        super().__init__(store)
        self.overtake, self.loads = overtake, 0

    async def load_head(self, run_id: str) -> ds.Checkpoint | None:
        cp = await self.inner.load_head(run_id)
        self.loads += 1
        if self.loads == 1:
            await asyncio.to_thread(self.overtake)
        return cp


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
            sender: Any = FirstHeadOvertakenAsync(api.store.aio, owner_saves_a)
            send = ds.send_signal_async(sender, run_id, "note", "hello")
            asyncio.run_coroutine_threadsafe(send, api.loop).result(60)
        else:
            sender = FirstHeadOvertaken(api.store, owner_saves_a)
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
