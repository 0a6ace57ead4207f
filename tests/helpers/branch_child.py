"""Concurrent branches in one ``run_async`` step, in a process of its own, for tests that
kill it in the middle of any call of any branch.

    python tests/helpers/branch_child.py SHAPE RUN_ID      (store from the environment)

SHAPE   gather   two branches (A, B), each a loop of two calls, gathered
        nested   two branches (X, Y), each a call, then two inner loops of two calls
                 gathered (Xa, Xb), then a last call
        tasks    four tasks (T0..T3) created in a loop in a TaskGroup, two calls each

Every call sleeps for a latency of its branch, appends "BRANCH N" to $SIDE_EFFECTS
(fsynced), and returns "BRANCHN": what it returns names the branch that made it, so a
branch handed another's record would hold a foreign result. ``LATENCY=forward`` makes
earlier branches slower, ``reverse`` later ones, so a resumed run's branches interleave
otherwise than the killed run's did. With ``KILL_AT=k`` the process SIGKILLs itself
right after the k-th call (from 0) has run, before its record is saved (others may be
in flight too). Prints the step's result as JSON: ``{branch: [results in order]}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durable_steps as ds

SHAPES = ("gather", "nested", "tasks")
BRANCHES = {
    "gather": ["A", "B"],
    "nested": ["X", "Xa", "Xb", "Y", "Ya", "Yb"],
    "tasks": ["T0", "T1", "T2", "T3"],
}


def expected(shape: str) -> dict[str, list[str]]:
    """The result of every run of ``shape``, killed or not."""
    if shape == "nested":
        return {
            **{b: [f"{b}0", f"{b}9"] for b in "XY"},
            **{f"{b}{s}": [f"{b}{s}1", f"{b}{s}2"] for b in "XY" for s in "ab"},
        }
    return {b: [f"{b}1", f"{b}2"] for b in BRANCHES[shape]}


def calls(shape: str) -> int:
    return sum(len(v) for v in expected(shape).values())


class Effects:
    """The calls' side effects, in a file; ``kill`` runs right after the k-th."""

    def __init__(self, path: Path, kill_at: int | None, kill: Callable[[], None]) -> None:
        self.path, self.kill_at, self.kill, self.n = path, kill_at, kill, 0

    def __call__(self, branch: str, n: int) -> None:
        with self.path.open("a") as f:
            f.write(f"{branch} {n}\n")
            f.flush()
            os.fsync(f.fileno())
        if self.n == self.kill_at:
            self.kill()
        self.n += 1


def steps(shape: str, latency: str, effects: Effects) -> list[ds.Step]:
    order = BRANCHES[shape]

    def delay(branch: str) -> float:
        rank = order.index(branch) if branch in order else 0
        rank = len(order) - 1 - rank if latency == "forward" else rank
        return 0.004 * (rank + 1)

    async def work(branch: str, n: int) -> str:
        await asyncio.sleep(delay(branch))
        effects(branch, n)
        return f"{branch}{n}"

    async def leaf(branch: str) -> dict[str, list[str]]:
        got = [await ds.call_async("llm", work, branch, n) for n in (1, 2)]
        return {branch: got}

    async def outer(branch: str) -> dict[str, list[str]]:
        first = await ds.call_async("plan", work, branch, 0)
        inner = await asyncio.gather(leaf(f"{branch}a"), leaf(f"{branch}b"))
        last = await ds.call_async("sum", work, branch, 9)
        return {branch: [first, last], **inner[0], **inner[1]}

    async def step(state: Any) -> dict[str, Any]:
        if shape == "gather":
            parts = await asyncio.gather(leaf("A"), leaf("B"))
        elif shape == "nested":
            parts = await asyncio.gather(outer("X"), outer("Y"))
        else:
            async with asyncio.TaskGroup() as group:
                started = [group.create_task(leaf(f"T{i}")) for i in range(4)]
            parts = [t.result() for t in started]
        return {"results": {k: v for part in parts for k, v in part.items()}}

    return [ds.Step("branches", step)]


async def run(
    shape: str, run_id: str, store: ds.AsyncStore, latency: str, effects: Effects
) -> dict[str, Any]:
    state = await ds.run_async(run_id, steps(shape, latency, effects), store)
    return state["results"]  # type: ignore[no-any-return]


def main() -> None:
    shape, run_id = sys.argv[1], sys.argv[2]
    at = os.environ.get("KILL_AT")
    effects = Effects(
        Path(os.environ["SIDE_EFFECTS"]),
        int(at) if at else None,
        lambda: os.kill(os.getpid(), signal.SIGKILL),
    )

    async def go() -> dict[str, Any]:
        async with ds.async_store_from_env() as store:
            return await run(shape, run_id, store, os.environ.get("LATENCY", "forward"), effects)

    print(json.dumps(asyncio.run(go())))


if __name__ == "__main__":
    main()
