"""Concurrency inside a step replays right: each branch (task) gets its own recorded
calls back whatever the timing -- after a real SIGKILL at every call of every branch, on
the file store and cosmos-local (memory: an exception in the process stands in for the
kill), with the branches' latencies reversed on resume. Constructs that cannot be
replayed deterministically are refused at their first call, never answered with another
branch's record."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers import branch_child
from ..helpers.branch_child import SHAPES, Effects, calls, expected

CHILD = branch_child.__file__


def ran(path: Path) -> Counter[str]:
    """The calls that ran, as the results they returned ("A1": branch A's first)."""
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.replace(" ", "") for line in lines)


def kill_at(env: dict[str, str], effects: Path, shape: str, run_id: str, k: int) -> None:
    child = subprocess.run(
        [sys.executable, CHILD, shape, run_id],
        env={
            **os.environ,
            **env,
            "SIDE_EFFECTS": str(effects),
            "KILL_AT": str(k),
            "LATENCY": "forward",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -9, child.stderr  # killed by itself, at its k-th call


def recorded(cp: ds.Checkpoint | None) -> set[str]:
    """The results the killed run had recorded (what must not run again). (Killed by an
    exception in the process, the run is failed: running it again is the re-run.)"""
    assert cp is not None and cp.status in ("running", "failed"), cp
    return {r["result"] for r in cp.calls if "result" in r}


def check_resumed(
    results: dict[str, Any], kept: set[str], before: Counter[str], after: Counter[str], k: int
) -> None:
    shape = next(s for s in SHAPES if results.keys() <= expected(s).keys() <= results.keys())
    assert results == expected(shape), f"killed at call {k}: a branch got another's record"
    assert all(after[r] == before[r] == 1 for r in kept), (k, kept, after)  # not run again
    assert set(after) == {r for rs in expected(shape).values() for r in rs}, (k, after)
    assert max(after.values()) <= 2, (k, after)  # only what was in flight ran twice


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_each_branch_replays_its_own_calls_after_a_kill_at_any_call(
    env: dict[str, str], tmp_path: Path, shape: str, run_id: str
) -> None:
    """Killed right after each call of each branch had run (its record not saved, other
    branches' calls in flight), then resumed with every branch's latency reversed: each
    branch gets its own results, no recorded call runs again, every call ran."""
    for k in range(calls(shape)):
        rid, effects = f"{run_id}-{k}", tmp_path / f"effects-{k}"
        kill_at(env, effects, shape, rid, k)
        before = ran(effects)

        async def resume(rid: str = rid, effects: Path = effects) -> tuple[Any, set[str]]:
            async with ds.async_store_from_env(env) as store:
                kept = recorded(await store.load(rid))
                again = Effects(effects, None, lambda: None)
                return await branch_child.run(shape, rid, store, "reverse", again), kept

        results, kept = asyncio.run(resume())
        check_resumed(results, kept, before, ran(effects), k)


class Killed(BaseException):
    """Stands in for the process's death (a BaseException: no step catches it)."""


def kill() -> None:
    raise Killed


@pytest.mark.parametrize("shape", SHAPES)
def test_memory_each_branch_replays_its_own_calls_after_an_interruption(
    tmp_path: Path, shape: str, run_id: str
) -> None:
    """The memory store cannot outlive a process: an exception at each call of each
    branch stands in for the kill; the resumed run's branches, latencies reversed, each
    get their own results."""
    for k in range(calls(shape)):
        rid, effects = f"{run_id}-{k}", tmp_path / f"effects-{k}"
        store = ds.AsyncMemoryStore()
        with pytest.raises((Killed, BaseExceptionGroup)):
            asyncio.run(branch_child.run(shape, rid, store, "forward", Effects(effects, k, kill)))
        before = ran(effects)

        async def resume(
            rid: str = rid, effects: Path = effects, store: ds.AsyncStore = store
        ) -> tuple[Any, set[str]]:
            kept = recorded(await store.load(rid))
            again = Effects(effects, None, lambda: None)
            return await branch_child.run(shape, rid, store, "reverse", again), kept

        results, kept = asyncio.run(resume())
        check_resumed(results, kept, before, ran(effects), k)


def test_a_branchs_calls_are_keyed_by_its_task_and_the_steps_own_stay_as_before(
    run_id: str,
) -> None:
    """The records say which task made them: the step's own calls keep the keys of a
    step without tasks ({"i": n}); a gathered branch's are numbered within it."""
    store = ds.AsyncMemoryStore()
    seen: list[dict[str, Any]] = []

    async def branch(name: str) -> list[str]:
        return [await ds.call_async("llm", str.upper, f"{name}{n}") for n in (1, 2)]

    async def step(state: Any) -> dict[str, Any]:
        first = await ds.call_async("plan", str.upper, "p")
        both = await asyncio.gather(branch("a"), branch("b"))
        cp = await store.load(run_id)
        seen.extend({k: r[k] for k in ("i", "task", "name") if k in r} for r in cp.calls)
        return {"out": [first, *both]}

    state = asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], store))
    assert state == {"out": ["P", ["A1", "A2"], ["B1", "B2"]]}
    assert seen == [
        {"i": 0, "name": "plan"},
        {"i": 0, "task": "0", "name": "llm"},
        {"i": 1, "task": "0", "name": "llm"},
        {"i": 0, "task": "1", "name": "llm"},
        {"i": 1, "task": "1", "name": "llm"},
    ]


def test_calls_gathered_as_coroutines_are_numbered_in_the_order_written(run_id: str) -> None:
    """gather(call_async(a), call_async(b)) takes both indices in the caller's scope when
    the calls are made, so a resumed step finds each record where it left it, whichever
    finished first."""
    store = ds.AsyncMemoryStore()
    made: list[str] = []
    pauses = {"a": 0.05, "b": 0.0}

    async def slow(x: str) -> str:
        await asyncio.sleep(pauses[x])
        made.append(x)
        if made == ["b", "a"]:
            raise Killed  # b recorded, a ran and died before its record
        return x.upper()

    async def step(state: Any) -> dict[str, Any]:
        a, b = await asyncio.gather(ds.call_async("x", slow, "a"), ds.call_async("x", slow, "b"))
        return {"out": [a, b]}

    with pytest.raises(Killed):
        asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], store))
    pauses.update(a=0.0, b=0.05)  # the other way round now
    assert asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], store)) == {"out": ["A", "B"]}
    assert made == ["b", "a", "a"]


def test_a_call_made_inside_a_calls_function_is_numbered_within_that_call(run_id: str) -> None:
    """A call's function may make calls of its own: they belong to it, so replaying the
    outer call (which does not run its function) shifts none of the step's numbering."""
    store = ds.MemoryStore()
    runs: list[str] = []

    def inner(x: str) -> str:
        runs.append(x)
        return x * 2

    def outer(x: str) -> str:
        return ds.call("inner", inner, x) + "!"

    crashed: list[bool] = []

    def step(state: Any) -> dict[str, Any]:
        first = ds.call("outer", outer, "a")
        if not crashed:
            crashed.append(True)
            raise Killed  # the first attempt dies here
        return {"out": [first, ds.call("tail", inner, "b")]}

    with pytest.raises(Killed):
        ds.run(run_id, [ds.Step("s", step)], store)
    cp = store.load(run_id)
    assert cp is not None
    assert [(r.get("task", ""), r["i"], r["name"]) for r in cp.calls] == [
        ("", 0, "outer"),
        ("c0", 0, "inner"),
    ]
    assert ds.run(run_id, [ds.Step("s", step)], store) == {"out": ["aa!", "bb"]}
    assert runs == ["a", "b"]


# -- what is refused --------------------------------------------------------------------


def test_a_call_from_a_thread_the_step_started_is_refused(run_id: str) -> None:
    """Threads run in no replayable order: a call from one (the step's context copied
    into it) is refused before it runs, with what to do instead."""
    store = ds.MemoryStore()
    ran_: list[str] = []

    def step(state: Any) -> dict[str, Any]:
        ctx = contextvars.copy_context()
        with ThreadPoolExecutor(2) as pool:
            got = pool.submit(ctx.run, ds.call, "llm", ran_.append, "x").result()
        return {"got": got}

    with pytest.raises(ds.StepMismatchError, match="from a thread the step started") as err:
        ds.run(run_id, [ds.Step("s", step)], store)
    assert "call('name', fn)" in str(err.value)
    assert ran_ == []


def test_a_call_from_a_thread_without_the_steps_context_is_refused(run_id: str) -> None:
    """Without the step's context (a plain thread), a call says it is outside a step."""
    errors: list[BaseException] = []

    def step(state: Any) -> dict[str, Any]:
        def body() -> None:
            try:
                ds.call("llm", str, 1)
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=body)
        t.start()
        t.join()
        return {}

    ds.run(run_id, [ds.Step("s", step)], ds.MemoryStore())
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    assert "only available inside a step" in str(errors[0])


def test_a_blocking_wait_in_a_thread_the_step_waits_for_still_works(run_id: str) -> None:
    """A sleep or a wait has no result to mix up: made from a thread that the step waits
    for (asyncio.to_thread of a blocking function), it is numbered in the step's scope."""
    store = ds.AsyncMemoryStore()

    def blocking(state: Any) -> dict[str, Any]:
        return {"ok": ds.wait_for_signal("go")}

    async def step(state: Any) -> dict[str, Any]:
        return await asyncio.to_thread(blocking, state)

    async def go() -> dict[str, Any]:
        with pytest.raises(ds.RunWaiting):
            await ds.run_async(run_id, [ds.Step("s", step)], store)
        await ds.send_signal_async(store, run_id, "go", 1)
        return await ds.run_async(run_id, [ds.Step("s", step)], store)

    assert asyncio.run(go()) == {"ok": 1}


def test_a_task_created_after_the_task_factory_was_replaced_is_refused(run_id: str) -> None:
    """Replacing the loop's task factory hides new tasks' places from durable-steps: their
    calls are refused, not numbered into another task's records."""
    ran_: list[str] = []

    async def branch(x: str) -> str:
        return await ds.call_async("llm", lambda: ran_.append(x) or x)  # type: ignore[func-returns-value]

    async def step(state: Any) -> dict[str, Any]:
        asyncio.get_running_loop().set_task_factory(None)
        return {"out": await asyncio.gather(branch("a"), branch("b"))}

    with pytest.raises(ds.StepMismatchError, match="did not see created"):
        asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], ds.AsyncMemoryStore()))
    assert ran_ == []


def test_a_run_steps_own_event_loop_with_tasks_started_before_its_first_call(
    run_id: str,
) -> None:
    """A run() step that runs a coroutine starting tasks before any durable call: their
    calls are refused -- unless the coroutine calls track_tasks() first, after which each
    task replays its own calls."""
    store = ds.MemoryStore()
    made: list[str] = []

    async def work(x: str, pause: float) -> str:
        await asyncio.sleep(pause)
        made.append(x)
        if x == "b2" and made.count("b2") == 1:
            raise Killed  # b1 recorded, b2 ran and died before its record
        return x

    async def branch(x: str, pause: float) -> list[str]:
        return [await ds.call_async("llm", work, f"{x}{n}", pause) for n in (1, 2)]

    def step_with(track: bool, pauses: tuple[float, float]) -> ds.Step:
        async def main() -> list[list[str]]:
            if track:
                ds.track_tasks()
            return await asyncio.gather(branch("a", pauses[0]), branch("b", pauses[1]))

        return ds.Step("s", lambda state: {"out": asyncio.run(main())})

    with pytest.raises(ds.StepMismatchError, match="track_tasks"):
        ds.run(run_id, [step_with(False, (0.0, 0.0))], store)
    assert made == []
    with pytest.raises(Killed):
        ds.run(run_id, [step_with(True, (0.03, 0.0))], store)
    assert ds.run(run_id, [step_with(True, (0.0, 0.03))], store) == {
        "out": [["a1", "a2"], ["b1", "b2"]]
    }
    assert made.count("b1") == 1  # replayed to b, not run again (nor handed to a)


def test_a_child_run_inline_in_a_step_shifts_no_numbering_of_the_step(run_id: str) -> None:
    """The runner's own tasks (a nested run's heartbeat and saves) are in no scope: a step
    that runs another run inline and then gathers branches numbers them the same on
    replay, when the nested run, completed, makes no task at all."""
    store = ds.AsyncMemoryStore()
    made: list[str] = []

    async def branch(x: str) -> str:
        return await ds.call_async("llm", lambda: made.append(x) or x)  # type: ignore[func-returns-value]

    crashed: list[bool] = []

    async def step(state: Any) -> dict[str, Any]:
        inner = await ds.run_async(f"{run_id}-inner", [ds.Step("i", lambda s: {"n": 1})], store)
        a = asyncio.create_task(branch("a"))
        b = asyncio.create_task(branch("b"))
        out = [await a, await b]
        if not crashed:
            crashed.append(True)
            raise Killed  # both recorded; the step dies before it completes
        return {"out": out, "inner": inner}

    with pytest.raises(Killed):
        asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], store))
    state = asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], store))
    assert state["out"] == ["a", "b"] and made == ["a", "b"]


def test_result_json_in_the_child_is_the_branch_shape(tmp_path: Path, run_id: str) -> None:
    """The kill test's child, run to its end without a kill, prints every branch's own
    results (so the kill test compares against a run that is known to work)."""
    env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path / "store")}
    out = subprocess.run(
        [sys.executable, CHILD, "nested", run_id],
        env={**os.environ, **env, "SIDE_EFFECTS": str(tmp_path / "fx")},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(out.stdout) == expected("nested")


def test_runs_show_names_the_task_of_a_branch_s_calls(run_id: str) -> None:
    """The operator's view of the journal: a branch's calls say which task made them."""
    from durable_steps.cli.runs import calls_of

    store = ds.AsyncMemoryStore()
    crashed: list[bool] = []

    async def step(state: Any) -> dict[str, Any]:
        await ds.call_async("plan", str, 0)
        await asyncio.gather(ds.call_async("x", str, 1), asyncio.create_task(branch()))
        if not crashed:
            crashed.append(True)
            raise Killed
        return {}

    async def branch() -> str:
        return await ds.call_async("llm", str, 2)

    with pytest.raises(Killed):
        asyncio.run(ds.run_async(run_id, [ds.Step("s", step)], store))
    cp = asyncio.run(store.load(run_id))
    assert cp is not None
    listed = [(c.get("task"), c["index"], c["name"]) for c in calls_of(cp)]
    assert listed == [(None, 0, "plan"), (None, 1, "x"), ("0", 0, "llm")]
