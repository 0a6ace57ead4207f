"""Work done in a child process, so that tests can kill it for real.

    python tests/helpers/child.py MODE RUN_ID [ARG]     store from the environment (store_from_env)

Modes:
    crash-in-b      steps a, b, c; b calls os._exit(3) when CRASH=1 (after logging itself)
    async-crash-in-b  the same with run_async, async steps and async_store_from_env()
    long N          N small steps, each adding key sN; prints "ready" when its first step
                    runs, so a SIGKILL loop can kill relative to that, not to start-up
    race K          K rounds of load, then save the next step; prints wins/conflicts as JSON
    many N          N separate runs named RUN_ID-0..N-1, three steps each
    call-attempts   one step of calls a, b, c, each logging "NAME:ATTEMPT" (its
                    current_step().attempt); b prints "ready" and hangs unless FINISH=1
Every step appends its name to $SIDE_EFFECTS (a side effect the test can count).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import replace
from typing import Any

import durable_steps as ds


def effect(name: str) -> None:
    with open(os.environ["SIDE_EFFECTS"], "a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


def logged(name: str, then: Any = None) -> ds.Step:
    def fn(state: Any) -> dict[str, Any]:
        effect(name)
        if then:
            then()
        return {name: len(state)}

    return ds.Step(name, fn)


def crash() -> None:
    if os.environ.get("CRASH") == "1":
        os._exit(3)


async def async_crash_in_b(run_id: str) -> None:
    def later(step: ds.Step) -> ds.Step:
        async def fn(state: Any) -> Any:
            await asyncio.sleep(0.01)
            return step.fn(state)

        return ds.Step(step.name, fn)

    async with ds.async_store_from_env() as store:
        steps = [later(logged("a")), later(logged("b", crash)), logged("c")]
        print(json.dumps(await ds.run_async(run_id, steps, store)))


def main() -> None:
    mode, run_id = sys.argv[1], sys.argv[2]
    store = ds.store_from_env()
    if mode == "crash-in-b":
        print(json.dumps(ds.run(run_id, [logged("a"), logged("b", crash), logged("c")], store)))
    elif mode == "async-crash-in-b":
        asyncio.run(async_crash_in_b(run_id))
    elif mode == "long":
        n, ready = int(sys.argv[3]), []

        def step(i: int) -> ds.Step:
            def fn(state: Any) -> dict[str, Any]:
                if not ready:
                    ready.append(print("ready", flush=True))
                time.sleep(0.002)
                return {f"s{i}": i}

            return ds.Step(f"s{i}", fn)

        ds.run(run_id, [step(i) for i in range(n)], store)
    elif mode == "race":
        wins, conflicts = [], 0
        while not os.path.exists(os.environ["GO"]):
            time.sleep(0.001)
        for _ in range(int(sys.argv[3])):
            cp = store.load(run_id)
            assert cp is not None
            nxt = cp.step + 1
            try:
                store.save(
                    replace(
                        cp,
                        step=nxt,
                        steps=(*cp.steps, f"s{nxt}"),
                        state={**cp.state, f"s{nxt}": os.getpid()},
                    )
                )
                wins.append(nxt)
            except ds.ConflictError:
                conflicts += 1
        print(json.dumps({"pid": os.getpid(), "wins": wins, "conflicts": conflicts}))
    elif mode == "call-attempts":

        def tool(name: str) -> str:
            effect(f"{name}:{ds.current_step().attempt}")
            while name == "b" and os.environ.get("FINISH") != "1":
                print("ready", flush=True)
                time.sleep(3600)  # until the test kills this process
            return name

        def agent(state: Any) -> dict[str, Any]:
            return {"made": [ds.call(n, tool, n) for n in ("a", "b", "c")]}

        print(json.dumps(ds.run(run_id, [ds.Step("agent", agent)], store)))
    elif mode == "many":
        for i in range(int(sys.argv[3])):
            ds.run(f"{run_id}-{i}", [logged("a"), logged("b"), logged("c")], store)
    else:
        raise SystemExit(f"unknown mode {mode}")
    if hasattr(store, "close"):
        store.close()


if __name__ == "__main__":
    main()
