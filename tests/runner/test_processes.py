"""Durability against real process death and real concurrent processes, on the
file store and on CosmosStore (cosmos-local)."""

from __future__ import annotations

import json
import random
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.places import Place


@pytest.fixture
def place(env: dict[str, str], tmp_path: Path) -> Place:
    return Place(env, tmp_path / "effects.log")


def test_crashed_process_resumes_and_reruns_only_the_crashed_step(
    place: Place, run_id: str
) -> None:
    """Step b dies with os._exit(3); a fresh process resumes: a runs once, b twice, c once."""
    crashed = place.run("crash-in-b", run_id, CRASH="1")
    assert crashed.returncode == 3, crashed.stderr
    assert place.effects_log() == ["a", "b"]
    cp = place.store().load(run_id)
    assert cp is not None
    assert (cp.step, cp.steps) == (0, ("a",))

    resumed = place.run("crash-in-b", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"a": 0, "b": 1, "c": 2}
    assert place.effects_log() == ["a", "b", "b", "c"]


def test_a_call_knows_how_often_it_was_started(place: Place, run_id: str) -> None:
    """A process killed twice while call b runs: current_step().attempt inside b is 1,
    2, 3 on its three starts; inside a (recorded before the kills: never run again) it
    was 1; inside c, first started by the third process, it is 1 (not the step's 3)."""
    for _ in range(2):
        proc = place.spawn("call-attempts", run_id)
        assert ready(proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    done = place.run("call-attempts", run_id, FINISH="1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"made": ["a", "b", "c"]}
    assert place.effects_log() == ["a:1", "b:1", "b:2", "b:3", "c:1"]


def test_processes_writing_different_runs_lose_nothing(place: Place, run_id: str) -> None:
    """Four processes completing 3-step runs in one store at once: every run is complete."""
    n = 40
    procs = [place.spawn("many", f"{run_id}-p{p}", str(n)) for p in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    store = place.store()
    for p in range(4):
        for i in range(n):
            cp = store.load(f"{run_id}-p{p}-{i}")
            assert cp is not None
            assert (cp.done, cp.state) == (True, {"a": 0, "b": 1, "c": 2})
    assert len(place.effects_log()) == 4 * n * 3


def test_processes_racing_on_one_run_never_overwrite(
    place: Place, run_id: str, tmp_path: Path
) -> None:
    """Four processes advance one run from what they loaded: each step is won exactly once,
    the stored state records the winner of every step, and the losers got ConflictError."""
    place.store().save(ds.Checkpoint(run_id, -1, {}))
    go = tmp_path / "go"
    procs = [place.spawn("race", run_id, "60", GO=str(go)) for _ in range(4)]
    go.touch()
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    wins = sorted(w for r in reports for w in r["wins"])
    final = place.store().load(run_id)
    assert final is not None
    assert wins == list(range(final.step + 1))  # no step won twice, none lost
    for r in reports:
        for w in r["wins"]:
            assert final.state[f"s{w}"] == r["pid"]
    assert sum(r["conflicts"] for r in reports) == 4 * 60 - len(wins)
    assert sum(r["conflicts"] for r in reports) > 0


@pytest.mark.slow
def test_sigkill_at_random_moments_never_loses_or_tears_a_checkpoint(
    tmp_path: Path, run_id: str
) -> None:
    """A long run SIGKILLed at random moments (seeded): after every kill the store loads,
    the step index never goes backwards, and the state holds exactly the completed steps."""
    place = Place(
        {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path / "s")}, tmp_path / "fx"
    )
    store, rng, last, kills, n = place.store(), random.Random(20261202), -1, 0, 400
    while kills < 30:
        proc = place.spawn("long", run_id, str(n))
        if not ready(proc):
            proc.communicate()
            break  # it had no step left to run
        time.sleep(rng.uniform(0, 0.2))  # counted from its first step, not from its start-up
        if proc.poll() is not None:
            proc.communicate()
            break  # it finished before this kill
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        kills += 1
        cp = store.load(run_id)  # never raises: no torn checkpoint
        if cp is None:
            continue
        assert cp.step >= last
        assert cp.state == {f"s{i}": i for i in range(cp.step + 1)}
        last = cp.step
    assert kills >= 10
    assert last > 0  # the runs made progress between kills
    done = place.run("long", run_id, str(n))
    assert done.returncode == 0, done.stderr
    cp = store.load(run_id)
    assert cp is not None
    assert cp.done
    assert cp.state == {f"s{i}": i for i in range(n)}
    list(store.list_runs())  # removes the temp files of killed snapshot writes
    assert not [f for f in (tmp_path / "s" / "runs").iterdir() if f.name.startswith(".tmp-")]


def ready(proc: subprocess.Popen[str], timeout: float = 120) -> bool:
    """Wait (with a deadline, never a guess) until the child prints "ready"; False if it
    exits first."""
    assert proc.stdout is not None
    readable, _, _ = select.select([proc.stdout], [], [], timeout)
    assert readable, f"the child said nothing for {timeout} s"
    return proc.stdout.readline() == "ready\n"
