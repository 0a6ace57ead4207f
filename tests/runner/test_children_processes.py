"""Child runs against real process death: a process working a parent and its children
is SIGKILLed at each point of a child's life -- before it is created, after, while it
runs, after it completed and before its parent was told -- and a second process
finishes: no child is lost, none is started twice, the parent's result is whole. On
the file store and cosmos-local."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.clitools import CLEAN

HELPER = str(Path(__file__).parents[1] / "helpers" / "children_child.py")
N = 3
POINTS = ["before-create", "after-create", "child-running", "after-child-completed"]


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_point_neither_loses_nor_duplicates_a_child(
    env: dict[str, str], tmp_path: Path, point: str
) -> None:
    """Killed at ``point``, then run again: every child exists once, with its parent
    named, and the parent sums all of them; a child's step ran twice only where the
    kill was inside it."""
    run_id = f"parent-{point}"
    extra = {"EFFECTS": str(tmp_path / "effects"), "KILLED": str(tmp_path / "killed")}
    cmd = [sys.executable, HELPER, run_id, str(N)]
    first = subprocess.run(
        cmd, env={**CLEAN, **env, **extra, "KILL": point}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = subprocess.run(
        cmd, env={**CLEAN, **env, **extra}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == {"id": run_id, "n": N, "total": 2 * sum(range(N))}
    with ds.store_from_env(env) as store:
        children = [i for i in store.list_runs(workflow="child") if i.run_id.startswith(run_id)]
        assert sorted(i.run_id for i in children) == [f"{run_id}.c{i}" for i in range(N)]
        assert all(store.load(i.run_id).parent == run_id for i in children)  # type: ignore[union-attr]
    effects = (tmp_path / "effects").read_text().split()
    twice = [f"{run_id}.c0"] if point == "child-running" else []
    assert sorted(effects) == sorted([f"{run_id}.c{i}" for i in range(N)] + twice)
