"""Workers in child processes for the lease, recovery and retry tests.

    python tests/helpers/lease_child.py MODE RUN_ID [ARGS]       store from the environment

Modes (every step appends "RUN_ID:STEP:ATTEMPT" to $SIDE_EFFECTS, fsynced):
    hold            workflow "hold": step "hold" waits until the file $RELEASE exists
                    (forever if unset); $LEASE and $OWNER set lease= and owner=
    race N          create a file in the directory $READY, wait for the file $GO, then run
                    workflow "race" (3 steps) on runs RUN_ID-0..N-1 in a shuffled order;
                    prints a JSON outcome per run. A RunLeasedError creates the file
                    $REFUSED; step "a" of run RUN_ID-0 waits for it, so that at least one
                    worker meets another however the processes are scheduled
    retry           step "flaky" fails every attempt, Retry(attempts=5, backoff=$BACKOFF)
Prints one JSON line: {"result": state} or {"error": type name, "owner": ..., "attempt": ...}.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from typing import Any

import durable_steps as ds


def effect(text: str) -> None:
    fd = os.open(os.environ["SIDE_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (text + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def logged(name: str, then: Any = None) -> ds.Step:
    def fn(state: Any) -> dict[str, Any]:
        ctx = ds.current_step()
        effect(f"{ctx.run_id}:{name}:{ctx.attempt}")
        if then:
            then()
        return {name: ctx.attempt}

    return ds.Step(name, fn)


def wait_for_release() -> None:
    release = os.environ.get("RELEASE")
    while release is None or not os.path.exists(release):
        time.sleep(0.01)


def until_someone_was_refused() -> None:
    # Bounded, so that a runner that refuses nobody fails the test instead of hanging it.
    deadline = time.monotonic() + 120
    if ds.current_step().run_id.endswith("-0"):
        while not os.path.exists(os.environ["REFUSED"]) and time.monotonic() < deadline:
            time.sleep(0.01)


def always_fails() -> None:
    raise TimeoutError("the model endpoint answered 429")


HOLD = ds.Workflow("hold", [logged("hold", wait_for_release), logged("after")])
RACE = ds.Workflow("race", [logged("a", until_someone_was_refused), logged("b"), logged("c")])
RETRY = ds.Workflow(
    "retry",
    [
        ds.Step(
            "flaky",
            logged("flaky", always_fails).fn,
            retry=ds.Retry(attempts=5, backoff=float(os.environ.get("BACKOFF", "30"))),
        )
    ],
)


def outcome(fn: Any) -> dict[str, Any]:
    try:
        return {"result": fn()}
    except ds.RunLeasedError as exc:
        if "REFUSED" in os.environ:
            open(os.environ["REFUSED"], "a").close()
        return {"error": "RunLeasedError", "owner": exc.owner}
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}


def main() -> None:
    mode, run_id = sys.argv[1], sys.argv[2]
    kwargs = {"lease": float(os.environ.get("LEASE", "60")), "owner": os.environ.get("OWNER")}
    with contextlib.closing(ds.store_from_env()) as store:
        if mode == "hold":
            print(json.dumps(outcome(lambda: HOLD.run(run_id, store, **kwargs))), flush=True)
        elif mode == "race":
            ids = [f"{run_id}-{i}" for i in range(int(sys.argv[3]))]
            random.shuffle(ids)
            open(os.path.join(os.environ["READY"], str(os.getpid())), "w").close()
            while not os.path.exists(os.environ["GO"]):
                time.sleep(0.001)
            for rid in ids:
                print(json.dumps({"run_id": rid, **outcome(lambda r=rid: RACE.run(r, store))}))
        elif mode == "retry":
            print(json.dumps(outcome(lambda: RETRY.run(run_id, store, **kwargs))), flush=True)
        else:
            raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
