"""`durable-steps replay` and `runs upgrade`'s check: real processes on the file store and
the local Cosmos DB server (the API is proven on every backend by
tests/runner/test_replay.py)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli

FLOWS = textwrap.dedent(
    """
    import durable_steps as ds

    def approve(state):
        facts = ds.call("lookup", str.upper, "a")
        return {"facts": facts, "ok": ds.wait_for_signal("ok")}

    def enrich(state):
        return {"enriched": ds.call("enrich", str.upper, "a")}

    A = ds.Workflow("review", [ds.Step("approve", approve)], version="A")
    B = ds.Workflow("review", [ds.Step("enrich", enrich)], version="B")
    WORKFLOWS = [A, B]
    NEW = [ds.Workflow("review", [ds.Step("approve", enrich)], version="A")]
    """
)


@pytest.fixture
def here(cli: Cli, tmp_path: Path) -> Cli:
    (tmp_path / "review_flows.py").write_text(FLOWS)
    return replace(cli, cwd=tmp_path)


def waiting_run(store: ds.Store, run_id: str) -> None:
    def approve(state: object) -> None:
        ds.call("lookup", str.upper, "a")
        ds.wait_for_signal("ok")

    with pytest.raises(ds.RunWaiting):
        ds.Workflow("review", [ds.Step("approve", approve)], version="A").run(run_id, store)


def test_replay_prints_a_table_and_exits_1_on_a_divergence(here: Cli, run_id: str) -> None:
    """The waiting run replays on its own code (exit 0, a table naming it); on code whose
    step asks for 'enrich' where it recorded 'lookup' it diverges: exit 1, and --json
    says where; --run of a run that does not exist cannot be checked (exit 0)."""
    with here.store() as store:
        waiting_run(store, run_id)
    same = here("replay", "review_flows:WORKFLOWS", "--status", "waiting")
    assert same.returncode == 0, same.stderr
    assert run_id in same.stdout and "replays" in same.stdout
    assert "1 replay, 0 diverge, 0 cannot be checked" in same.stdout

    new = here("replay", "review_flows:NEW", "--run", run_id, "--json")
    assert new.returncode == 1, new.stderr
    [r] = json.loads(new.stdout)
    assert (r["outcome"], r["where"], r["was"], r["now"]) == (
        "diverges", "lookup (0)", "call 'lookup'", "call 'enrich'",
    )  # fmt: skip
    missing = here("replay", "review_flows:WORKFLOWS", "--run", f"{run_id}-x")
    assert missing.returncode == 0 and "cannot be checked" in missing.stdout
    bad = here("replay", "review_flows:WORKFLOWS", "--status", "stuck")
    assert bad.returncode == 2 and "stuck: not a status" in bad.stderr
    helped = here("replay", "--help")
    assert "nothing is written" in helped.stdout and "diverges" in helped.stdout


def test_upgrade_refuses_a_move_that_diverges_and_drop_calls_moves_it(
    here: Cli, run_id: str
) -> None:
    """`runs upgrade --to B` of a run waiting in step 'approve' (B has 'enrich' there):
    exit 1, the reason on stderr, nothing changed; with --drop-calls it moves and says
    that its recorded call and wait were discarded."""
    with here.store() as store:
        waiting_run(store, run_id)
    flows = ("--workflow", "review_flows:WORKFLOWS")
    refused = here("runs", "upgrade", run_id, "--to", "B", *flows)
    assert refused.returncode == 1
    assert "diverges from its record on that code at its recorded lookup (0)" in refused.stderr
    assert "--drop-calls" in refused.stderr
    with here.store() as store:
        assert store.load(run_id).version == "A"
    moved = here("runs", "upgrade", run_id, "--to", "B", "--drop-calls", *flows)
    assert moved.returncode == 0, moved.stderr
    assert f"run {run_id} now runs on version B (was A)" in moved.stdout
    assert "2 recorded operation(s) of its running step 0 were discarded" in moved.stdout
    with here.store() as store:
        cp = store.load(run_id)
    assert (cp.version, cp.calls) == ("B", ())
