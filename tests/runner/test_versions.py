"""Versions on every backend, sync and async: a run is pinned to the version of the code
it began on, listed and filtered by it (the backend applies the filter), run only by
code of that version (recover skips the others), moved explicitly by upgrade_run; and
patched() answers by what the run's journal holds, the same on every replay."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Api


def versions(ran: Counter[str]) -> tuple[ds.Workflow, ds.Workflow]:
    """Version 1 and version 2 of one workflow: v2 renamed its second step."""

    def step(name: str) -> ds.Step:
        def body(state: Any) -> dict[str, Any]:
            ran[name] += 1
            return {name: True}

        return ds.Step(name.split("/")[1], body)

    v1 = ds.Workflow("deploy", [step("v1/a"), step("v1/b")], version="1")
    v2 = ds.Workflow("deploy", [step("v2/a"), step("v2/c")], version="2")
    return v1, v2


def upgrade(api: Api, run_id: str, w: ds.Workflow) -> bool:
    return api._call(ds.upgrade_run, ds.upgrade_run_async, run_id, w)  # type: ignore[no-any-return]


def test_runs_are_pinned_listed_by_version_and_run_only_by_their_code(
    api: Api, run_id: str
) -> None:
    """Runs started by v1 and v2 are listed under their versions (list_runs(version=),
    RunInfo.version, run_info); recover with v2 code runs only the v2 run and the
    unpinned one (pinning it to 2), and leaves the v1 run alone; v2 code asked to run
    the v1 run refuses it, writing nothing; v1 code then runs it."""
    ran: Counter[str] = Counter()
    v1, v2 = versions(ran)
    store = api.store
    assert api.create(v1, f"{run_id}-old")
    assert api.create(v2, f"{run_id}-new")
    assert api.create(ds.Workflow("deploy", v1.steps), f"{run_id}-any")  # no version: unpinned
    mine = {i.run_id: i.version for i in store.list_runs(workflow="deploy")}
    assert {k: v for k, v in mine.items() if k.startswith(run_id)} == {
        f"{run_id}-old": "1",
        f"{run_id}-new": "2",
        f"{run_id}-any": None,
    }
    assert [i.run_id for i in store.list_runs(version="1") if i.run_id.startswith(run_id)] == [
        f"{run_id}-old"
    ]
    assert store.run_info(f"{run_id}-new").version == "2"

    done = {r.run_id: r.outcome for r in api.recover([v2]) if r.run_id.startswith(run_id)}
    assert done == {f"{run_id}-new": "completed", f"{run_id}-any": "completed"}
    assert store.load_head(f"{run_id}-any").version == "2"
    assert ran == Counter({"v2/a": 2, "v2/c": 2})

    before = store.load_head(f"{run_id}-old")
    with pytest.raises(ds.StepMismatchError, match=r"runs on version '1'.*runs upgrade"):
        api.start(v2, f"{run_id}-old")
    assert store.load_head(f"{run_id}-old").etag == before.etag
    assert api.start(v1, f"{run_id}-old") == {"v1/a": True, "v1/b": True}
    assert ran["v1/a"] == ran["v1/b"] == 1


def test_upgrade_checks_completed_steps_and_moves_the_run(api: Api, run_id: str) -> None:
    """A v1 run that failed in step b: upgrading it to a version whose list renamed a
    completed step is StepMismatchError naming both names, nothing changed; to v2
    (which changed only step b) it moves, keeps its status, and after a resume v2
    code finishes it. A completed run cannot be upgraded."""
    ran: Counter[str] = Counter()
    v1, v2 = versions(ran)

    def fails(state: Any) -> None:
        raise RuntimeError("old b is broken")

    broken = ds.Workflow("deploy", [v1.steps[0], ds.Step("b", fails)], version="1")
    with pytest.raises(RuntimeError):
        api.start(broken, run_id)
    renamed = ds.Workflow("deploy", [ds.Step("A", lambda s: None)], version="3")
    before = api.store.load_head(run_id)
    with pytest.raises(ds.StepMismatchError, match=r"completed step 0 is 'a'; .* has 'A'"):
        upgrade(api, run_id, renamed)
    assert api.store.load_head(run_id).etag == before.etag

    assert upgrade(api, run_id, v2) is True
    assert upgrade(api, run_id, v2) is False  # there already
    head = api.store.load_head(run_id)
    assert (head.version, head.status, head.steps) == ("2", "failed", ("a",))
    api._call(ds.resume_run, ds.resume_run_async, run_id)
    [done] = api.recover([v2])
    assert done.outcome == "completed", done.error
    assert ran == Counter({"v1/a": 1, "v2/c": 1})
    with pytest.raises(ds.ConflictError, match="completed run is final"):
        upgrade(api, run_id, v1)


def test_upgrade_leaves_a_run_that_a_worker_holds(api: Api, run_id: str) -> None:
    """A run whose lease another worker holds is not moved under it (RunLeasedError),
    nothing changed."""
    v1, v2 = versions(Counter())
    assert api.create(v1, run_id)
    head = api.store.load_head(run_id)
    held = api.store.save_head(replace(head, owner="worker-7", lease_expires=time.time() + 600))
    with pytest.raises(ds.RunLeasedError, match="being run by worker-7"):
        upgrade(api, run_id, v2)
    assert api.store.load_head(run_id).etag == held.etag


def test_patched_answers_by_the_journal_and_replays_agree(api: Api, run_id: str) -> None:
    """Old code recorded calls one, two and waits; new code puts a patched call between
    them: for that run patched() is False (its call two is at that place) and its
    records replay. A fresh run on the new code gets True, records it, and after its
    wait the replay says True again without running the new call twice."""
    made: Counter[str] = Counter()

    async def invoke(name: str) -> str:
        made[name] += 1
        return name

    def body(new: bool) -> Any:
        async def step(state: Any) -> dict[str, Any]:
            out = [await ds.call_async("one", invoke, "one")]
            if new and ds.patched("extra-call"):
                out.append(await ds.call_async("extra", invoke, "extra"))
            out.append(await ds.call_async("two", invoke, "two"))
            ds.wait_for_signal("go")
            return {"out": out}

        return step

    old = ds.Workflow("patching", [api.step("s", body(False))])
    new = ds.Workflow("patching", [api.step("s", body(True))])
    for w, rid in ((old, f"{run_id}-old"), (new, f"{run_id}-new")):
        with pytest.raises(ds.RunWaiting):
            api.start(w, rid)
    assert made == Counter(one=2, two=2, extra=1)
    kinds = [(r.get("kind", "call"), r["name"]) for r in api.store.load(f"{run_id}-new").calls]
    assert kinds == [
        ("call", "one"),
        ("patch", "extra-call"),
        ("call", "extra"),
        ("call", "two"),
        ("wait", "go"),
    ]
    for rid in (f"{run_id}-old", f"{run_id}-new"):
        api.signal(rid, "go")
    assert api.start(new, f"{run_id}-old") == {"out": ["one", "two"]}
    assert api.start(new, f"{run_id}-new") == {"out": ["one", "extra", "two"]}
    assert made == Counter(one=2, two=2, extra=1)  # replays ran nothing again
