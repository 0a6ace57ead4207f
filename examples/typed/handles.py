"""What a type checker infers of code-first workflows and their handles (mypy strict
checks this module: ``files`` in pyproject.toml; tests/durable runs it too).

``flow.run`` returns the workflow function's return type, ``flow.start`` a
``RunHandle`` of it, and a decorated step keeps its function's signature.
"""

from __future__ import annotations

import dataclasses
from typing import Any, assert_type

import durable_steps as ds
from durable_steps import durable


@dataclasses.dataclass
class Answer:
    text: str
    sources: list[str]


@durable.step
def lookup(query: str, k: int = 3) -> list[str]:
    return [f"{query}-{i}" for i in range(k)]


@durable.step(retries=2, timeout=30.0)
async def summarise(docs: list[str]) -> str:
    return " / ".join(docs)


@durable.step
async def search(query: str, k: int) -> list[str]:
    return [f"{query}-{i}" for i in range(k)]


@durable.workflow
def answer(question: str) -> Answer:
    docs = lookup(question)
    return Answer(text=docs[0], sources=docs)


@durable.workflow(name="typed-async-answer")
async def async_answer(question: str, k: int) -> Answer:
    docs = await search(question, k)  # an async workflow awaits async steps
    return Answer(text=await summarise(docs), sources=docs)


def check(store: ds.Store) -> Answer:
    """Each line is a claim about the inferred type; mypy fails the build on a wrong one."""
    assert_type(lookup("q"), list[str])
    assert_type(answer.run("typed-1", store, "why?"), Answer)
    handle = answer.start("typed-2", store, "why not?")
    assert_type(handle, ds.RunHandle[Answer])
    ds.recover(store, [answer])  # what a worker does: runs the started run
    assert_type(answer.start("typed-2", store, "why not?").result(), Answer)
    assert_type(ds.handle_for(store, "typed-2"), ds.RunHandle[dict[str, Any]])
    assert_type(ds.handle_for(store, "typed-2", dict[str, Any]).result(), dict[str, Any])
    assert_type(handle.status(), str | None)
    forked = handle.fork("typed-2b", at_call=1)  # a code-first run forks at a call
    assert_type(forked, ds.RunHandle[Answer])
    ds.recover(store, [answer])  # runs the fork: its one recorded call replays
    assert_type(forked.result(timeout=10), Answer)
    return handle.result(timeout=10)


async def check_async(store: ds.AsyncStore) -> Answer:
    handle = await async_answer.start_async("typed-3", store, "why?", 2)
    assert_type(handle, ds.AsyncRunHandle[Answer])
    await ds.recover_async(store, [async_answer])
    assert_type(await async_answer.run_async("typed-4", store, "why?", 2), Answer)
    assert_type(await handle.status(), str | None)
    forked = await handle.fork("typed-3b", at_call=1)
    assert_type(forked, ds.AsyncRunHandle[Answer])
    return await handle.result(timeout=10)
