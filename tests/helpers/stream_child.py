"""A run that streams, in a process of its own, for tests that kill it at any chunk.

    python tests/helpers/stream_child.py MODE RUN_ID      (store from the environment)

MODE ``sync`` (``run``) or ``async`` (``run_async``). One step, ``ROUNDS`` rounds: step
code writes ``{"step": r}``, then the call ``gen`` writes ``TOKENS`` chunks
``"r.t"`` and returns; at the end step code writes ``"done"``. Every chunk, once
stored, is noted in $SIDE_EFFECTS (fsynced); with ``KILL_AT=k`` the process SIGKILLs
itself right after the k-th chunk (from 0) was stored -- after a step-code chunk the
step is between durable operations, after a call's chunk the call is in flight (its
result not recorded). Prints the final state as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import durable_steps as ds

ROUNDS = 3
TOKENS = 3
CHUNKS = ROUNDS * (1 + TOKENS) + 1
"""Chunks an uninterrupted run writes."""


def expected() -> list[Any]:
    """The chunks of an uninterrupted run, in order."""
    out: list[Any] = []
    for r in range(ROUNDS):
        out += [{"step": r}, *(f"{r}.{t}" for t in range(TOKENS))]
    return [*out, "done"]


class Chunks:
    def __init__(self) -> None:
        self.n = 0
        self.kill_at = int(os.environ["KILL_AT"]) if os.environ.get("KILL_AT") else None

    def wrote(self, chunk: Any) -> None:
        with open(os.environ["SIDE_EFFECTS"], "a") as f:
            f.write(json.dumps(chunk) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self.n == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        self.n += 1


def sync_steps(chunks: Chunks) -> list[ds.Step]:
    def gen(r: int) -> str:
        for t in range(TOKENS):
            ds.write_stream("out", f"{r}.{t}")
            chunks.wrote(f"{r}.{t}")
        return f"round {r}"

    def agent(state: Any) -> dict[str, Any]:
        said = []
        for r in range(ROUNDS):
            ds.write_stream("out", {"step": r})
            chunks.wrote({"step": r})
            said.append(ds.call("gen", gen, r))
        ds.write_stream("out", "done")
        chunks.wrote("done")
        return {"said": said}

    return [ds.Step("agent", agent)]


def async_steps(chunks: Chunks) -> list[ds.Step]:
    async def gen(r: int) -> str:
        for t in range(TOKENS):
            await ds.write_stream_async("out", f"{r}.{t}")
            chunks.wrote(f"{r}.{t}")
        return f"round {r}"

    async def agent(state: Any) -> dict[str, Any]:
        said = []
        for r in range(ROUNDS):
            await ds.write_stream_async("out", {"step": r})
            chunks.wrote({"step": r})
            said.append(await ds.call_async("gen", gen, r))
        await ds.write_stream_async("out", "done")
        chunks.wrote("done")
        return {"said": said}

    return [ds.Step("agent", agent)]


def main() -> None:
    mode, run_id = sys.argv[1], sys.argv[2]
    chunks = Chunks()
    if mode == "sync":
        with ds.store_from_env() as store:
            state = ds.run(run_id, sync_steps(chunks), store)
    else:

        async def go() -> dict[str, Any]:
            async with ds.async_store_from_env() as store:
                return await ds.run_async(run_id, async_steps(chunks), store)

        state = asyncio.run(go())
    print(json.dumps(state))


if __name__ == "__main__":
    main()
