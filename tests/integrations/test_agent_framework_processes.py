"""A Microsoft Agent Framework workflow (an agent executor, a person's review) checkpointed
by ``DurableCheckpointStorage`` in a real process SIGKILLed between supersteps, then
resumed from ``get_latest`` by another process, which stops at the person's request;
a third answers it. On the file store and on CosmosStore (cosmos-local)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ..helpers.waiting import wait_until

pytest.importorskip("agent_framework")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL"),
]

ROOT = Path(__file__).parents[2]


def child(mode: str, env: dict[str, str], **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.af_workflows", mode],
        cwd=ROOT,
        env={**os.environ, **env, **extra},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]


def test_killed_between_supersteps_resumes_from_the_latest_checkpoint(
    env: dict[str, str], tmp_path: Path
) -> None:
    """SIGKILLed in the superstep after the agent's: the next process resumes from
    ``get_latest`` without asking the model again, stops at the person's request (holding
    nothing), and a third process answers it and gets the output."""
    shared = {**env, "SIDE_EFFECTS": str(tmp_path), "AF_WORKFLOW": f"review-{uuid.uuid4()}"}
    first = child("start", shared, AF_BLOCK_AT_GATE="1")
    try:
        wait_until(lambda: (tmp_path / "gate").exists() or first.poll() is not None, "the gate")
        assert first.poll() is None, first.communicate()[1]
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.communicate()  # closes its pipes
    assert first.returncode == -signal.SIGKILL
    assert (tmp_path / "model.log").read_text().splitlines() == ["model"]

    asked = finish(child("resume", shared))
    assert len(asked["requests"]) == 1
    answered = finish(child("answer", shared))
    assert answered["outputs"] == ["draft: cats (ok)"]
    # The agent's superstep was checkpointed before the kill: its model call never ran again.
    assert (tmp_path / "model.log").read_text().splitlines() == ["model"]
