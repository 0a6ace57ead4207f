"""`durable-steps runs start`, `runs cancel`, and what `runs list` and `runs show` say of
timers, deadlines, cancellations and recorded calls -- a real process against the file
store and cosmos-local."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli


def test_start_creates_the_run_once_from_json_or_a_file(
    cli: Cli, run_id: str, tmp_path: Path
) -> None:
    """`runs start` creates the run for the workers with the input as its state; a second
    start starts nothing and says so; --input-file reads a file (or stdin)."""
    done = cli(
        "runs",
        "start",
        run_id,
        "--workflow",
        "fulfil",
        "--new-workflow",
        "--input",
        '{"sku": "A-7"}',
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip()
        == f"started run {run_id} of workflow fulfil: a worker running fulfil picks it up"
    )
    again = cli.json("runs", "start", run_id, "--workflow", "fulfil", "--input", "{}")
    assert again == {"run_id": run_id, "workflow": "fulfil", "created": False}
    with cli.store() as store:
        cp = store.load(run_id)
    assert (cp.status, cp.workflow, dict(cp.state), cp.owner) == (
        "running",
        "fulfil",
        {"sku": "A-7"},
        None,
    )
    order = tmp_path / "order.json"
    order.write_text('{"sku": "B-1", "n": 2}')
    done = cli("runs", "start", f"{run_id}-f", "--workflow", "fulfil", "--input-file", str(order))
    assert done.returncode == 0, done.stderr
    piped = cli(
        "runs", "start", f"{run_id}-p", "--workflow", "fulfil", "--input-file", "-", input="{}"
    )
    assert piped.returncode == 0, piped.stderr


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--input", "[1, 2]"], 2, "must be a JSON object"),
        (["--input", "{nope"], 2, "not JSON"),
        (["--input", "{}", "--input-file", "-"], 2, "give the input once"),
        ([], 2, "Missing option '--workflow'"),
    ],
)
def test_start_refuses_bad_input_in_one_line(
    cli: Cli, run_id: str, args: list[str], code: int, says: str
) -> None:
    workflow = [] if not args else ["--workflow", "fulfil", "--new-workflow"]
    done = cli("runs", "start", run_id, *workflow, *args)
    assert (done.returncode, len(done.stderr.strip().splitlines())) == (code, 1), done.stderr
    assert says in done.stderr


def test_start_of_another_workflows_run_is_refused(cli: Cli, run_id: str) -> None:
    cli("runs", "start", run_id, "--workflow", "fulfil", "--new-workflow")
    done = cli("runs", "start", run_id, "--workflow", "refund", "--new-workflow")
    assert done.returncode == 1
    assert "exists already, as workflow 'fulfil', not 'refund'" in done.stderr


def test_cancel_then_again_then_a_completed_run(cli: Cli, run_id: str) -> None:
    """`runs cancel` cancels with a reason `runs show` and `runs list` show; a second
    cancel changes nothing; a completed run is refused in one line."""
    cli("runs", "start", run_id, "--workflow", "fulfil", "--new-workflow")
    done = cli("runs", "cancel", run_id, "--reason", "customer withdrew")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"cancelled run {run_id}: it starts no other step or call"
    assert cli.json("runs", "cancel", run_id) == {"run_id": run_id, "cancelled": False}
    shown = cli("runs", "show", run_id)
    assert "cancelled: customer withdrew" in shown.stdout
    listed = cli.json("runs", "list", "--status", "cancelled")
    assert [r["run_id"] for r in listed] == [run_id]
    with cli.store() as store:
        ds.run(f"{run_id}-done", [ds.Step("a", lambda s: None)], store)
    refused = cli("runs", "cancel", f"{run_id}-done")
    assert refused.returncode == 1
    assert refused.stderr.strip().startswith("error: run") and "completed" in refused.stderr


def _nap(state: Any) -> None:
    ds.sleep(3600)


def _approve(state: Any) -> None:
    ds.wait_for_signal("approval", timeout=7200)


def test_list_and_show_say_what_a_waiting_run_waits_for(cli: Cli, run_id: str) -> None:
    """A sleeping run: 'sleeps until <time>'; a signal wait with a deadline: the signal
    and its deadline."""
    with cli.store() as store:
        with pytest.raises(ds.RunWaiting):
            ds.run(f"{run_id}-nap", [ds.Step("nap", _nap)], store)
        with pytest.raises(ds.RunWaiting):
            ds.run(f"{run_id}-gate", [ds.Step("gate", _approve)], store)
        nap_at = store.load(f"{run_id}-nap").wake_at
        gate_at = store.load(f"{run_id}-gate").wake_at
    day = time.strftime("%Y-%m-%d %H:%M", time.gmtime(nap_at))
    lines = {line.split()[0]: line for line in cli("runs", "list").stdout.splitlines()[2:]}
    assert f"sleeps until {day}" in lines[f"{run_id}-nap"]
    deadline = time.strftime("%Y-%m-%d %H:%M", time.gmtime(gate_at))
    assert f"signal approval (deadline {deadline}" in lines[f"{run_id}-gate"]
    listed = {r["run_id"]: r for r in cli.json("runs", "list", "--status", "waiting")}
    assert listed[f"{run_id}-nap"]["wake_at"] == nap_at
    shown = cli("runs", "show", f"{run_id}-nap").stdout
    assert f"asleep until {day}" in shown
    assert "sleep sleep  until" in shown  # the journal's entry for it


def test_show_lists_recorded_calls_never_their_contents(cli: Cli, run_id: str) -> None:
    """The running step's recorded calls: index, name, size, time -- not what the model
    or the tool returned, in the table or in --json."""
    secret = "the customer's card ends in 4242"

    def agent(state: Any) -> None:
        ds.call("llm", lambda: {"content": secret})
        ds.call("tool", lambda: "x" * 3000)
        raise RuntimeError("interrupted")

    with cli.store() as store, pytest.raises(RuntimeError):
        ds.run(run_id, [ds.Step("agent", agent)], store)
    shown = cli("runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "recorded calls of step 0" in shown.stdout
    assert "  0 llm  " in shown.stdout and "  1 tool  2.9 KiB" in shown.stdout
    assert secret not in shown.stdout
    data = cli.json("runs", "show", run_id)
    assert [(c["index"], c["name"], c["size"]) for c in data["calls"]] == [
        (0, "llm", len(json.dumps({"content": secret}))),
        (1, "tool", 3002),
    ]
    assert secret not in json.dumps(data)


def test_start_refuses_a_workflow_no_worker_would_take(
    cli: Cli, run_id: str, tmp_path: Path
) -> None:
    """A name no run in the store has is refused in one line naming the close match;
    once a run of it exists (or --workflow-from names it), the same name starts."""
    cli("runs", "start", f"{run_id}-0", "--workflow", "fulfil", "--new-workflow")
    done = cli("runs", "start", run_id, "--workflow", "fulfill")
    assert (done.returncode, len(done.stderr.strip().splitlines())) == (2, 1), done.stderr
    assert "unknown workflow 'fulfill'" in done.stderr
    assert "did you mean 'fulfil'?" in done.stderr
    assert cli.json("runs", "list", "--workflow", "fulfill") == []
    assert cli("runs", "start", run_id, "--workflow", "fulfil").returncode == 0
    (tmp_path / "shop.py").write_text(
        "import durable_steps as ds\nFLOWS = [ds.Workflow('refund', [])]\n"
    )
    target = ["--workflow-from", "shop:FLOWS"]
    cli.cwd = tmp_path  # where shop.py is importable
    done = cli("runs", "start", f"{run_id}-r", "--workflow", "refnd", *target)
    assert done.returncode == 2 and "did you mean 'refund'?" in done.stderr, done.stderr
    done = cli("runs", "start", f"{run_id}-r", "--workflow", "refund", *target)
    assert done.returncode == 0, done.stderr


def test_start_with_a_timeout_records_the_runs_deadline(cli: Cli, run_id: str) -> None:
    """`runs start --timeout 30` fixes the run's deadline 30 s from now."""
    began = time.time()
    done = cli("runs", "start", run_id, "--workflow", "fulfil", "--new-workflow", "--timeout", "30")
    assert done.returncode == 0, done.stderr
    deadline = ds.store_from_env(cli.env).load(run_id).deadline
    assert began + 30 <= deadline <= time.time() + 30
