"""An OpenAI Agents SDK run in a step of a real process killed by SIGKILL at every model
response, tool call, handoff and guardrail, then resumed by another process: on the file
store and on CosmosStore (cosmos-local), under ``run`` and ``run_async``.

The runs killed at each k are made at once, each in its own process forked from one that
imported the SDK (an import costs ~2 s; see ``openai_runs``), which resumes them all once
the test has looked at what the store kept: a process that never ran them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from . import openai_runs as runs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX fork and SIGKILL"),
]

ROOT = Path(__file__).parents[2]


@dataclass
class Kill:
    """A run killed at side effect ``at``, then resumed."""

    at: int
    run_id: str
    effects: Path
    """Its side effects, one call name a line."""
    kept: Counter[str] = field(default_factory=Counter)
    """The side effects of what the store had recorded when it was killed."""
    before: int = 0
    """How many side effects had happened when it was killed."""


def kill_everywhere(
    env: dict[str, str], tmp_path: Path, run_id: str, *, scenario: str, driver: str, when: str
) -> list[tuple[Kill, dict[str, Any]]]:
    """A run killed at each side effect, then all resumed by another process: the kills,
    and each run's result."""
    kills = [
        Kill(k, f"{run_id}-{k}", tmp_path / f"{run_id}-{k}.log")
        for k in range(len(runs.EXPECTED[scenario]))
    ]
    extra = {"KILL_AT": ",".join(str(k.at) for k in kills), "KILL_WHEN": when}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.openai_runs", driver, scenario]
        + [k.run_id for k in kills],
        cwd=ROOT,
        env={**os.environ, **env, "SIDE_EFFECTS": str(tmp_path), **extra},
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        killed = proc.stdout.readline()
        assert killed, proc.communicate()[1]
        assert json.loads(killed) == [True] * len(kills)  # each SIGKILLed, none finished
        with ds.store_from_env(env) as store:
            for k in kills:
                cp = store.load(k.run_id)
                assert cp is not None
                k.kept = runs.kept(cp.calls)
                k.before = len(ran(k))
        out, err = proc.communicate("resume\n", timeout=300)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    results = json.loads(out)
    return [(k, results[k.run_id]) for k in kills]


def ran(kill: Kill) -> list[str]:
    if not kill.effects.exists():  # killed before its first side effect
        return []
    return kill.effects.read_text().splitlines()


def check(kill: Kill, out: dict[str, Any], scenario: str) -> None:
    """Every call settled before the kill was recorded, exactly the calls that were not ran
    again (calls of one turn run at once: a sibling of the call at ``at`` may have run, or
    even been recorded, meanwhile), and the output is an uninterrupted run's."""
    lines = ran(kill)
    first, again = Counter(lines[: kill.before]), Counter(lines[kill.before :])
    assert runs.settled(lines[: kill.at]) <= kill.kept <= first, f"killed at {kill.at}"
    assert again == Counter(runs.EXPECTED[scenario]) - kill.kept, f"killed at {kill.at}"
    assert out["output"] == runs.OUTPUT[scenario]


@pytest.mark.parametrize(("scenario", "driver"), [("tools", "sync"), ("handoff", "async")])
def test_killed_before_each_call_every_finished_call_ran_once(
    env: dict[str, str], tmp_path: Path, run_id: str, scenario: str, driver: str
) -> None:
    """Killed when k calls had run (k over every call of the run), then resumed: no
    recorded call ran again, every other one did, and the output is an uninterrupted
    run's."""
    for kill, out in kill_everywhere(
        env, tmp_path, run_id, scenario=scenario, driver=driver, when="before"
    ):
        check(kill, out, scenario)


def test_killed_inside_each_call_only_that_call_runs_again(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """Killed inside call k, after its side effect and before its record: it runs again on
    resume, no recorded call does, the output is the same."""
    for kill, out in kill_everywhere(
        env, tmp_path, run_id, scenario="handoff", driver="sync", when="after"
    ):
        check(kill, out, "handoff")
        assert Counter(ran(kill)[: kill.before]) - kill.kept, "the call killed inside ran"
