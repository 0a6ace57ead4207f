"""The journal against real process death: over a thousand SIGKILLs spread over the save
path (appends, their fdatasync, cutting a torn tail off, and every stage of writing a new
snapshot), each followed by a load that must give the last acknowledged step or the one
after, with exactly the state those steps made. The work runs in tests/helpers/runfile_server.py,
a fork server, so that a thousand processes cost seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SERVER = str(Path(__file__).parents[2] / "helpers" / "runfile_server.py")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs fork and SIGKILL: POSIX only")
def test_a_thousand_sigkills_never_lose_or_tear_a_checkpoint(tmp_path: Path) -> None:
    """After every kill the run loads at the last acknowledged step or the one after, with
    exact state and step names; runs complete; no temp file is left after a listing."""
    done = subprocess.run(
        [sys.executable, SERVER, str(tmp_path / "store"), "20261203", "1080"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failures"] == [], report
    kills = report["kills"]
    assert sum(kills.values()) >= 1000, kills
    in_new_files = kills["write-temp"] + kills["temp-synced"] + kills["replaced"]
    assert in_new_files >= 150, kills  # during compactions (and creations)
    assert min(kills["write-append"], kills["random"], kills["truncate"]) >= 50, kills
    assert min(kills["sync"], kills["synced"]) >= 30, kills
    assert report["completed_runs"] >= 5
    assert report["temp_files_left"] == []
