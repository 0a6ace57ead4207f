"""A SIGKILL at every point of a fork -- each store request or file operation of it --
leaves the source intact and the new run either absent or whole (issue 33), on the
file store and on Cosmos DB (cosmos-local)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import durable_steps as ds

from .test_history import _steps

CHILD = str(Path(__file__).parents[1] / "helpers" / "fork_child.py")


def _fork(
    env: dict[str, str], source: str, new: str, kill_at: int | None
) -> subprocess.CompletedProcess[str]:
    extra = {} if kill_at is None else {"KILL_AT": str(kill_at)}
    return subprocess.run(
        [sys.executable, CHILD, source, new, "2"],
        env={**os.environ, **env, "DURABLE_HISTORY": "steps", **extra},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_fork_killed_at_any_point_leaves_the_source_and_no_half_run(
    env: dict[str, str], run_id: str
) -> None:
    """Killed before each of its points in turn: the source's checkpoint and history are
    unchanged, the new run is absent or the whole fork; the fork that is let finish is whole."""
    with ds.store_from_env({**env, "DURABLE_HISTORY": "steps"}) as store:
        ds.run(run_id, _steps(Counter(), n=4), store)
        source, history = store.load(run_id), store.run_history(run_id)
        expected = {**store.load_at(run_id, 2).state, "forked": True}
    done = _fork(env, run_id, f"{run_id}-whole", None)
    assert done.returncode == 0, done.stderr
    points = json.loads(done.stdout)["points"]
    assert points >= 3  # reads, then the create's writes
    outcomes = Counter()
    for k in range(points):
        new = f"{run_id}-k{k}"
        killed = _fork(env, run_id, new, k)
        if killed.returncode == 0:  # fewer points this time (a bucket of the file store's
            # due index made by the first fork exists now): it ended before point k, whole
            assert json.loads(killed.stdout)["points"] <= k, killed.stdout
        else:
            assert killed.returncode == -9, killed.stderr
        with ds.store_from_env({**env, "DURABLE_HISTORY": "steps"}) as store:
            after = store.load(run_id)
            assert (after.etag, after.state) == (source.etag, source.state)
            assert store.run_history(run_id) == history
            made = store.load(new)
            outcomes["absent" if made is None else "whole"] += 1
            if made is not None:
                assert (made.step, made.state, made.forked_from["run"]) == (2, expected, run_id)
    assert outcomes["absent"] >= 1
