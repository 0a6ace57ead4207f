"""Runner rules that do not depend on the backend (checked on MemoryStore)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step


class SpyStore(ds.MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def load(self, run_id: str) -> ds.Checkpoint | None:
        self.calls.append("load")
        return super().load(run_id)

    def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        self.calls.append(f"save:{checkpoint.step}")
        return super().save(checkpoint)


def test_duplicate_step_names_are_rejected_before_anything_runs() -> None:
    """Duplicate names raise ValueError naming them; no step runs and the store is not touched."""
    store, ran = SpyStore(), []
    with pytest.raises(ValueError, match=r"duplicate step names \['a'\]"):
        ds.run("r", [Step("a", ran.append), Step("b", ran.append), Step("a", ran.append)], store)
    assert (ran, store.calls) == ([], [])


def test_invalid_run_id_is_rejected_before_the_store_is_called() -> None:
    """run() checks the run id first: no load, no save."""
    store = SpyStore()
    with pytest.raises(ds.InvalidRunIdError):
        ds.run("a/b", [Step("a", lambda s: None)], store)
    assert store.calls == []


def test_one_save_per_step_plus_one_to_claim_the_run() -> None:
    """A fresh 3-step run loads once and saves four times: the claim, then once per step."""
    store = SpyStore()
    ds.run("r", [Step(n, lambda s: None) for n in "abc"], store)
    assert store.calls == ["load", "save:-1", "save:0", "save:1", "save:2"]
    store.calls.clear()
    ds.run("r", [Step(n, lambda s: None) for n in "abc"], store)
    assert store.calls == ["load"]


def test_a_step_must_return_a_mapping_or_none() -> None:
    """A step returning a list fails with TypeError naming the step; earlier steps stay saved."""
    store = ds.MemoryStore()
    with pytest.raises(TypeError, match="step 1 'b' returned list"):
        ds.run("r", [Step("a", lambda s: {"x": 1}), Step("b", lambda s: [1])], store)
    cp = store.load("r")
    assert cp is not None
    assert (cp.step, cp.state) == (0, {"x": 1})


def test_non_json_update_fails_the_save_and_resumes_at_that_step() -> None:
    """A step returning non-JSON data: InvalidStateError names the key; re-run resumes there."""
    store, calls = ds.MemoryStore(), []

    def b(state: Any) -> dict[str, Any]:
        calls.append("b")
        return {"when": object()} if len(calls) == 1 else {"when": "now"}

    with pytest.raises(ds.InvalidStateError, match=r"\['when'\]"):
        ds.run("r", [Step("a", lambda s: {"x": 1}), Step("b", b)], store)
    assert ds.run("r", [Step("a", lambda s: {"x": 1}), Step("b", b)], store) == {
        "x": 1,
        "when": "now",
    }


def test_result_is_not_aliased_with_stored_state() -> None:
    """Mutating the returned final state does not change the checkpoint."""
    store = ds.MemoryStore()
    out = ds.run("r", [Step("a", lambda s: {"l": [1]})], store)
    out["l"].append(2)
    assert ds.run("r", [Step("a", lambda s: {"l": [1]})], store) == {"l": [1]}


def test_current_step_outside_a_step_is_an_error() -> None:
    """current_step() outside run() raises RuntimeError saying where it works."""
    with pytest.raises(RuntimeError, match="only available inside a step"):
        ds.current_step()


def test_current_step_describes_the_running_step() -> None:
    """Inside a step: run id, index, name, attempt 1, and a 32-hex idempotency key."""
    seen: list[ds.StepContext] = []
    ds.run(
        "r",
        [Step("a", lambda s: None), Step("b", lambda s: seen.append(ds.current_step()))],
        ds.MemoryStore(),
    )
    (ctx,) = seen
    assert (ctx.run_id, ctx.index, ctx.name, ctx.attempt) == ("r", 1, "b", 1)
    assert len(ctx.idempotency_key) == 32
    other = ds.StepContext("r2", 1, "b", 1)
    assert other.idempotency_key != ctx.idempotency_key


def test_errors_survive_pickling_with_their_attributes() -> None:
    """Errors cross process boundaries (multiprocessing, CLIs) with message and attributes."""
    err = ds.StateTooLargeError("too big", run_id="r", size=3, limit=2)
    back = pickle.loads(pickle.dumps(err))  # noqa: S301 - our own bytes
    assert (type(back), str(back), back.run_id, back.size, back.limit) == (
        ds.StateTooLargeError,
        "too big",
        "r",
        3,
        2,
    )
    assert isinstance(ds.InvalidRunIdError("x", run_id="x"), ValueError)


def test_sync_and_async_apis_are_not_mixed_silently() -> None:
    """run() refuses async stores and async steps; run_async() refuses sync stores."""
    import asyncio

    async def step(state: Any) -> None:
        return None

    with pytest.raises(TypeError, match="async store: use run_async"):
        ds.run("r", [Step("a", lambda s: None)], ds.AsyncMemoryStore())  # type: ignore[arg-type]
    store = ds.MemoryStore()
    with pytest.raises(TypeError, match="step 0 'a' is async; run it with run_async"):
        ds.run("r", [Step("a", step)], store)
    cp = store.load("r")
    assert cp is not None
    assert cp.step == -1
    with pytest.raises(TypeError, match="sync store: use run"):
        asyncio.run(ds.run_async("r", [Step("a", step)], ds.MemoryStore()))  # type: ignore[arg-type]


def test_bad_step_lists_are_rejected_before_anything_runs() -> None:
    """Non-Step items and empty or non-str names raise TypeError; nothing is saved."""
    store = SpyStore()
    for bad in ([lambda s: None], [Step("", lambda s: None)], [Step(3, lambda s: None)]):  # type: ignore[arg-type, list-item]
        with pytest.raises(TypeError, match="Step\\(name, fn\\)"):
            ds.run("r", bad, store)
    assert store.calls == []


def test_an_empty_step_list_completes_at_once() -> None:
    """Zero steps: the run is created completed and returns an empty state."""
    store = ds.MemoryStore()
    assert ds.run("r", [], store) == {}
    cp = store.load("r")
    assert cp is not None
    assert (cp.step, cp.done) == (-1, True)
