"""A Pydantic AI agent in a step of a real process killed by SIGKILL at every model
request and tool call, then resumed by a fresh process: on the file store and on
CosmosStore (cosmos-local), under ``run`` and ``run_async``, and as a ``Workflow``
that ``recover`` resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from . import agents

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL"),
]

CHILD = agents.__file__


@dataclass
class Kill:
    """A run killed at side effect ``at`` (its own child), then resumed."""

    at: int
    run_id: str
    effects: Path
    """Its side effects, one line each: a name, and a tool's agent-run id."""
    kept: Counter[str] = field(default_factory=Counter)
    """The side effects of what the store had recorded when it was killed."""
    before: int = 0
    """How many side effects had happened when it was killed."""


def spawn(env: dict[str, str], effects: Path, *args: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, *args],
        env={**os.environ, **env, "SIDE_EFFECTS": str(effects), **extra},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def kill_everywhere(
    env: dict[str, str], tmp_path: Path, run_id: str, *, kind: str, driver: str, when: str
) -> list[tuple[Kill, dict[str, Any]]]:
    """A run killed at each side effect, each in a child of its own (all at once), then all
    resumed by one fresh child: the kills, and each run's result."""
    kills = [
        Kill(k, f"{run_id}-{k}", tmp_path / f"{run_id}-{k}.log")
        for k in range(len(expected(kind, driver)))
    ]
    first = [
        spawn(env, tmp_path, driver, kind, k.run_id, KILL_AT=str(k.at), KILL_WHEN=when)
        for k in kills
    ]
    for k, proc in zip(kills, first, strict=True):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, f"kill at {k.at}: {err}"
    with ds.store_from_env(env) as store:
        for k in kills:
            cp = store.load(k.run_id)
            assert cp is not None
            k.kept = agents.kept(cp.calls) + Counter(["prepare"] * (cp.step + 1))
            k.before = len(ran(k))
    resume = "recover" if driver == "workflow" else driver
    proc = spawn(env, tmp_path, resume, kind, *(k.run_id for k in kills))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    results = json.loads(out)
    return [(k, results[k.run_id]) for k in kills]


def expected(kind: str, driver: str) -> list[str]:
    return ["prepare"] * (driver == "workflow") + agents.EXPECTED_EFFECTS[kind]


def ran(kill: Kill) -> list[str]:
    if not kill.effects.exists():  # killed before its first side effect
        return []
    return [line.split()[0] for line in kill.effects.read_text().splitlines()]


def run_ids(kill: Kill) -> set[str]:
    return {line.split()[1] for line in kill.effects.read_text().splitlines() if " " in line}


OUTPUT = {"function": agents.FUNCTION_OUTPUT, "test": agents.TEST_OUTPUT}


def check(kill: Kill, out: dict[str, Any], kind: str, driver: str) -> None:
    """Exactly the calls that were not recorded when it was killed ran again (the tools of
    one model response run concurrently: a sibling of the call at ``at`` may have run, or
    even been recorded, meanwhile), and the output is an uninterrupted run's."""
    lines = ran(kill)
    first, again = Counter(lines[: kill.before]), Counter(lines[kill.before :])
    assert kill.kept <= first, f"killed at {kill.at}"
    assert again == Counter(expected(kind, driver)) - kill.kept, f"killed at {kill.at}"
    assert out["output"] == OUTPUT[kind]
    assert run_ids(kill) == {out["run_id"]}, "the agent run keeps its run_id"


# Each model under one driver: the kill matrix (test_kill_matrix.py) kills the function
# model's agent under ``run`` before each call too, from forks of one process.
@pytest.mark.parametrize(("kind", "driver"), [("function", "sync"), ("test", "async")])
def test_killed_before_each_call_every_finished_call_ran_once(
    env: dict[str, str], tmp_path: Path, run_id: str, kind: str, driver: str
) -> None:
    """Killed when k calls had run (k over every call of the run), then resumed: no
    recorded call ran again, every other one did, and the output is an uninterrupted
    run's."""
    for kill, out in kill_everywhere(
        env, tmp_path, run_id, kind=kind, driver=driver, when="before"
    ):
        check(kill, out, kind, driver)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_killed_inside_each_call_only_that_call_runs_again(
    env: dict[str, str], tmp_path: Path, run_id: str, driver: str
) -> None:
    """Killed inside call k, after its side effect and before its record: it runs again on
    resume, no recorded call does, the output is the same."""
    for kill, out in kill_everywhere(
        env, tmp_path, run_id, kind="function", driver=driver, when="after"
    ):
        check(kill, out, "function", driver)
        assert Counter(ran(kill)[: kill.before]) - kill.kept, "the call killed inside ran"


def test_a_workflow_of_an_agent_is_recovered_after_each_kill(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """A Workflow whose second step runs the agent, killed at each side effect; recover()
    in a fresh process finishes it: no finished step or recorded call ran again, the output
    is the same."""
    for kill, out in kill_everywhere(
        env, tmp_path, run_id, kind="function", driver="workflow", when="before"
    ):
        check(kill, out, "function", "workflow")
        assert out["question"] == "go, ann"
