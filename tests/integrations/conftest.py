"""What the integration tests share: an agent's side effects, interrupted where a test
says (``effects`` for Pydantic AI's agents, ``openai_effects`` for the OpenAI Agents
SDK's), and no event loop left behind by ``agent.run_sync`` or ``Runner.run_sync``."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import agents


class Crash(BaseException):
    """Stands for a crash inside a process: not an ``Exception``, so nothing on the way
    catches it (a test of a real SIGKILL is in test_pydantic_ai_processes.py)."""


@pytest.fixture
def effects(monkeypatch: pytest.MonkeyPatch) -> Callable[..., agents.Effects]:
    """``effects(at=k, when="before"|"after")``: this test's side effects, counted; a
    ``Crash`` at the k-th (from 0), before or after it runs."""

    def make(at: int | None = None, when: str = "before") -> agents.Effects:
        fresh = agents.Effects(at=at, when=when, trip=_crash)
        monkeypatch.setattr(agents, "EFFECTS", fresh)
        return fresh

    make()
    return make


@pytest.fixture
def openai_effects(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``effects`` for the OpenAI Agents SDK's agents (tests/integrations/openai_runs.py)."""
    from . import openai_runs  # imports the SDK: only for the tests that use it

    def make(at: int | None = None, when: str = "before") -> Any:
        fresh = openai_runs.Effects(at=at, when=when, trip=_crash)
        monkeypatch.setattr(openai_runs, "EFFECTS", fresh)
        return fresh

    make()
    return make


def _crash() -> None:
    raise Crash


@pytest.fixture(autouse=True)
def no_leftover_event_loop() -> Iterator[None]:
    """``agent.run_sync`` leaves the event loop it made set on the thread, open; closed
    here, so that it is not collected (and warned about) during another test."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        if not loop.is_closed():
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        asyncio.set_event_loop(None)
