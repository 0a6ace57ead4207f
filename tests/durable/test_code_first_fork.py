"""A code-first run forked at one of its calls: it is one step whose history is its
calls, so a fork keeps its first k recorded calls -- replayed from their results, never
run again -- and runs the rest live; through ``RunHandle.fork``, ``fork_run`` and the
CLI, on every store (sync runs on the sync stores, async runs on the async ones)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

import durable_steps as ds
from durable_steps import durable
from durable_steps.testing.contract.fixtures import Backend

from ..helpers.clitools import Cli

ran: Counter[str] = Counter()
"""Side effects: each call's body counts itself here."""


class Note(BaseModel):
    n: int
    text: str


@durable.step
def write(n: int, topic: str) -> Note:
    ran[f"write-{n}"] += 1
    return Note(n=n, text=f"{topic} {n}")


@durable.workflow(name="cf-fork-notes")
def notes(topic: str, count: int) -> list[Note]:
    return [write(n, topic) for n in range(count)]


@durable.step
async def awrite(n: int, topic: str) -> Note:
    ran[f"write-{n}"] += 1
    await asyncio.sleep(0)
    return Note(n=n, text=f"{topic} {n}")


@durable.workflow(name="cf-fork-anotes")
async def anotes(topic: str, count: int) -> list[Note]:
    first = [await awrite(n, topic) for n in range(count - 2)]
    rest = await asyncio.gather(*(awrite(n, topic) for n in range(count - 2, count)))
    return [*first, *rest]


def _run(backend: Backend, loop: asyncio.AbstractEventLoop, run_id: str, topic: str) -> Any:
    """The run, sync on a sync store, async (with gathered calls) on an async one."""
    if not backend.name.endswith("-async"):
        return notes.run(run_id, backend.store, topic, 5)
    future = asyncio.run_coroutine_threadsafe(
        anotes.run_async(run_id, backend.store.aio, topic, 5), loop
    )
    return future.result(60)


def _fork(
    backend: Backend, loop: asyncio.AbstractEventLoop, run_id: str, new: str, **kw: Any
) -> Any:
    """The fork through the run's handle, blocking or awaited; the new run's result."""
    if not backend.name.endswith("-async"):
        return notes.handle(run_id, backend.store).fork(new, **kw)

    async def go() -> Any:
        return await anotes.handle_async(run_id, backend.store.aio).fork(new, **kw)

    return asyncio.run_coroutine_threadsafe(go(), loop).result(60)


def _result(backend: Backend, loop: asyncio.AbstractEventLoop, run_id: str) -> Any:
    """Run the fork here to its end; its typed result."""
    if not backend.name.endswith("-async"):
        return notes.run(run_id, backend.store, "ignored", 0)  # resumes: input is stored
    future = asyncio.run_coroutine_threadsafe(
        anotes.run_async(run_id, backend.store.aio, "ignored", 0), loop
    )
    return future.result(60)


def test_a_code_first_run_forks_after_its_kth_call(
    backend: Backend, loop: asyncio.AbstractEventLoop, run_id: str
) -> None:
    """Forked after its 3rd of 5 recorded calls, the new run replays those three (their
    bodies do not run again) and runs the last two live; its result is typed like the
    source's, the source is untouched, and the fork says where it came from."""
    ran.clear()
    first = _run(backend, loop, run_id, "tea")
    assert [n.text for n in first] == [f"tea {n}" for n in range(5)]
    assert ran == Counter({f"write-{n}": 1 for n in range(5)})
    source = backend.store.load(run_id)
    new = f"{run_id}-k3"
    handle = _fork(backend, loop, run_id, new, at_call=3)
    assert handle.run_id == new
    made = backend.store.load(new)
    assert made.step == -1 and len(made.calls) == 3 and made.status == "running"
    assert made.forked_from["step"] == -1 and made.forked_from["call"] == 3
    again = _result(backend, loop, new)
    assert [n.text for n in again] == [f"tea {n}" for n in range(5)]
    assert isinstance(again[0], Note)
    # no call before k ran again; each call after it ran once more
    assert ran == Counter({"write-0": 1, "write-1": 1, "write-2": 1, "write-3": 2, "write-4": 2})
    after = backend.store.load(run_id)
    assert (after.state, after.etag) == (source.state, source.etag)


def test_a_code_first_fork_with_an_update_and_its_bad_forms(
    backend: Backend, loop: asyncio.AbstractEventLoop, run_id: str
) -> None:
    """``update`` changes the input the forked run sees: its kept calls replay (asked
    with the same arguments), the rest run with the new input; a k past the recorded
    calls, a negative k, or neither at_step nor at_call is a clear error that makes
    nothing."""
    ran.clear()
    _run(backend, loop, run_id, "tea")
    stored = dict(backend.store.load(run_id).state)
    new = f"{run_id}-more"
    update = {"args": {**stored["args"], "count": 7}}
    _fork(backend, loop, run_id, new, at_call=2, update=update)
    texts = [n.text for n in _result(backend, loop, new)]
    assert texts == [f"tea {n}" for n in range(7)]
    assert ran == Counter({"write-0": 1, "write-1": 1, **{f"write-{n}": 2 for n in range(2, 5)},
                           "write-5": 1, "write-6": 1})  # fmt: skip
    bad = f"{run_id}-bad"
    with pytest.raises(ds.StepNotKeptError, match=r"give at_call from 0 to 5"):
        _fork(backend, loop, run_id, bad, at_call=6)
    with pytest.raises(ValueError, match="at_call must be"):
        _fork(backend, loop, run_id, bad, at_call=-1)
    with pytest.raises(ValueError, match=r"give at_step .* or at_call"):
        _fork(backend, loop, run_id, bad)
    assert backend.store.load(bad) is None


def test_runs_fork_at_a_call_on_the_command_line(cli: Cli, run_id: str) -> None:
    """``runs fork RUN NEW --at-call K`` forks a code-first run after its Kth call and
    says so; K past the recorded calls exits 1 naming the range, nothing made."""
    ran.clear()
    with ds.store_from_env(cli.env) as store:
        notes.run(run_id, store, "tea", 4)
    out = cli("runs", "fork", run_id, f"{run_id}-b", "--at-call", "2")
    assert out.returncode == 0, out.stderr
    assert "before its first step, keeping 2 recorded calls" in out.stdout
    bad = cli("runs", "fork", run_id, f"{run_id}-c", "--at-call", "9")
    assert bad.returncode == 1 and "give at_call from 0 to 4" in bad.stderr
    with ds.store_from_env(cli.env) as store:
        assert store.load(f"{run_id}-c") is None
        assert [n.text for n in notes.run(f"{run_id}-b", store, "x", 0)] == [
            f"tea {n}" for n in range(4)
        ]
    assert ran == Counter({"write-0": 1, "write-1": 1, "write-2": 2, "write-3": 2})
    shown = cli("runs", "show", f"{run_id}-b", COLUMNS="300")
    assert "before its first step, keeping 2 recorded calls" in shown.stdout
