"""Runs a worker must not take forever, with real ``durable-steps worker`` processes
on the file store and on cosmos-local: a run whose step's result can never be saved
is failed once; a poison run -- its worker SIGKILLed in the same step every time, as
the OOM killer would -- is failed after ``max_attempts`` attempts."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers.clitools import CLEAN, SCRIPT
from ..helpers.waiting import wait_until
from ..helpers.worker_process import stderr_of, worker, workers_die_with_their_test  # noqa: F401

LIMIT = 100_000

FLOWS = textwrap.dedent(
    """
    import os, time
    import durable_steps as ds

    def effect(name):
        with open(os.environ["EFFECTS"], "a") as f:
            f.write(f"{ds.current_step().run_id}:{name}\\n")

    def big(state):
        effect("big")
        return {"blob": "x" * 2 * int(os.environ["DURABLE_MAX_STATE_BYTES"])}

    def small(state):
        effect("small")
        return {"ok": True}

    def hog(state):
        effect("hog")
        while True:  # until the test kills its process
            time.sleep(0.05)

    BIG = ds.Workflow("big", [ds.Step("big", big)])
    SMALL = ds.Workflow("small", [ds.Step("small", small)])
    POISON = ds.Workflow("poison", [ds.Step("a", small), ds.Step("hog", hog)], max_attempts=3)
    WORKFLOWS = [BIG, SMALL, POISON]
    """
)


@pytest.fixture
def env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    (tmp_path / "flows.py").write_text(FLOWS)
    return {"EFFECTS": str(tmp_path / "effects"), "DURABLE_MAX_STATE_BYTES": str(LIMIT), **env}


def effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "effects"
    return path.read_text().split() if path.exists() else []


def start(store: Any, workflow: str, run_id: str) -> None:
    """``runs start``: the run created for the workers by its workflow's name alone."""
    assert ds.Workflow(workflow, [ds.Step("-", lambda s: None)]).start(run_id, store)


def test_a_worker_fails_a_run_whose_result_is_over_the_limit_once(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """A started run whose step returns more than DURABLE_MAX_STATE_BYTES: the worker
    runs the step once, records the run as failed with StateTooLargeError and takes
    it no more -- while it goes on running other runs (two later runs complete, each
    proving another pass) the step's side effect stays at one."""
    store = ds.store_from_env(env)
    start(store, "big", run_id)
    proc = worker(env, tmp_path, "flows:WORKFLOWS", "--interval", "0.1")

    def settled() -> bool:
        big = effects(tmp_path).count(f"{run_id}:big")
        return big > 1 or (big == 1 and store.load(run_id).status == "failed")

    wait_until(settled, "the run to fail, or its step to run again")
    for n in range(2):
        start(store, "small", f"{run_id}-later{n}")
        wait_until(lambda n=n: store.load(f"{run_id}-later{n}").done, "a later run")
    assert effects(tmp_path).count(f"{run_id}:big") == 1
    cp = store.load(run_id)
    assert (cp.status, cp.owner, cp.error["type"]) == (
        "failed",
        None,
        "durable_steps.StateTooLargeError",
    )
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert out.count(f"run {run_id} (big): failed: StateTooLargeError") == 1, out


def test_a_poison_run_is_failed_after_max_attempts_kills(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """A worker SIGKILLed in the same step every time: the next worker resumes the run
    (attempt 2, 3: `runs list` shows the attempt each time); once the step was started
    max_attempts (3) times, the next worker does not start it a 4th time: it reports
    the run failed with TooManyAttemptsError (recorded, naming the step and the
    attempts), and later workers leave it alone. An explicit run starts a new round."""
    store = ds.store_from_env(env)
    start(store, "poison", run_id)
    for attempt in (1, 2, 3):
        proc = worker(env, tmp_path, "flows:POISON", "--interval", "0.1")
        wait_until(lambda a=attempt: effects(tmp_path).count(f"{run_id}:hog") == a, "the step")
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        cp = store.load(run_id)
        assert (cp.status, cp.step, cp.attempt) == ("running", 0, attempt)
        (row,) = [r for r in listing(env, tmp_path, "--json") if r["run_id"] == run_id]
        assert (row["attempt"], row["step"]) == (attempt, 0)
        (line,) = [line for line in listing(env, tmp_path) if line.startswith(run_id)]
        assert re.search(rf"running\s+poison\s+0 a\s+{attempt}\s+lease", line), line
    proc = worker(env, tmp_path, "flows:POISON", "--once")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr_of(tmp_path)
    assert f"run {run_id} (poison): failed: TooManyAttemptsError" in out, out
    assert effects(tmp_path).count(f"{run_id}:hog") == 3
    cp = store.load(run_id)
    assert (cp.status, cp.owner, cp.attempt, cp.error["type"]) == (
        "failed",
        None,
        3,
        "durable_steps.TooManyAttemptsError",
    )
    assert "step 1 'hog' was started 3 times (attempts 1..3)" in cp.error["message"]
    assert "run it again explicitly" in cp.error["message"]
    again = worker(env, tmp_path, "flows:POISON", "--once")
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and run_id not in out, out
    assert effects(tmp_path).count(f"{run_id}:hog") == 3


def listing(env: dict[str, str], cwd: Path, *options: str) -> Any:
    """`durable-steps runs list`, as an operator sees the runs: the table's lines, or
    with --json the rows."""
    done = subprocess.run(
        [SCRIPT, "runs", "list", *options],
        env={**CLEAN, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if options else done.stdout.splitlines()
