"""The replayer on every backend, sync and async: a run's current step re-run against code
with every call answered from its record, nothing executed and nothing written; and
upgrade_run refusing a move after which the running step would diverge."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.store import ThreadedStore
from durable_steps.testing import RunReplay, replay, replay_async

from ..conftest import Api


def flows(
    api: Api, ran: Counter[str], *, second: str = "lookup", early: bool = False
) -> list[ds.Workflow]:
    """Version A: step ``approve`` looks two things up, then waits for a person's "ok";
    version B: the in-flight step became ``enrich``, which calls something else."""

    def tool(name: str) -> Any:
        def fn(x: str) -> str:
            ran[f"{name}:{x}"] += 1
            return f"{name}({x})"

        return fn

    async def approve(state: Any) -> dict[str, Any]:
        first = await ds.call_async("lookup", tool("lookup"), "a")
        if early:
            return {"approved": [first]}
        more = await ds.call_async(second, tool(second), "b")
        ok = ds.wait_for_signal("ok")
        return {"approved": [first, more, ok]}

    async def enrich(state: Any) -> dict[str, Any]:
        return {"enriched": await ds.call_async("enrich", tool("enrich"), "a")}

    prepare = ds.Step("prepare", lambda state: {"prepared": True})
    a = ds.Workflow("review", [prepare, api.step("approve", approve)], version="A")
    b = ds.Workflow("review", [prepare, api.step("enrich", enrich)], version="B")
    return [a, b]


def checked(
    api: Api, workflows: list[ds.Workflow], run_ids: list[str] | None = None
) -> list[RunReplay]:
    return api._call(  # type: ignore[no-any-return]
        lambda s, *a: replay(workflows, s, run_ids),
        lambda s, *a: replay_async(workflows, s, run_ids),
    )


def upgrade(api: Api, run_id: str, w: ds.Workflow, **kw: Any) -> bool:
    return api._call(ds.upgrade_run, ds.upgrade_run_async, run_id, w, **kw)  # type: ignore[no-any-return]


def waiting(api: Api, run_id: str, w: ds.Workflow) -> ds.Checkpoint:
    with pytest.raises(ds.RunWaiting):
        api.start(w, run_id)
    cp = api.store.load(run_id)
    assert cp.status == "waiting" and len(cp.calls) == 3
    return cp  # type: ignore[no-any-return]


def test_an_in_flight_step_renamed_in_the_new_version_is_not_moved(api: Api, run_id: str) -> None:
    """The run waits in step ``approve`` of version A with two calls recorded; version B
    replaced that step by ``enrich``. upgrade_run to B refuses, naming where the step
    diverges, and changes nothing; with drop_calls it moves, the recorded calls
    discarded, and the run then completes on B, its new call made once."""
    ran: Counter[str] = Counter()
    a, b = flows(api, ran)
    before = waiting(api, run_id, a)
    with pytest.raises(ds.NondeterminismError) as refused:
        upgrade(api, run_id, b)
    message = str(refused.value)
    assert "cannot move to version 'B'" in message and "step 1 'enrich'" in message
    assert "at its recorded lookup (0)" in message and "--drop-calls" in message
    after = api.store.load(run_id)
    assert (after.version, after.etag, len(after.calls)) == ("A", before.etag, 3)
    assert ran == Counter({"lookup:a": 1, "lookup:b": 1})  # nothing ran during the check

    assert upgrade(api, run_id, b, drop_calls=True)
    moved = api.store.load(run_id)
    assert (moved.version, moved.calls, moved.status) == ("B", (), "waiting")
    api.signal(run_id, "ok", True)
    assert api.start(b, run_id)["enriched"] == "enrich(a)"
    assert ran == Counter({"lookup:a": 1, "lookup:b": 1, "enrich:a": 1})


def test_a_move_that_replays_is_made(api: Api, run_id: str) -> None:
    """Version C keeps step ``approve``'s calls (its change comes after them): the move
    is checked, made, and the run completes on C with no recorded call run again."""
    ran: Counter[str] = Counter()
    a, _ = flows(api, ran)
    waiting(api, run_id, a)
    c = ds.Workflow("review", a.steps, version="C")
    assert upgrade(api, run_id, c)
    assert api.store.load(run_id).version == "C"
    api.signal(run_id, "ok", "yes")
    assert api.start(c, run_id)["approved"] == ["lookup(a)", "lookup(b)", "yes"]
    assert ran == Counter({"lookup:a": 1, "lookup:b": 1})


def test_replay_reports_each_run_in_flight_and_writes_nothing(api: Api, run_id: str) -> None:
    """replay() with the code of version A: the waiting run replays (it suspends again at
    its wait, having asked for every record); the same version whose second call is
    renamed diverges there, and the one that returns after its first call diverges as a
    step that completes without asking for recorded operations; a plain run() and a run of a
    version not given cannot be checked. No tool ran, no run changed."""
    ran: Counter[str] = Counter()
    a, b = flows(api, ran)
    waiting(api, run_id, a)
    plain = f"{run_id}-plain"
    with pytest.raises(ValueError, match="boom"):
        api.run(plain, [ds.Step("x", lambda s: int("boom"))])
    newer = f"{run_id}-b"
    api.create(b, newer)  # nothing recorded yet
    etags = {r: api.store.load(r).etag for r in (run_id, plain, newer)}
    ran.clear()

    mine = [run_id, plain, newer, f"{run_id}-none"]
    by_id = {r.run_id: r for r in checked(api, [a], mine)}
    ok = by_id[run_id]
    assert (ok.outcome, ok.step, ok.step_name, ok.recorded, ok.asked) == (
        "replays", 1, "approve", 3, 3,
    )  # fmt: skip
    assert "waited for ok" in ok.detail
    assert by_id[plain].outcome == "cannot be checked" and "plain run()" in by_id[plain].detail
    assert by_id[newer].outcome == "cannot be checked" and "no version 'B'" in by_id[newer].detail
    assert by_id[f"{run_id}-none"].detail == "no such run"

    renamed = flows(api, ran, second="search")[0]
    [diverged] = checked(api, [renamed], [run_id])
    assert (diverged.outcome, diverged.where) == ("diverges", "lookup (1)")
    assert (diverged.was, diverged.now) == ("call 'lookup'", "call 'search'")

    early = flows(api, ran, early=True)[0]
    [short] = checked(api, [early], [run_id])
    assert short.outcome == "diverges" and short.diverges
    assert "completed without asking for 2 recorded operation(s) lookup (1), wait ok (2)" in (
        short.detail
    )

    assert ran == Counter()  # nothing executed
    assert {r: api.store.load(r).etag for r in etags} == etags  # nothing written


def test_replay_stops_at_the_first_call_with_no_record(api: Api, run_id: str) -> None:
    """A failed run whose step recorded one call and failed in its second: the replay
    answers the first from its record and stops at the second without running it --
    replays; listed by default (failed is in flight), a completed run is not."""
    ran: Counter[str] = Counter()

    def flaky() -> str:
        ran["flaky"] += 1
        raise RuntimeError("service down")

    async def work(state: Any) -> dict[str, Any]:
        got = await ds.call_async("first", lambda: ran.update(["first"]) or "one")
        return {"got": [got, await ds.call_async("second", flaky)]}

    w = ds.Workflow(f"flaky-{run_id}", [api.step("work", work)])
    with pytest.raises(RuntimeError):
        api.start(w, run_id)
    done = ds.Workflow(f"done-{run_id}", [ds.Step("s", lambda s: None)])
    api.start(done, f"{run_id}-done")
    ran.clear()
    mine = [r for r in checked(api, [w, done]) if r.run_id.startswith(run_id)]
    assert [r.run_id for r in mine] == [run_id]
    [r] = mine
    assert (r.outcome, r.where, r.asked, r.recorded) == (
        "replays", "second (1)", 1, 1,
    )  # fmt: skip
    assert ran == Counter()
    with pytest.raises(ValueError, match="not a status"):
        replay([w], ds.MemoryStore(), statuses=["stuck"])


def test_gathered_branches_replay_each_their_own_records(api: Api, run_id: str) -> None:
    """An async step gathers two branches of two calls; the second branch's second call
    failed. The replay answers each branch from its own records and stops there;
    the same code with the first branch's calls swapped diverges in task 0."""
    ran: Counter[str] = Counter()

    async def fn(name: str) -> str:
        ran[name] += 1
        if name == "b2":
            raise RuntimeError("b2 failed")
        return name

    def fanout(order: tuple[str, str]) -> Any:
        async def branch(x: str, y: str) -> list[str]:
            return [await ds.call_async(x, fn, x), await ds.call_async(y, fn, y)]

        async def body(state: Any) -> dict[str, Any]:
            ds.track_tasks()  # (a run step's asyncio.run: its tasks named from here)
            got = await asyncio.gather(branch(*order), branch("b1", "b2"))
            return {"got": got}

        return ds.Workflow(f"fan-{run_id}", [api.step("fan", body)])

    w = fanout(("a1", "a2"))
    with pytest.raises(RuntimeError):
        api.start(w, run_id)
    assert len(api.store.load(run_id).calls) == 3
    ran.clear()
    [r] = checked(api, [w], [run_id])
    assert (r.outcome, r.asked) == ("replays", 3), r
    assert r.where == "b2 (1/1)"
    [d] = checked(api, [fanout(("a2", "a1"))], [run_id])
    assert (d.outcome, d.where, d.was, d.now) == (
        "diverges", "a1 (0/0)", "call 'a1'", "call 'a2'",
    )  # fmt: skip
    assert ran == Counter()


def test_a_plain_step_on_an_async_store_and_an_async_step_on_a_blocking_one(run_id: str) -> None:
    """replay_async runs a plain step in a thread, its reads sent to the loop; replay runs
    an async step on an event loop of its own: both replay the same record."""
    ran: Counter[str] = Counter()

    def tool(x: str) -> str:
        ran[x] += 1
        return x

    def plain(state: Any) -> dict[str, Any]:
        return {"got": [ds.call("a", tool, "a"), ds.wait_for_signal("go")]}

    async def coro(state: Any) -> dict[str, Any]:
        return {"got": [await ds.call_async("a", tool, "a"), ds.wait_for_signal("go")]}

    sync_w = ds.Workflow("plain", [ds.Step("s", plain)])
    async_w = ds.Workflow("coro", [ds.Step("s", coro)])

    async def on_async_store() -> list[RunReplay]:
        async with ds.AsyncMemoryStore() as store:
            with pytest.raises(ds.RunWaiting):  # as a worker runs a plain workflow: run()
                sync_w.run(run_id, store.sync)
            return await replay_async([sync_w], store, [run_id])

    [r] = asyncio.run(on_async_store())
    assert (r.outcome, r.asked, r.detail) == (
        "replays", 2, "the step waited for go, having asked for all 2 recorded operation(s)",
    )  # fmt: skip
    with ds.MemoryStore() as store:
        with pytest.raises(ds.RunWaiting):
            asyncio.run(async_w.run_async(run_id, ThreadedStore(store)))
        [r] = replay([async_w], store, [run_id])
    assert (r.outcome, r.asked) == ("replays", 2), r
    assert ran == Counter({"a": 2})  # once per run, never during the replays
