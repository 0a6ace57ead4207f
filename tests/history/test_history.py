"""History, fork and rewind (issue 33 items 1 and 3) on every backend, sync and async:
each completed step is listed and loadable, a fork continues after a kept step, and
bad input is one clear error that changes nothing."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step

from ..conftest import Api

BIG = "x" * 20_000  # past Cosmos DB's inline size and the file log's 64 KiB: compactions, folds


def _steps(ran: Counter[str], n: int = 6, fail_once: int | None = None) -> list[Step]:
    """Steps that count their runs; each replaces ``last`` and adds to ``log``; step
    ``fail_once`` fails its first attempt (retried)."""

    def make(i: int) -> Any:
        def body(state: Any) -> dict[str, Any]:
            ran[f"s{i}"] += 1
            if i == fail_once and ran[f"s{i}"] == 1:
                raise RuntimeError("first attempt fails")
            return {"last": f"{i}{BIG}", "log": [*state.get("log", []), i], f"k{i}": i}

        return body

    retry = ds.Retry(attempts=2, backoff=0.0)
    return [Step(f"s{i}", make(i), retry=retry) for i in range(n)]


def test_history_lists_each_completed_step_and_loads_the_state_after_it(
    api: Api, run_id: str, pauses: list[float]
) -> None:
    """Each completed step is in the history (name, time, attempts, update size), and
    load_at gives the state after any of them -- replaced values included."""
    ran: Counter[str] = Counter()
    api.run(run_id, _steps(ran, fail_once=2))
    history = api.store.run_history(run_id)
    assert [(h.step, h.name) for h in history] == [(i, f"s{i}") for i in range(6)]
    assert [h.attempts for h in history] == [1, 1, 2, 1, 1, 1]
    times = [h.at for h in history]
    assert all(t is not None for t in times) and times == sorted(times)
    assert all(h.size is not None and h.size > len(BIG) for h in history)
    for k in (0, 2, 5):
        cp = api.store.load_at(run_id, k)
        assert cp.state["last"] == f"{k}{BIG}"
        assert cp.state["log"] == list(range(k + 1))
        assert cp.steps == tuple(f"s{i}" for i in range(k + 1))
    assert api._call(ds.load_at, ds.load_at_async, run_id, 3)["log"] == [0, 1, 2, 3]


def test_history_errors_name_what_is_kept(api: Api, run_id: str) -> None:
    """A step not kept, or a run that does not exist, is one clear error."""
    api.run(run_id, _steps(Counter(), n=3))
    with pytest.raises(ds.StepNotKeptError, match="kept steps are 0 to 2"):
        api.store.load_at(run_id, 7)
    with pytest.raises(ds.RunNotFoundError):
        api._call(ds.run_history, ds.run_history_async, f"{run_id}-none")
    with pytest.raises(ds.RunNotFoundError):
        api._call(ds.load_at, ds.load_at_async, f"{run_id}-none", 0)


def test_a_fork_continues_after_the_step_with_the_update(api: Api, run_id: str) -> None:
    """fork_run: the new run starts from the state after step k plus the update, runs
    only steps k+1 on, is recorded as forked; the source is untouched."""
    ran: Counter[str] = Counter()
    steps = _steps(ran)
    api.run(run_id, steps)
    before = api.store.load(run_id)
    fork = f"{run_id}-fork"
    made = api.fork(run_id, fork, at_step=2, update={"note": "changed"})
    assert made.step == 2 and made.forked_from["run"] == run_id
    state = api.run(fork, steps)
    assert state["note"] == "changed" and state["log"] == [0, 1, 2, 3, 4, 5]
    assert ran == Counter({"s0": 1, "s1": 1, "s2": 1, "s3": 2, "s4": 2, "s5": 2})
    after = api.store.load(run_id)
    assert (after.etag, after.state) == (before.etag, before.state)
    stored = api.store.load(fork)
    assert stored.forked_from["step"] == 2 and stored.trace == before.trace
    assert [h.step for h in api.store.run_history(fork)][-1] == 5


def test_a_fork_starts_its_steps_at_their_first_attempt(api: Api, run_id: str) -> None:
    """A step that failed once in the source runs for the first time in a fork made
    before it: ``current_step().attempt`` is 1 there, and the fork's history records
    one attempt of it (the source keeps its two)."""
    ran: Counter[str] = Counter()
    seen: list[tuple[str, int]] = []
    steps = _steps(ran, n=4, fail_once=2)

    def noting(step: Step) -> Step:
        def body(state: Any) -> Any:
            ctx = ds.current_step()
            seen.append((ctx.run_id, ctx.attempt))
            return step.fn(state)

        return Step(step.name, body, retry=step.retry)

    steps[2] = noting(steps[2])
    api.run(run_id, steps)
    assert [h.attempts for h in api.store.run_history(run_id)] == [1, 1, 2, 1]
    fork = f"{run_id}-fork"
    made = api.fork(run_id, fork, at_step=1)
    assert made.attempt == 0  # its next step not started yet, as a run start() made
    api.run(fork, steps)
    assert seen == [(run_id, 1), (run_id, 2), (fork, 1)]
    assert [(h.step, h.attempts) for h in api.store.run_history(fork)][-2:] == [(2, 1), (3, 1)]
    assert [h.attempts for h in api.store.run_history(run_id)] == [1, 1, 2, 1]


def test_a_fork_at_a_call_replays_the_calls_before_it(api: Api, run_id: str) -> None:
    """at_call=n keeps the first n recorded calls of step k+1: run again, those return
    their recorded results and the rest run anew."""
    made: Counter[str] = Counter()

    def llm(j: int) -> str:
        made[f"c{j}"] += 1
        return f"r{j}"

    async def agent(state: Any) -> dict[str, Any]:
        replies = [await ds.call_async("llm", llm, j) for j in range(3)]
        return {"replies": replies, "prompt": state.get("prompt")}

    steps = [Step("setup", lambda s: {"big": BIG}), api.step("agent", agent)]
    api.run(run_id, steps)
    assert made == Counter({"c0": 1, "c1": 1, "c2": 1})
    fork = f"{run_id}-rewound"
    api.fork(run_id, fork, at_step=0, at_call=1, update={"prompt": "new"})
    state = api.run(fork, steps)
    assert state["replies"] == ["r0", "r1", "r2"] and state["prompt"] == "new"
    assert made == Counter({"c0": 1, "c1": 2, "c2": 2})


def test_bad_forks_change_nothing(api: Api, run_id: str) -> None:
    """Unknown source, a step past the last kept, a new id that exists, a call beyond
    those recorded: each one clear error, the source and the target unchanged."""
    api.run(run_id, _steps(Counter(), n=3))
    taken = f"{run_id}-taken"
    api.run(taken, _steps(Counter(), n=1))
    source, existing = api.store.load(run_id), api.store.load(taken)
    new = f"{run_id}-new"
    with pytest.raises(ds.RunNotFoundError):
        api.fork(f"{run_id}-missing", new, at_step=0)
    with pytest.raises(ds.StepNotKeptError):
        api.fork(run_id, new, at_step=3)
    with pytest.raises(ds.StepNotKeptError, match="recorded calls"):
        api.fork(run_id, new, at_step=1, at_call=1)
    with pytest.raises(ds.ConflictError, match="exists already"):
        api.fork(run_id, taken, at_step=1)
    with pytest.raises(ValueError, match="at_step"):
        api.fork(run_id, new, at_step=-2)  # -1 is before the first step
    assert api.store.load(new) is None
    assert api.store.load(run_id).etag == source.etag
    assert api.store.load(taken).etag == existing.etag
