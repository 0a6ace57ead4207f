"""A call's identity and divergence (``runner.journal``): a keyed call replays by its
key whatever task or order makes it; a replay that departs from the record -- a call
asked under another name, recorded operations never asked for when the step completes
or suspends -- fails the run with ``NondeterminismError``, its record kept, and
``resume_run`` after a fix completes it without running a recorded call again;
``Step(..., replay="lenient")`` opts out; ``key=`` clashing with ``fn``'s own parameter
is loud."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api


class Crash(Exception):
    """Stands in for a process dying in the step (the run is failed, its journal kept)."""


class Ran:
    """What really ran (not replayed), in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def fn(self, name: str) -> Any:
        def run(*args: Any) -> str:
            self.log.append(name)
            return f"{name}:{','.join(map(str, args))}"

        return run

    async def slow(self, name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        self.log.append(name)
        return name


def test_keyed_calls_replay_by_key_whatever_task_or_order_makes_them(api: Api, run_id: str) -> None:
    """Two branches gathered; on the next attempt another task is created first (a live
    path that numbers tasks differently from the replayed one, as a framework's may) and
    the branches start in the reverse order. Keyed, each branch gets its own results
    back and nothing recorded runs again -- numbered by task, they would get another
    task's records (the measured ``{'A': ['A1','B1'], 'B': ['B2','B2']}``) or diverge."""
    ran, attempt = Ran(), [0]

    async def branch(name: str, delay: float) -> list[str]:
        one = await ds.call_async("work", ran.slow, f"{name}1", delay, key=f"{name}:1")
        two = await ds.call_async("work", ran.slow, f"{name}2", delay, key=f"{name}:2")
        return [one, two]

    async def agent(state: Any) -> dict[str, Any]:
        attempt[0] += 1
        if attempt[0] == 1:
            a, b = await asyncio.gather(branch("A", 0.0), branch("B", 0.01))
            raise Crash
        await asyncio.create_task(asyncio.sleep(0))  # shifts the tasks' numbers
        b, a = await asyncio.gather(branch("B", 0.0), branch("A", 0.01))
        return {"A": a, "B": b}

    with pytest.raises(Crash):
        api.run(run_id, [api.step("agent", agent)])
    assert sorted(ran.log) == ["A1", "A2", "B1", "B2"]
    recorded = api.store.load(run_id).calls
    assert sorted(r["key"] for r in recorded) == ["A:1", "A:2", "B:1", "B:2"]
    assert api.run(run_id, [api.step("agent", agent)]) == {"A": ["A1", "A2"], "B": ["B1", "B2"]}
    assert sorted(ran.log) == ["A1", "A2", "B1", "B2"]  # nothing ran again


def test_a_call_asked_under_another_name_fails_the_run_and_keeps_the_record(
    api: Api, run_id: str
) -> None:
    """The second attempt asks for ``lookup`` where ``search`` is recorded: the run is
    failed with NondeterminismError (also a StepMismatchError) naming the step and both
    calls, nothing ran, and the record is kept; ``resume_run`` after the code is fixed
    completes the step without running the recorded call again."""
    ran = Ran()
    code = ["first"]

    async def agent(state: Any) -> dict[str, Any]:
        first = await ds.call_async("search", ran.fn("search"), 1)
        if code[0] == "first":
            raise Crash
        name = "lookup" if code[0] == "changed" else "search"
        second = await ds.call_async(name, ran.fn(name), 2)
        return {"got": [first, second]}

    with pytest.raises(Crash):
        api.run(run_id, [api.step("agent", agent)])
    code[0] = "changed"
    api_changed = [api.step("agent", agent)]

    async def renamed(state: Any) -> None:  # the first call renamed: a divergence at 0
        await ds.call_async("lookup", ran.fn("lookup"), 1)

    with pytest.raises(ds.NondeterminismError) as err:
        api.run(run_id, [api.step("agent", renamed)])
    assert isinstance(err.value, ds.StepMismatchError)
    assert (err.value.step, err.value.step_name) == (0, "agent")
    assert err.value.recorded == ["search (0)"] and err.value.asked == ["lookup (0)"]
    assert "call 'search'" in str(err.value) and "call 'lookup'" in str(err.value)
    assert "resume_run" in str(err.value)
    cp = api.store.load(run_id)
    assert cp.status == "failed" and cp.error["type"] == "durable_steps.NondeterminismError"
    assert [(r["name"], r["result"]) for r in cp.calls] == [("search", "search:1")]
    assert ran.log == ["search"]  # nothing else ran
    code[0] = "fixed"
    api._call(ds.resume_run, ds.resume_run_async, run_id)
    assert api.run(run_id, api_changed) == {"got": ["search:1", "search:2"]}
    assert ran.log == ["search", "search"]  # the recorded call did not run again


def test_a_step_completing_without_asking_for_its_records_fails_and_resumes(run_id: str) -> None:
    """A step that completes without asking for a call it recorded last time is failed
    with NondeterminismError before its completion is saved (which would drop the
    record); fixed and resumed, it completes without running the recorded calls."""
    store = ds.MemoryStore()
    ran, code = Ran(), ["first"]

    def step(state: Any) -> dict[str, Any]:
        one = ds.call("first", ran.fn("first"))
        if code[0] == "skips":
            return {"n": one}
        two = ds.call("second", ran.fn("second"))
        if code[0] == "first":
            raise Crash
        return {"n": [one, two]}

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", step)], store)
    code[0] = "skips"
    with pytest.raises(ds.NondeterminismError, match=r"completed without asking .* second \(1\)"):
        ds.run(run_id, [ds.Step("s", step)], store)
    cp = store.load(run_id)
    assert cp.status == "failed" and cp.step == -1 and len(cp.calls) == 2
    code[0] = "fixed"
    ds.resume_run(store, run_id)
    assert ds.run(run_id, [ds.Step("s", step)], store) == {"n": ["first:", "second:"]}
    assert ran.log == ["first", "second"]


def test_a_step_suspending_past_records_it_never_asked_for_fails(run_id: str) -> None:
    """Records after the wait the step now suspends at (in the task that suspends)
    fail the run: the code changed under them."""
    store = ds.MemoryStore()
    ran, code = Ran(), ["first"]

    def step(state: Any) -> None:
        ds.call("a", ran.fn("a"))
        if code[0] == "first":
            ds.sleep(0)  # over at once: nothing to record, it takes its place
            ds.call("b", ran.fn("b"))
            raise Crash
        ds.wait_for_signal("go")  # in the sleep's place: suspends, b never asked

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", step)], store)
    code[0] = "waits"
    with pytest.raises(ds.NondeterminismError, match=r"suspended without asking .* b \(2\)"):
        ds.run(run_id, [ds.Step("s", step)], store)
    cp = store.load(run_id)
    assert cp.status == "failed" and [r["name"] for r in cp.calls] == ["a", "b"]


def test_a_lenient_step_drops_what_it_did_not_ask_for_and_says_so(
    run_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``replay="lenient"``: a renamed call runs anew, records not asked for are dropped
    as the step completes, each logged at INFO by name."""
    store = ds.MemoryStore()
    ran, code = Ran(), ["first"]

    def step(state: Any) -> dict[str, Any]:
        if code[0] == "first":
            ds.call("a", ran.fn("a"))
            ds.call("b", ran.fn("b"))
            raise Crash
        return {"n": ds.call("a2", ran.fn("a2"))}

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", step, replay="lenient")], store)
    code[0] = "changed"
    with caplog.at_level(logging.INFO, logger="durable_steps"):
        assert ds.run(run_id, [ds.Step("s", step, replay="lenient")], store) == {"n": "a2:"}
    said = " | ".join(r.getMessage() for r in caplog.records)
    assert "call 'a'" in said and "now asks for call 'a2'" in said
    assert "without asking for 1 recorded operation(s) b (1): dropped" in said
    assert ran.log == ["a", "b", "a2"]
    with pytest.raises(ValueError, match="replay is 'strict'"):
        ds.Step("s", step, replay="loose")  # type: ignore[arg-type]


def test_key_is_call_s_own_and_a_clash_with_fn_s_parameter_is_loud(run_id: str) -> None:
    """``key=``, ``retry=`` and ``returns=`` are never passed to ``fn``; when ``fn``
    declares one of them and the caller passes it, TypeError names the escape
    (``functools.partial``). A key that is not text, or asked twice, is refused."""
    store = ds.MemoryStore()
    got: list[Any] = []

    def lookup(q: str, key: str = "default") -> str:
        return f"{q}/{key}"

    def step(state: Any) -> dict[str, Any]:
        with pytest.raises(TypeError, match=r"functools.partial\(fn, key=...\)"):
            ds.call("lookup", lookup, "q", key="k1")
        got.append(ds.call("lookup", functools.partial(lookup, key="mine"), "q", key="k1"))
        got.append(ds.call("upper", str.upper, "x", key="k2"))  # no signature clash
        with pytest.raises(TypeError, match="a key is text"):
            ds.call("x", str, 1, key=7)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="asked twice for a call keyed 'k1'"):
            ds.call("lookup", str, "q", key="k1")
        return {}

    ds.run(run_id, [ds.Step("s", step)], store)
    assert got == ["q/mine", "X"]


def test_calls_inside_a_replayed_call_are_not_a_divergence(run_id: str) -> None:
    """A call whose function made calls of its own (a sub-agent as a tool), replayed
    from its result, does not ask for those again: that is no divergence."""
    store = ds.MemoryStore()
    ran, crash = Ran(), [True]

    def tool() -> str:
        return ds.call("inner", ran.fn("inner")) + "!"

    def step(state: Any) -> dict[str, Any]:
        out = [ds.call("outer", tool), ds.call("keyed", tool, key="t1")]
        if crash[0]:
            crash[0] = False
            raise Crash
        return {"out": out}

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", step)], store)
    assert ds.run(run_id, [ds.Step("s", step)], store) == {"out": ["inner:!", "inner:!"]}
    assert ran.log == ["inner", "inner"]


def test_records_of_an_earlier_version_without_keys_replay_for_keyed_calls(
    api: Api, run_id: str
) -> None:
    """A run recorded before calls had keys (its records numbered by place), resumed by
    code that keys them: each keyed call finds its unkeyed record at its place and
    replays it; nothing recorded runs again."""
    ran, keyed = Ran(), [False]

    async def agent(state: Any) -> dict[str, Any]:
        key = (lambda k: k) if keyed[0] else (lambda k: None)
        a = await ds.call_async("tool", ran.fn("a"), key=key("a"))
        b = await ds.call_async("tool", ran.fn("b"), key=key("b"))
        if not keyed[0]:
            raise Crash
        c = await ds.call_async("tool", ran.fn("c"), key=key("c"))
        return {"got": [a, b, c]}

    with pytest.raises(Crash):
        api.run(run_id, [api.step("agent", agent)])
    assert all("key" not in r for r in api.store.load(run_id).calls)
    keyed[0] = True
    assert api.run(run_id, [api.step("agent", agent)]) == {"got": ["a:", "b:", "c:"]}
    assert ran.log == ["a", "b", "c"]
