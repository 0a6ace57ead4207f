"""``DurableSaver`` passes LangGraph's own judge, ``langgraph-checkpoint-conformance``:
every base capability (put, put_writes, get_tuple, list, delete_thread) and every
extended one the suite knows (copy_thread, prune, delete_for_runs), on every backend,
blocking stores and async ones, and with the codec on (the ``+aes`` backends)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES, Capability

from durable_steps.integrations.langgraph import DurableSaver

from ..conftest import Backend


def test_the_conformance_suite_passes(backend: Backend, loop: asyncio.AbstractEventLoop) -> None:
    """The report is all-pass: each base capability detected and passed, each detected
    extended one passed, none failed."""
    store = backend.store.aio if backend.name.endswith("-async") else backend.store

    @checkpointer_test(name=f"DurableSaver[{backend.name}]")
    async def saver() -> AsyncIterator[DurableSaver]:
        yield DurableSaver(store)  # a fresh saver (nothing remembered) per capability

    report = asyncio.run_coroutine_threadsafe(validate(saver), loop).result(300)
    failures = {name: r.failures for name, r in report.results.items() if r.passed is False}
    assert not failures, failures
    for cap in BASE_CAPABILITIES:
        result = report.results[cap.value]
        assert result.detected and result.passed, (cap.value, result)
        assert result.tests_passed > 0
    assert report.passed_all_base(), report
    for cap in (Capability.COPY_THREAD, Capability.PRUNE, Capability.DELETE_FOR_RUNS):
        result = report.results[cap.value]
        assert result.detected and result.passed and result.tests_passed > 0, (cap, result)
