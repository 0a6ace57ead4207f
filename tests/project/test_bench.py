"""The benchmarks run: the smoke form of ``scripts/bench`` completes every part with
its rows, so a bench that cannot run does not land (issue 29: part 5 had stopped
running unnoticed). Nothing is timed here: speed is judged by the bench's table,
never by a test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from durable_steps.testing import CosmosEndpoint

from ..helpers.clitools import CLEAN  # no store of the developer's: no live account either
from ..helpers.servers import ROOT

pytestmark = pytest.mark.skipif(
    sys.platform != "linux",
    reason="the bench reads the kernel's counters in /proc; run scripts/bench on Linux",
)


@pytest.mark.slow
def test_every_bench_part_runs_and_adds_its_rows(
    cosmos_local: CosmosEndpoint, tmp_path: Path
) -> None:
    """``python -m benchmarks.bench --quick`` (what ``scripts/bench --quick`` runs,
    without installing the peers: where they are missing their rows say so) exits 0:
    no part raised or added no row. Parts 4-5 start their own cosmos-local, so this
    test needs what that backend needs (``cosmos_local`` skips or fails as it does)."""
    del cosmos_local  # asked for its skip or failure only
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench", "--quick", "--dir", str(tmp_path)],
        cwd=ROOT,
        env=CLEAN,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its workers and servers go with it on a timeout
    )
    try:
        out, err = proc.communicate(timeout=600)  # a bound for a hung bench, not a target
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the bench hung:\n{err[-5000:]}")
    assert proc.returncode == 0, err[-5000:]
    assert "targets met" in out, out[-3000:]
