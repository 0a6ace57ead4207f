"""A run that makes progress is not a poison run, with real processes SIGKILLed on the
file store and on cosmos-local: ``max_attempts`` counts only the attempts of a step that
recorded nothing new. An agent step whose every attempt records one more call before
its process is killed (OOM, deploys) goes on past ``max_attempts`` kills; once its
attempts stop recording anything, the run is failed after ``max_attempts`` of those.
(Attempts that all die without a record: tests/workers/test_failing_runs.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import durable_steps as ds

from ..helpers.clitools import CLEAN

CALLS = 5
LIMIT = 3

AGENT = textwrap.dedent(
    f"""
    import os, signal, sys
    import durable_steps as ds

    fresh = []

    def tool(j):
        with open(os.environ["EFFECTS"], "a") as f:
            f.write(f"call{{j}}\\n")
        if j >= {CALLS}:  # from here on, killed before the call's result is recorded
            os.kill(os.getpid(), signal.SIGKILL)
        fresh.append(j)
        return j

    def agent(state):
        got = []
        for j in range({CALLS} + 1):
            got.append(ds.call("tool", tool, j))
            if fresh:  # one more call recorded: killed, as the OOM killer would
                os.kill(os.getpid(), signal.SIGKILL)
        return {{"got": got}}

    AGENT = ds.Workflow("agent", [ds.Step("agent", agent)], max_attempts={LIMIT})
    AGENT.run(sys.argv[1], ds.store_from_env())
    """
)


def test_attempts_that_record_a_call_do_not_count_toward_max_attempts(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """Five attempts each record one more call and are SIGKILLed (max_attempts=3): each
    next process resumes the step, replaying what was recorded; then three attempts
    are killed before recording anything, and the next claim fails the run with
    TooManyAttemptsError naming those three -- not at the 4th claim, which the five
    recorded calls disprove."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    effects = tmp_path / "effects"
    environ = {**CLEAN, **env, "EFFECTS": str(effects)}

    def attempt() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), run_id],
            check=False,
            env=environ,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    for n in range(1, CALLS + LIMIT + 1):
        done = attempt()
        assert done.returncode == -signal.SIGKILL, (n, done.returncode, done.stderr)
    assert effects.read_text().split() == [f"call{j}" for j in range(CALLS)] + ["call5"] * LIMIT
    last = attempt()
    assert last.returncode == 1 and "TooManyAttemptsError" in last.stderr, last.stderr
    assert effects.read_text().split().count("call5") == LIMIT  # not started a 4th time
    cp = ds.store_from_env(env).load(run_id)
    assert cp is not None
    assert (cp.status, cp.attempt, cp.error["type"]) == (
        "failed",
        CALLS + LIMIT,
        "durable_steps.TooManyAttemptsError",
    )
    message = cp.error["message"]
    assert f"started {CALLS + LIMIT} times (attempts 1..{CALLS + LIMIT})" in message, message
    assert f"{LIMIT} of them recorded nothing new" in message, message
    assert [r["name"] for r in cp.calls] == ["tool"] * CALLS
