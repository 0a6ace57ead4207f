"""`durable-steps runs resume`, `runs upgrade`, `runs list --version` and `worker
--version`: real processes against the file store (the API they call is proven on
every backend by tests/runner/test_resume.py and test_versions.py)."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli

FLOWS = textwrap.dedent(
    """
    import durable_steps as ds

    def ok(state):
        return {"done": True}

    V1 = ds.Workflow("cli", [ds.Step("a", ok), ds.Step("b", ok)], version="1")
    V2 = ds.Workflow("cli", [ds.Step("a", ok), ds.Step("b2", ok)], version="2")
    RENAMED = ds.Workflow("cli", [ds.Step("A", ok)], version="3")
    WORKFLOWS = [V1, V2, RENAMED]
    """
)


def failed_v1(store: ds.Store, run_id: str) -> None:
    def broken(state: object) -> None:
        raise RuntimeError("b is broken")

    v1 = ds.Workflow("cli", [ds.Step("a", lambda s: None), ds.Step("b", broken)], version="1")
    with pytest.raises(RuntimeError):
        v1.run(run_id, store)


pytestmark = pytest.mark.parametrize("cli", ["file"], indirect=True)


@pytest.fixture
def here(cli: Cli, tmp_path: Path) -> Cli:
    """The console script in a directory whose flows.py holds the workflow's versions."""
    (tmp_path / "flows.py").write_text(FLOWS)
    return replace(cli, cwd=tmp_path)


def test_resume_hands_back_or_runs_here_and_show_tells_the_failure(here: Cli, run_id: str) -> None:
    """`runs resume` makes a failed run running for the workers; `runs show` tells its
    version and how it had failed; `--here --workflow` runs it to its end on the code
    of its version; a resume of the completed run is one line, exit 1."""
    with here.store() as store:
        failed_v1(store, run_id)
    done = here("runs", "resume", run_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(f"resumed run {run_id} at step 1")
    shown = here("runs", "show", run_id, "--no-state")
    assert "version" in shown.stdout and "resumed" in shown.stdout, shown.stdout
    assert "was failed at step 1: RuntimeError: b is broken" in shown.stdout

    with here.store() as store:
        failed_v1(store, run_id)
    ran = here("runs", "resume", run_id, "--here", "--workflow", "flows:WORKFLOWS")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith(f"run {run_id} completed")
    with here.store() as store:
        cp = store.load(run_id)
    assert (cp.status, cp.steps, len(cp.resumed)) == ("completed", ("a", "b"), 2)

    again = here("runs", "resume", run_id)
    assert again.returncode == 1
    assert again.stderr.strip() == (
        f"error: run {run_id!r} cannot be resumed: it has completed; a completed run is "
        "final. Fork it or start a new run; nothing was changed"
    )
    usage = here("runs", "resume", run_id, "--here")
    assert usage.returncode == 2 and "--workflow" in usage.stderr


def test_upgrade_checks_the_step_names_and_list_filters_by_version(here: Cli, run_id: str) -> None:
    """`runs upgrade --to 3` (a renamed completed step) names the difference, exit 1,
    nothing changed; `--to 9` names the versions the code has; `--to 2` moves it, and
    `runs list --version` finds it under 2, no longer under 1."""
    with here.store() as store:
        failed_v1(store, run_id)
    flows = ("--workflow", "flows:WORKFLOWS")
    bad = here("runs", "upgrade", run_id, "--to", "3", *flows)
    assert bad.returncode == 1
    assert "completed step 0 is 'a'; the new step list has 'A'" in bad.stderr
    missing = here("runs", "upgrade", run_id, "--to", "9", *flows)
    assert missing.returncode == 1
    assert "has no version '9' of workflow 'cli' (it has: '1', '2', '3')" in missing.stderr
    assert [r["run_id"] for r in here.json("runs", "list", "--version", "1")] == [run_id]

    moved = here("runs", "upgrade", run_id, "--to", "2", *flows)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.strip() == f"run {run_id} now runs on version 2 (was 1)"
    assert here.json("runs", "list", "--version", "1") == []
    [listed] = here.json("runs", "list", "--version", "2")
    assert (listed["run_id"], listed["version"], listed["status"]) == (run_id, "2", "failed")


def test_a_worker_refuses_a_version_its_code_does_not_have(here: Cli) -> None:
    """`worker --version 9` with code of versions 1 to 3: one line naming them, exit 1,
    before it looks at any run."""
    done = here("worker", "flows:WORKFLOWS", "--version", "9", "--once")
    assert done.returncode == 1
    assert (
        "--version 9: the workflows loaded have no such version (their versions: '1', '2', '3')"
        in (done.stderr)
    )
