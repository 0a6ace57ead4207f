"""Durable calls inside a step (``call``, ``call_async``), on every backend and its async
twin: recorded once, replayed after the step runs again, numbered, checked, retried.

Step bodies here are ``async def`` using ``call_async``: awaited under ``run_async``,
and run with ``asyncio.run`` inside the step under ``run`` (``Api.step``). The sync
``call`` has its own tests at the end, on the sync stores."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.state import CallRecords

from ..conftest import Api, pause_with


class Crash(Exception):
    """Stands in for a process dying in the middle of a step (the run is then failed,
    which keeps the step's journal just as a crash does)."""


class Made:
    """The calls that really ran (not replayed): (name, args) in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def fn(self, name: str, result: Any = None, fail: BaseException | None = None) -> Any:
        def call(*args: Any) -> Any:
            self.log.append((name, args))
            if fail is not None:
                raise fail
            return result if result is not None else f"{name}{args}"

        return call


def test_a_recorded_call_returns_its_result_without_running_again(api: Api, run_id: str) -> None:
    """A step makes three calls and fails after the second; run again, the two recorded
    calls return their results without running, the third runs; the journal is then
    dropped with the step's completion."""
    made, crash = Made(), [True]

    async def agent(state: Any) -> dict[str, Any]:
        a = await ds.call_async("llm", made.fn("llm", {"tool": "search"}), "q")
        b = await ds.call_async("tool", made.fn("tool"), a["tool"])
        if crash[0]:
            raise RuntimeError("the process dies here")
        c = await ds.call_async("llm", made.fn("llm", {"answer": 42}), b)
        return {"a": a, "b": b, "c": c}

    with pytest.raises(RuntimeError):
        api.run(run_id, [api.step("agent", agent)])
    cp = api.store.load(run_id)
    assert [(r["i"], r["name"]) for r in cp.calls] == [(0, "llm"), (1, "tool")]
    assert (cp.status, cp.calls[0]["result"]) == ("failed", {"tool": "search"})
    crash[0] = False
    state = api.run(run_id, [api.step("agent", agent)])
    assert state == {"a": {"tool": "search"}, "b": "tool('search',)", "c": {"answer": 42}}
    assert [name for name, _ in made.log] == ["llm", "tool", "llm"]
    assert api.store.load(run_id).calls == ()


def test_a_call_that_raises_records_nothing_and_runs_on_the_next_attempt(
    api: Api, run_id: str
) -> None:
    """The step catches a failed call (as an agent hands a tool's error to the model); it
    is recorded nowhere, keeps its place in the numbering, and runs again when the step
    runs again."""
    made, fails = Made(), [True]

    def flaky() -> str:
        made.log.append(("flaky", ()))
        if fails[0]:
            raise TimeoutError("tool timed out")
        return "ok"

    async def agent(state: Any) -> dict[str, Any]:
        try:
            got = await ds.call_async("tool", flaky)
        except TimeoutError as exc:
            got = f"error: {exc}"
        after = await ds.call_async("llm", made.fn("llm"), got)
        if fails[0]:
            raise Crash
        return {"got": got, "after": after}

    with pytest.raises(Crash):
        api.run(run_id, [api.step("agent", agent)])
    cp = api.store.load(run_id)
    assert [(r["i"], r["name"]) for r in cp.calls] == [(1, "llm")]
    fails[0] = False
    state = api.run(run_id, [api.step("agent", agent)])
    assert state["got"] == "ok"
    assert state["after"] == "llm('error: tool timed out',)"  # recorded: what the model saw
    assert [name for name, _ in made.log] == ["flaky", "llm", "flaky"]


def test_a_changed_call_name_is_a_step_mismatch_before_anything_runs(api: Api, run_id: str) -> None:
    """A recorded call whose name differs from the one now asked for at its position:
    StepMismatchError naming both, and the call does not run."""
    made = Made()

    async def first(state: Any) -> None:
        await ds.call_async("search", made.fn("search"))
        raise Crash

    async def changed(state: Any) -> None:
        await ds.call_async("lookup", made.fn("lookup"))

    with pytest.raises(Crash):
        api.run(run_id, [api.step("agent", first)])
    with pytest.raises(ds.StepMismatchError, match=r"call 'search'.*call 'lookup'"):
        api.run(run_id, [api.step("agent", changed)])
    assert made.log == [("search", ())]


def test_a_result_that_is_not_json_fails_the_call_and_records_nothing(
    api: Api, run_id: str
) -> None:
    """A call whose function returns something that is not plain JSON raises
    InvalidStateError naming the call; nothing is recorded; the step fails with it."""

    async def agent(state: Any) -> None:
        await ds.call_async("tool", lambda: {"when": object()})

    with pytest.raises(ds.InvalidStateError, match=r"call 0 'tool'.*\['when'\]"):
        api.run(run_id, [api.step("agent", agent)])
    cp = api.store.load(run_id)
    assert (cp.status, cp.calls) == ("failed", ())


def test_a_call_is_retried_in_place_with_its_attempts_counted(
    api: Api, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """retry=Retry(...): the call runs again after a backoff; the next attempt is recorded
    before each pause; inside the function, the attempt counts up and the idempotency
    key stays the call's own (the same on every retry, another for every call)."""
    seen: list[tuple[int, str]] = []
    stored: list[list[tuple[int, int]]] = []  # the journal as stored, at each pause
    pause_with(
        monkeypatch,
        lambda s: stored.append([(r["i"], r["attempt"]) for r in api.store.load(run_id).calls]),
    )

    def flaky() -> str:
        ctx = ds.current_step()
        seen.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3:
            raise ConnectionError("503")
        return "ok"

    def other() -> str:
        seen.append((ds.current_step().attempt, ds.current_step().idempotency_key))
        return "fine"

    async def agent(state: Any) -> dict[str, Any]:
        retry = ds.Retry(attempts=3, backoff=1.0)
        return {
            "a": await ds.call_async("tool", flaky, retry=retry),
            "b": await ds.call_async("tool", other),
        }

    assert api.run(run_id, [api.step("agent", agent)]) == {"a": "ok", "b": "fine"}
    assert [attempt for attempt, _ in seen] == [1, 2, 3, 1]
    keys = [key for _, key in seen]
    assert keys[0] == keys[1] == keys[2] != keys[3]
    assert stored == [[(0, 2)], [(0, 3)]]


def test_a_call_out_of_attempts_raises_into_the_step(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """When its attempts are used up the call's exception propagates into the step."""

    async def agent(state: Any) -> None:
        await ds.call_async("tool", Made().fn("x", fail=ConnectionError("down")), retry=ds.Retry(2))

    with pytest.raises(ConnectionError, match="down"):
        api.run(run_id, [api.step("agent", agent)])
    assert len(pauses) == 1


def test_calls_survive_a_signal_wait_in_the_same_step(api: Api, run_id: str) -> None:
    """Code before a wait runs again when the run resumes; through call it repeats no
    side effect: the recorded call returns its result and only the rest runs."""
    made = Made()

    async def gate(state: Any) -> dict[str, Any]:
        draft = await ds.call_async("draft", made.fn("draft", "text v1"))
        decision = ds.wait_for_signal("approval")
        sent = await ds.call_async("send", made.fn("send", "sent"), draft)
        return {"draft": draft, "decision": decision, "sent": sent}

    with pytest.raises(ds.RunWaiting):
        api.run(run_id, [api.step("gate", gate)])
    api.signal(run_id, "approval", {"ok": True})
    state = api.run(run_id, [api.step("gate", gate)])
    assert state == {"draft": "text v1", "decision": {"ok": True}, "sent": "sent"}
    assert [name for name, _ in made.log] == ["draft", "send"]


def test_calls_and_the_lease_live_together(api: Api, run_id: str) -> None:
    """A step whose calls outlast the lease many times over keeps it: the heartbeat
    renews it between and during calls (each call here waits for a renewal)."""
    renewals: list[float] = []

    async def lease_expires() -> float:
        cp = await api.store.aio.load(run_id) if api.is_async else api.store.load(run_id)
        return cp.lease_expires  # type: ignore[no-any-return]

    async def until_renewed() -> float:
        start, waited = await lease_expires(), 0.0
        while (now := await lease_expires()) == start:
            assert waited < 60, "the lease was not renewed during the call"
            await asyncio.sleep(0.01)
            waited += 0.01
        renewals.append(now)
        return now

    async def agent(state: Any) -> dict[str, Any]:
        got = [await ds.call_async("wait", until_renewed) for _ in range(3)]
        return {"renewed": len(got)}

    assert api.run(run_id, [api.step("agent", agent)], lease=0.3) == {"renewed": 3}
    assert renewals == sorted(renewals) and len(set(renewals)) == 3


# -- concurrency (run_async) ---------------------------------------------------------------


def test_gathered_calls_are_numbered_in_the_order_they_were_started(api: Api, run_id: str) -> None:
    """Calls started together are numbered as they were made, recorded as they return
    (here in reverse), and a resumed step gets each its own result back."""
    finished: list[str] = []
    crash = [True]

    async def slow(name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        finished.append(name)
        return name.upper()

    async def fan(state: Any) -> dict[str, Any]:
        calls = [ds.call_async(n, slow, n, d) for n, d in (("a", 0.06), ("b", 0.03), ("c", 0))]
        got = await asyncio.gather(*calls)
        if crash[0]:
            raise Crash
        return {"got": got}

    with pytest.raises(Crash):
        api.run(run_id, [api.step("fan", fan)])
    assert finished == ["c", "b", "a"]
    cp = api.store.load(run_id)
    assert [(r["i"], r["name"], r["result"]) for r in cp.calls] == [
        (0, "a", "A"),
        (1, "b", "B"),
        (2, "c", "C"),
    ]
    crash[0] = False
    assert api.run(run_id, [api.step("fan", fan)]) == {"got": ["A", "B", "C"]}
    assert finished == ["c", "b", "a"]  # nothing ran again


# -- the sync call, on the sync stores ------------------------------------------------------


def test_sync_call_records_and_replays(durable_store: ds.Store, run_id: str) -> None:
    """``call`` under ``run``: the same journal as call_async; a recorded call is not
    made again; calls are numbered across names."""
    made = Made()
    crash = [True]

    def agent(state: Any) -> dict[str, Any]:
        first = ds.call("llm", made.fn("llm", [1, 2]))
        second = ds.call("tool", made.fn("tool"), *first)
        if crash[0]:
            raise KeyboardInterrupt
        return {"first": first, "second": second}

    with pytest.raises(KeyboardInterrupt):
        ds.run(run_id, [ds.Step("agent", agent)], durable_store)
    crash[0] = False
    assert ds.run(run_id, [ds.Step("agent", agent)], durable_store) == {
        "first": [1, 2],
        "second": "tool(1, 2)",
    }
    assert [name for name, _ in made.log] == ["llm", "tool"]


def test_calls_are_refused_where_they_cannot_be_durable(
    durable_store: ds.Store, run_id: str
) -> None:
    """Outside a step: RuntimeError; an async function given to the sync call:
    TypeError saying to await call_async; a bad name: ValueError."""
    with pytest.raises(RuntimeError, match="only available inside a step"):
        ds.call("x", lambda: 1)

    async def coro() -> int:
        return 1

    def agent(state: Any) -> None:
        ds.call("x", coro)

    with pytest.raises(TypeError, match="await call_async"):
        ds.run(run_id, [ds.Step("agent", agent)], durable_store)

    def unnamed(state: Any) -> None:
        ds.call("", lambda: 1)

    with pytest.raises(ValueError, match="call name"):
        ds.run(f"{run_id}-2", [ds.Step("agent", unnamed)], durable_store)


def test_the_sync_call_is_refused_under_run_async(run_id: str) -> None:
    """Under run_async a blocking save would stall the event loop: TypeError saying to
    await call_async instead; the run records the failure."""

    async def agent(state: Any) -> None:
        ds.call("llm", lambda: 1)

    store = ds.AsyncMemoryStore()
    with pytest.raises(TypeError, match=r"await call_async\('llm'"):
        asyncio.run(ds.run_async(run_id, [ds.Step("agent", agent)], store))
    cp = store.sync.load(run_id)
    assert cp is not None and json.loads(json.dumps(cp.error))["type"] == "TypeError"


def test_a_call_that_outlives_its_step_is_not_recorded(run_id: str) -> None:
    """A call the step did not wait for (a task left running) returns after the step's
    result was saved: it records nothing -- it fails with RuntimeError saying why -- and
    the completed checkpoint stays as it was saved."""

    async def scenario() -> tuple[ds.Checkpoint, BaseException | None]:
        release = asyncio.Event()
        strays: list[asyncio.Task[Any]] = []

        async def late() -> str:
            await release.wait()
            return "too late"

        async def step(state: Any) -> dict[str, Any]:
            strays.append(asyncio.ensure_future(ds.call_async("late", late)))
            await asyncio.sleep(0)
            return {"done": True}

        store = ds.AsyncMemoryStore()
        await ds.run_async(run_id, [ds.Step("step", step)], store)
        release.set()
        (outcome,) = await asyncio.gather(*strays, return_exceptions=True)
        cp = await store.load(run_id)
        assert cp is not None
        return cp, outcome if isinstance(outcome, BaseException) else None

    cp, error = asyncio.run(scenario())
    assert (cp.status, cp.step, cp.calls, dict(cp.state)) == ("completed", 0, (), {"done": True})
    assert isinstance(error, RuntimeError) and "after its step had ended" in str(error)


def test_a_calls_save_makes_no_pass_over_the_calls_before_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, run_id: str
) -> None:
    """The 200th call of a step is saved without walking the 199 records before it (the
    journal knows what it added to the one stored): a call costs its result, however
    long the loop has run."""
    walked: list[int] = []
    counting = [False]
    plain_iter = CallRecords.__iter__

    def counted(self: CallRecords) -> Any:
        for record in plain_iter(self):
            if counting[0]:
                walked.append(record["i"])
            yield record

    monkeypatch.setattr(CallRecords, "__iter__", counted)

    def agent(state: Any) -> dict[str, Any]:
        for n in range(200):
            counting[0] = n == 199
            ds.call("tool", lambda n=n: n)
        counting[0] = False
        return {}

    with ds.FileStore(tmp_path / "store") as store:
        ds.run(run_id, [ds.Step("agent", agent)], store)
    assert len(walked) < 10, walked


def test_a_stored_journal_forgets_the_journals_before_it(run_id: str) -> None:
    """Each journal knows the one it was made from until it is stored, and no longer:
    a step's memory grows with its calls, not with their square."""
    depths: list[int] = []

    def agent(state: Any) -> dict[str, Any]:
        for n in range(50):
            ds.call("tool", lambda n=n: n)
            calls, depth = ds.current_step().journal.run.cp.calls, 0  # type: ignore[union-attr]
            while isinstance(calls, CallRecords) and calls.base is not None:
                calls, depth = calls.base, depth + 1
            depths.append(depth)
        return {}

    ds.run(run_id, [ds.Step("agent", agent)], ds.MemoryStore())
    assert len(depths) == 50 and max(depths) <= 1, depths
