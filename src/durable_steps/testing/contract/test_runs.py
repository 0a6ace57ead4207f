"""The store contract through ``run``: resumption, the steps a run is given against
those it completed, read-only state, attempts, and the state size limit -- on the
blocking store and its async twin of each backend of ``--durable-backends``."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step
from durable_steps.seam.rules import MAX_STATE_BYTES

from . import fixtures
from .fixtures import Backend, first

backend, loop, run_id = fixtures.backend, fixtures.loop, fixtures.run_id  # its fixtures
pytest_generate_tests = fixtures.parametrize_backend  # (not in __all__: a project has its own)

__all__ = [  # what a project that runs this suite imports (its own fixtures apply)
    "test_a_20_mb_state_saves_loads_and_resumes",
    "test_a_completed_run_is_final_even_when_steps_are_appended",
    "test_a_state_over_the_limit_is_refused_and_the_previous_one_stays",
    "test_attempt_counts_restarts_and_key_is_stable",
    "test_changed_completed_steps_raise_mismatch",
    "test_failed_step_propagates_and_resumes_there",
    "test_run_completes_and_rerun_runs_nothing",
    "test_steps_cannot_corrupt_state_through_what_they_get",
]

# aiohttp (under the async Cosmos SDK) warns when a request body over 1 MiB is raw bytes,
# as a 20 MB state's parts are (items of up to 2 MB): a ResourceWarning, hidden unless
# warnings are errors, as they are here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Sending a large body directly with raw bytes:ResourceWarning"
)


# -- resume semantics through run() -----------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def step(self, name: str, fail_once: bool = False) -> Step:
        def fn(state: Any) -> dict[str, Any]:
            self.calls.append(name)
            if fail_once and self.calls.count(name) == 1:
                raise KeyError(f"{name} failed")
            return {name: len(state)}

        return Step(name, fn)


def test_run_completes_and_rerun_runs_nothing(backend: Backend, run_id: str) -> None:
    """A fresh run runs every step once; running the completed run again runs nothing."""
    c = Counter()
    steps = [c.step("a"), c.step("b"), c.step("c")]
    assert ds.run(run_id, steps, backend.store) == {"a": 0, "b": 1, "c": 2}
    assert ds.run(run_id, steps, backend.store) == {"a": 0, "b": 1, "c": 2}
    assert c.calls == ["a", "b", "c"]
    cp = backend.store.load(run_id)
    assert cp is not None
    assert (cp.step, cp.steps, cp.done) == (2, ("a", "b", "c"), True)


def test_failed_step_propagates_and_resumes_there(backend: Backend, run_id: str) -> None:
    """A step's exception keeps its type and names run and step; a re-run resumes at that step."""
    c = Counter()
    steps = [c.step("a"), c.step("b", fail_once=True), c.step("c")]
    with pytest.raises(KeyError) as err:
        ds.run(run_id, steps, backend.store)
    assert any(run_id in n and "step 1 'b'" in n for n in err.value.__notes__)
    cp = backend.store.load(run_id)
    assert cp is not None and cp.step == 0
    assert ds.run(run_id, steps, backend.store) == {"a": 0, "b": 1, "c": 2}
    assert c.calls == ["a", "b", "b", "c"]


@pytest.mark.parametrize(
    "changed",
    [["a", "x", "c"], ["b", "a", "c"], ["a"]],
    ids=["renamed", "reordered", "removed"],
)
def test_changed_completed_steps_raise_mismatch(
    backend: Backend, run_id: str, changed: list[str]
) -> None:
    """A changed completed part of the step list raises StepMismatchError; nothing runs."""
    c = Counter()
    with pytest.raises(KeyError):
        ds.run(run_id, [c.step("a"), c.step("b"), c.step("c", fail_once=True)], backend.store)
    before = backend.store.load(run_id)
    c.calls.clear()
    with pytest.raises(ds.StepMismatchError, match="nothing was run"):
        ds.run(run_id, [c.step(n) for n in changed], backend.store)
    assert c.calls == []
    assert backend.store.load(run_id) == before


def test_a_completed_run_is_final_even_when_steps_are_appended(
    backend: Backend, run_id: str
) -> None:
    """A completed run returns its final state and runs nothing, also when its step list
    has grown since: it stays completed (what wait_for_result saw stays true)."""
    c = Counter()
    final = ds.run(run_id, [c.step("a"), c.step("b")], backend.store)
    assert ds.run(run_id, [c.step("a"), c.step("b"), c.step("c")], backend.store) == final
    assert "c" not in final and c.calls == ["a", "b"]
    cp = backend.store.load(run_id)
    assert cp is not None and (cp.status, cp.steps) == ("completed", ("a", "b"))


def test_steps_cannot_corrupt_state_through_what_they_get(backend: Backend, run_id: str) -> None:
    """A step gets a read-only state: mutating it at any depth raises TypeError and
    changes nothing; copies of it (copy.deepcopy, list(...)) are plain and mutable."""

    def vandal(state: Any) -> None:
        for mutate in (
            lambda: state.__setitem__("docs", []),
            lambda: state["docs"].append("EVIL"),
            lambda: state["docs"].__setitem__(0, "EVIL"),
            lambda: state["meta"].update(k=2),
            lambda: state["meta"]["deep"].append(1),
        ):
            with pytest.raises(TypeError, match="read-only"):
                mutate()  # type: ignore[no-untyped-call]
        mine = copy.deepcopy(state)
        mine["docs"].append("mine")
        mine["meta"]["deep"].append(1)
        assert json.loads(json.dumps(state)) == {"docs": ["x"], "meta": {"deep": []}}

    final = ds.run(
        run_id,
        [
            Step("a", lambda s: {"docs": ["x"], "meta": {"deep": []}}),
            Step("b", vandal),
            Step("c", lambda s: {"seen": list(s["docs"])}),
        ],
        backend.store,
    )
    assert final == {"docs": ["x"], "meta": {"deep": []}, "seen": ["x"]}
    final["docs"].append("caller's own copy")  # the returned state is plain and mutable
    assert backend.store.load(run_id).state["docs"] == ["x"]


def test_attempt_counts_restarts_and_key_is_stable(backend: Backend, run_id: str) -> None:
    """current_step().attempt grows on each retry of a step; its idempotency_key does not change."""
    seen: list[tuple[int, str]] = []

    def flaky(state: Any) -> None:
        ctx = ds.current_step()
        seen.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt < 3:
            raise RuntimeError("transient")

    steps = [Step("a", lambda s: None), Step("flaky", flaky)]
    for _ in range(2):
        with pytest.raises(RuntimeError):
            ds.run(run_id, steps, backend.store)
    ds.run(run_id, steps, backend.store)
    assert [a for a, _ in seen] == [1, 2, 3]
    assert len({k for _, k in seen}) == 1


# -- state size: the same limit in every store --------------------------------------------

TWENTY_MB = 20 * 1024 * 1024


def test_a_20_mb_state_saves_loads_and_resumes(backend: Backend, run_id: str) -> None:
    """A 20 MB state -- ten times a Cosmos DB item -- is saved, loads back exactly, and a
    run holding it resumes at the step that failed, on every store."""
    docs = [{"id": i, "text": f"doc {i} ✓ " * 20} for i in range(2000)]
    blob = "x" * (TWENTY_MB - len(json.dumps(docs)))
    tries: list[str] = []

    def b(state: Any) -> dict[str, Any]:
        tries.append("b")
        if len(tries) == 1:
            raise RuntimeError("the model timed out")
        return {"seen": len(state["blob"]) + len(state["docs"])}

    steps = [Step("a", lambda s: {"blob": blob, "docs": docs}), Step("b", b)]
    with pytest.raises(RuntimeError, match="timed out"):
        ds.run(run_id, steps, backend.store)
    loaded = backend.store.load(run_id)
    assert loaded is not None and loaded.step == 0
    assert loaded.state == {"blob": blob, "docs": docs}
    final = ds.run(run_id, steps, backend.store)
    assert final == {"blob": blob, "docs": docs, "seen": len(blob) + 2000}
    assert tries == ["b", "b"]


def test_a_state_over_the_limit_is_refused_and_the_previous_one_stays(
    backend: Backend, run_id: str
) -> None:
    """A state over the limit (64 MiB of JSON by default, the same in every store) fails
    with StateTooLargeError naming its size, the limit and what to do; nothing is
    written, the previous checkpoint stays and saving on from it works."""
    v1 = backend.store.save(first(run_id, {"ok": 1}))
    huge = {"ok": 1, "blob": "x" * MAX_STATE_BYTES}
    with pytest.raises(ds.StateTooLargeError) as err:
        backend.store.save(replace(v1, step=1, steps=("a", "b"), state=huge))
    e = err.value
    assert (e.run_id, e.limit) == (run_id, MAX_STATE_BYTES) and e.size > e.limit
    message = str(e)
    assert f"{e.size:,}" in message and f"{e.limit:,}" in message
    assert "nothing was saved" in message and "DURABLE_MAX_STATE_BYTES" in message
    loaded = backend.store.load(run_id)
    assert loaded is not None and (loaded.state, loaded.etag) == ({"ok": 1}, v1.etag)
    v2 = backend.store.save(replace(loaded, step=1, steps=("a", "b"), state={"ok": 2}))
    again = backend.store.load(run_id)
    assert again is not None and (again.state, again.etag) == ({"ok": 2}, v2.etag)
