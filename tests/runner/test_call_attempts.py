"""``current_step().attempt`` inside a call's function counts the starts of that call:
its retries, and the step's attempts that reached it -- in process on the memory
stores through run() and run_async(), an attempt ended as a kill leaves it by an
interrupt in the call (tests/runner/test_processes.py kills real processes)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step

from ..conftest import Clock
from .test_poison import Dying
from .test_runner_edges import Async, Sync


@pytest.fixture(params=["run", "run_async"])
def api(request: pytest.FixtureRequest) -> Sync:
    return Sync() if request.param == "run" else Async()


class Tools:
    """Calls that log ``name:attempt``; ``dies`` interrupts its first ``times`` starts."""

    def __init__(self, dying: Dying, dies: str = "", times: int = 0) -> None:
        self.dying, self.dies, self.times = dying, dies, times
        self.seen: list[str] = []

    async def tool(self, name: str) -> str:
        self.seen.append(f"{name}:{ds.current_step().attempt}")
        if name == self.dies and sum(s.startswith(f"{name}:") for s in self.seen) <= self.times:
            await self.dying.fn({})  # dies as a killed process does
        if name == "raises":
            raise ValueError("a tool error the step hands on")
        return name

    def step(self, body: Any) -> Step:
        if self.dying.api.is_async:
            return Step("agent", body)
        return Step("agent", lambda state: asyncio.run(body(state)))


def test_a_call_counts_the_step_attempts_that_reached_it(api: Sync, run_id: str) -> None:
    """Interrupted twice in call b: b sees 1, 2, 3; a (recorded first) ran once with 1; c,
    first reached by the third attempt, sees 1; a call after one that raised (recording
    nothing, each time) counts the attempts since the last recorded one."""
    tools = Tools(Dying(api), dies="b", times=2)

    async def agent(state: Any) -> dict[str, Any]:
        made = [await ds.call_async("a", tools.tool, "a")]
        with contextlib.suppress(ValueError):  # a tool error the step hands on
            await ds.call_async("raises", tools.tool, "raises")
        made += [await ds.call_async(n, tools.tool, n) for n in ("b", "c")]
        return {"made": made}

    for _ in range(2):
        with pytest.raises(tools.dying.interrupt):
            api.run(run_id, [tools.step(agent)])
    assert api.run(run_id, [tools.step(agent)]) == {"made": ["a", "b", "c"]}
    assert tools.seen == [
        "a:1",
        "raises:1",
        "b:1",
        "raises:2",
        "b:2",
        "raises:3",
        "b:3",
        "c:1",
    ]


def test_a_call_after_a_sleep_starts_at_1(api: Sync, run_id: str, clock: Clock) -> None:
    """A sleep ends its step attempt: the call after it, first reached by the attempt
    that resumes the run, sees 1 (the step's attempt is 2); interrupted there once, 2."""
    tools = Tools(Dying(api), dies="after", times=1)

    async def agent(state: Any) -> dict[str, Any]:
        await ds.call_async("before", tools.tool, "before")
        ds.sleep(60)
        return {"made": await ds.call_async("after", tools.tool, "after")}

    with pytest.raises(ds.RunWaiting):
        api.run(run_id, [tools.step(agent)])
    clock.advance(61)
    with pytest.raises(tools.dying.interrupt):
        api.run(run_id, [tools.step(agent)])
    assert api.run(run_id, [tools.step(agent)]) == {"made": "after"}
    assert tools.seen == ["before:1", "after:1", "after:2"]
    assert api.memory.load(run_id).status == "completed"
