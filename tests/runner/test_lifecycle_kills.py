"""Resume and upgrade against real process death, on the file store and on CosmosStore
(cosmos-local): a child process resumes or upgrades a failed run and is SIGKILLed at
each point of it -- before it reads the head, between the read and the write, in the
middle of the file store's record (a torn tail), after the write landed. The run is
then exactly as it was, or exactly as the operation leaves it, never a mix; and it
goes on from there to its end."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import durable_steps as ds

from ..helpers import lifecycle_child
from ..helpers.clitools import CLEAN

CHILD = lifecycle_child.__file__


def failed_run(store: ds.Store, run_id: str) -> ds.Checkpoint:
    """A run of version 1 failed in its step b (step a completed)."""

    def broken(state: Any) -> None:
        raise RuntimeError("b is broken")

    v1 = ds.Workflow("kills", [lifecycle_child.V1.steps[0], ds.Step("b", broken)], version="1")
    with pytest.raises(RuntimeError):
        v1.run(run_id, store, input={"n": 1})
    return store.load(run_id)


def killed_at(env: dict[str, str], op: str, run_id: str, point: str) -> None:
    child = subprocess.Popen(
        [sys.executable, CHILD, op, run_id, point],
        env={**CLEAN, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == f"at {point}\n", (line, child.stderr.read() if child.stderr else "")
    finally:
        child.kill()  # SIGKILL
        child.communicate(timeout=30)


def fields(cp: ds.Checkpoint) -> tuple[Any, ...]:
    return (cp.status, cp.version, cp.first_attempt, len(cp.resumed), cp.owner, cp.steps)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL: POSIX only")
@pytest.mark.parametrize("op", ["resume", "upgrade"])
def test_a_resume_or_upgrade_killed_at_any_point_leaves_the_run_before_or_after(
    env: dict[str, str], run_id: str, op: str
) -> None:
    points = ["before-read", "before-write", "after-write"]
    if env["DURABLE_STORE"] == "file":
        points.insert(2, "mid-write")
    with ds.store_from_env(env) as store:
        for point in points:
            rid = f"{run_id}-{point}"
            before = failed_run(store, rid)
            killed_at(env, op, rid, point)
            now = store.load(rid)  # whole: never a torn or mixed checkpoint
            assert now is not None
            assert now.state == before.state == {"n": 1}
            if point != "after-write":
                assert now.etag == before.etag, point
                assert fields(now) == fields(before), point
            elif op == "resume":
                assert fields(now) == ("running", "1", before.attempt + 1, 1, None, ("a",))
            else:
                assert fields(now) == ("failed", "2", before.first_attempt, 0, None, ("a",))
            # ... and it goes on from there.
            if op == "resume":
                if now.status == "failed":
                    ds.resume_run(store, rid)
                assert lifecycle_child.V1.run(rid, store) == {"n": 1}
                assert store.load(rid).steps == ("a", "b")
            else:
                ds.upgrade_run(store, rid, lifecycle_child.V2)
                ds.resume_run(store, rid)
                assert lifecycle_child.V2.run(rid, store) == {"n": 1}
                assert store.load(rid).steps == ("a", "b2")
