"""`durable-steps runs ...` driven as a real process against the file store and
cosmos-local: list, show, signal, delete, prune."""

from __future__ import annotations

import io
import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import durable_steps as ds
from durable_steps.cli import runs as cli_runs
from durable_steps.cli.common import Progress

from ..helpers.clitools import Cli, Unreachable, wait_for_prompt


def _boom(state: Any) -> None:
    raise RuntimeError("boom [bold]x")


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


REFUND = ds.Workflow(
    "refund", [ds.Step("draft", lambda s: {"draft": 1}), ds.Step("approve", _approve)]
)


def seed(cli: Cli, run_id: str) -> None:
    """One run of each kind: completed, waiting, failed, leased by a live worker."""
    with cli.store() as store:
        ds.run(f"{run_id}-done", [ds.Step("a", lambda s: {"a": "β"})], store)
        with pytest.raises(ds.RunWaiting):
            REFUND.run(f"{run_id}-waiting", store)
        with pytest.raises(RuntimeError):
            ds.run(f"{run_id}-failed", [ds.Step("a", lambda s: {}), ds.Step("b", _boom)], store)
        store.save(
            ds.Checkpoint(
                f"{run_id}-leased",
                0,
                {},
                steps=("draft",),
                workflow="refund",
                owner="worker-7",
                lease_expires=time.time() + 600,
            )
        )


def mine(rows: list[dict[str, Any]], run_id: str) -> dict[str, dict[str, Any]]:
    return {
        r["run_id"].removeprefix(f"{run_id}-"): r for r in rows if r["run_id"].startswith(run_id)
    }


def test_list_shows_status_workflow_wait_and_lease(cli: Cli, run_id: str) -> None:
    """runs list (table and --json) shows each run's status, workflow, the signal a
    waiting run waits for, the live lease's holder, attempt and last step."""
    seed(cli, run_id)
    rows = mine(cli.json("runs", "list"), run_id)
    assert {k: r["status"] for k, r in rows.items()} == {
        "done": "completed",
        "waiting": "waiting",
        "failed": "failed",
        "leased": "running",
    }
    assert (rows["waiting"]["workflow"], rows["waiting"]["waiting_for"]) == ("refund", "approval")
    assert (rows["leased"]["owner"], rows["done"]["step_name"]) == ("worker-7", "a")
    assert all(r["attempt"] == 1 and r["etag"] for r in rows.values())
    table = cli("runs", "list")
    assert table.returncode == 0, table.stderr
    lines = {line.split()[0]: line for line in table.stdout.splitlines() if line.startswith(run_id)}
    waiting = lines[f"{run_id}-waiting"]
    assert re.search(r"waiting\s+refund\s+0 draft\s+1\s+signal approval", waiting)
    assert "leased by worker-7 until" in lines[f"{run_id}-leased"]
    assert re.search(r"failed\s+-\s+0 a\s+1\s", lines[f"{run_id}-failed"])
    assert table.stdout.splitlines()[-1] == "4 run(s)"


def test_a_run_no_attempt_has_started_shows_no_attempt(cli: Cli, run_id: str) -> None:
    """A run started for the workers and not run yet has attempt 0 stored: the table
    shows "-" there (the runner's first attempt is 1), --json the stored 0."""
    done = cli("runs", "start", run_id, "--workflow", "refund", "--new-workflow")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in cli("runs", "list").stdout.splitlines() if line.startswith(run_id)]
    assert re.search(r"running\s+refund\s+- \(none yet\)\s+-\s+-", line), line
    (row,) = [r for r in cli.json("runs", "list") if r["run_id"] == run_id]
    assert row["attempt"] == 0


def test_list_filters_and_limit(cli: Cli, run_id: str) -> None:
    """--status, --workflow and --limit select what the store lists; an unknown status
    is one line naming the accepted ones, exit 2."""
    seed(cli, run_id)
    assert set(mine(cli.json("runs", "list", "--status", "waiting"), run_id)) == {"waiting"}
    refund = cli.json("runs", "list", "--workflow", "refund")
    assert set(mine(refund, run_id)) == {"waiting", "leased"}
    both = cli.json("runs", "list", "--workflow", "refund", "--status", "running")
    assert set(mine(both, run_id)) == {"leased"}
    assert len(cli.json("runs", "list", "--limit", "3")) == 3
    assert cli.json("runs", "list", "--workflow", "nothing-like-it") == []
    limited = cli("runs", "list", "--limit", "2")
    assert "2 run(s) (--limit 2 reached: there may be more)" in limited.stdout
    bad = cli("runs", "list", "--status", "done")
    assert bad.returncode == 2
    assert "'done' is not one of 'running', 'waiting', 'failed', 'completed'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_show_has_status_lease_wait_signals_and_last_error(cli: Cli, run_id: str) -> None:
    """runs show displays status, workflow, lease, the waited-for signal, delivered
    signals and a failed run's last error; --json carries every field."""
    seed(cli, run_id)
    failed = cli("runs", "show", f"{run_id}-failed").stdout
    assert "status    failed" in failed
    assert "RuntimeError: boom [bold]x" in failed and "in step 1, attempt 1" in failed
    assert "held by worker-7 until" in cli("runs", "show", f"{run_id}-leased").stdout
    waiting = cli("runs", "show", f"{run_id}-waiting").stdout
    assert "waiting for signal approval" in waiting and "workflow  refund" in waiting
    assert "✓ 0 draft" in waiting and "next: step 1, attempt 2" in waiting  # attempt 1 suspended
    shown = cli.json("runs", "show", f"{run_id}-failed")
    assert shown["status"] == "failed"
    assert (shown["error"]["type"], shown["error"]["step"]) == ("RuntimeError", 1)
    done = cli.json("runs", "show", f"{run_id}-done")
    assert (done["state"], done["steps"], done["done"]) == ({"a": "β"}, ["a"], True)
    signalled = cli("runs", "signal", f"{run_id}-waiting", "approval", "--data", '{"ok": true}')
    assert signalled.returncode == 0, signalled.stderr
    after = cli("runs", "show", f"{run_id}-waiting").stdout
    assert 'signals delivered\n  approval: {"ok": true}' in after


def test_signal_resumes_a_waiting_run(cli: Cli, run_id: str, tmp_path: Path) -> None:
    """runs signal delivers the payload (from --data, a file or stdin); the next run
    resumes the waiting step with it."""
    with cli.store() as store:
        for n in range(3):
            with pytest.raises(ds.RunWaiting):
                REFUND.run(f"{run_id}-{n}", store)
    done = cli("runs", "signal", f"{run_id}-0", "approval", "--data", '{"ok": true, "by": "ann"}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"signal approval delivered to run {run_id}-0: it resumes at its next run "
        "(or with recover, or a worker)\n"
    )
    payload = tmp_path / "payload.json"
    payload.write_text('{"ok": false}')
    by_file = cli.json("runs", "signal", f"{run_id}-1", "approval", "--data-file", str(payload))
    assert (by_file["status"], by_file["signal"]) == ("running", "approval")
    by_stdin = cli("runs", "signal", f"{run_id}-2", "approval", "--data-file", "-", input="[1]")
    assert by_stdin.returncode == 0, by_stdin.stderr
    with cli.store() as store:
        decisions = [REFUND.run(f"{run_id}-{n}", store)["decision"] for n in range(3)]
    assert decisions == [{"ok": True, "by": "ann"}, {"ok": False}, [1]]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--data", '{"ok": true'], 2, "Invalid value for '--data': not JSON (Expecting"),
        (["--data", "1", "--data-file", "-"], 2, "give the payload once"),
        (["--data-file", "/no/such/file.json"], 2, "cannot read '/no/such/file.json'"),
        (["--data", "NaN"], 1, "error: "),
    ],
    ids=["bad-json", "both", "missing-file", "not-finite"],
)
def test_signal_refuses_bad_payloads_in_one_line(
    cli: Cli, run_id: str, args: list[str], code: int, says: str
) -> None:
    """A payload that is not JSON (or not valid state) is one line saying what is
    wrong, and nothing is delivered."""
    with cli.store() as store, pytest.raises(ds.RunWaiting):
        REFUND.run(run_id, store)
    done = cli("runs", "signal", run_id, "approval", *args)
    assert done.returncode == code
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    with cli.store() as store:
        assert store.load(run_id).signals == {}


def test_signal_to_a_missing_run_or_twice_is_one_line(cli: Cli, run_id: str) -> None:
    """RunNotFoundError and a second delivery (ConflictError) are one line, exit 1."""
    missing = cli("runs", "signal", run_id, "approval")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert f"run '{run_id}' does not exist" in missing.stderr
    with cli.store() as store, pytest.raises(ds.RunWaiting):
        REFUND.run(run_id, store)
    assert cli("runs", "signal", run_id, "approval").returncode == 0
    twice = cli("runs", "signal", run_id, "approval", "--data", "2")
    assert twice.returncode == 1
    assert "already has signal 'approval'" in twice.stderr
    assert len(twice.stderr.strip().splitlines()) == 1


def test_delete_asks_unless_yes(cli: Cli, run_id: str) -> None:
    """delete without --yes asks; 'n' keeps the run; --yes deletes it."""
    seed(cli, run_id)
    kept = cli("runs", "delete", f"{run_id}-done", input="n\n")
    assert kept.returncode == 1
    assert "aborted" in kept.stderr
    gone = cli("runs", "delete", f"{run_id}-done", "--yes")
    assert gone.returncode == 0, gone.stderr
    with cli.store() as store:
        assert store.load(f"{run_id}-done") is None
        assert store.load(f"{run_id}-failed") is not None


def test_delete_keeps_a_run_saved_while_it_asked(cli: Cli, run_id: str) -> None:
    """The run is deleted as it was shown in the question: a save meanwhile makes the
    delete fail in one line and the run stays."""
    seed(cli, run_id)
    proc = cli.popen("runs", "delete", f"{run_id}-failed")
    assert f"delete run '{run_id}-failed' (failed, 1 completed step(s))" in wait_for_prompt(proc)
    with cli.store() as store:
        cp = store.load(f"{run_id}-failed")
        newer = store.save(replace(cp, attempt=2, updated_at=None))
    _, err = proc.communicate("y\n", timeout=120)
    assert proc.returncode == 1
    assert "was not deleted: it changed since you read it" in err
    with cli.store() as store:
        assert store.load(f"{run_id}-failed").etag == newer.etag


def _old(cli: Cli, run_id: str) -> None:
    old = time.time() - 3 * 86400
    with cli.store() as store:
        store.save(ds.Checkpoint(f"{run_id}-old", 0, {}, steps=("a",), done=True, updated_at=old))
        store.save(ds.Checkpoint(f"{run_id}-old-open", 0, {}, steps=("a",), updated_at=old))
        store.save(ds.Checkpoint(f"{run_id}-new", 0, {}, steps=("a",), done=True))


def test_prune_deletes_only_old_completed_runs(cli: Cli, run_id: str) -> None:
    """prune --older-than deletes completed runs older than the age; unfinished only
    with --all; --dry-run lists them and deletes nothing."""
    _old(cli, run_id)
    dry = cli("runs", "prune", "--older-than", "2d", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"{run_id}-old  completed  updated ")
    assert len(dry.stdout.splitlines()) == 1
    assert "would delete 1 completed or cancelled run(s) last updated before" in dry.stderr
    dry_json = cli.json("runs", "prune", "--older-than", "2d", "--dry-run", "--all")
    assert set(dry_json["matched"]) == {f"{run_id}-old", f"{run_id}-old-open"}
    assert dry_json["deleted"] == []
    done = cli.json("runs", "prune", "--older-than", "2d", "--yes")
    assert (done["deleted"], done["kept"]) == ([f"{run_id}-old"], [])
    with cli.store() as store:
        assert store.load(f"{run_id}-old") is None
        assert store.load(f"{run_id}-old-open") is not None
        cli.json("runs", "prune", "--older-than", "2d", "--yes", "--all")
        assert store.load(f"{run_id}-old-open") is None
        assert store.load(f"{run_id}-new") is not None


def test_prune_keeps_a_run_resumed_after_it_was_listed(cli: Cli, run_id: str) -> None:
    """prune deletes each run with the etag it was listed with: a run resumed between
    the listing and the deletion is kept and reported, not deleted."""
    _old(cli, run_id)
    proc = cli.popen("runs", "prune", "--older-than", "2d", "--all", "--json")
    assert "delete 2 run(s) last updated before" in wait_for_prompt(proc)
    with cli.store() as store:
        cp = store.load(f"{run_id}-old-open")
        store.save(replace(cp, attempt=2, owner="worker-9", lease_expires=time.time() + 60))
    out, err = proc.communicate("y\n", timeout=120)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert (result["deleted"], result["kept"]) == ([f"{run_id}-old"], [f"{run_id}-old-open"])
    assert f"kept run {run_id}-old-open: it changed since it was listed" in err
    with cli.store() as store:
        assert store.load(f"{run_id}-old-open").owner == "worker-9"


def test_prune_refuses_a_bad_age_in_one_line(tmp_path: Path) -> None:
    """A malformed AGE is one line naming the option and the accepted form, exit 2."""
    done = Cli({"DURABLE_FILE_PATH": str(tmp_path)})("runs", "prune", "--older-than", "7x")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: Invalid value for '--older-than': '7x' is not an age; give a number and a "
        "unit (s, m, h, d, w), e.g. 30m, 12h, 7d or 2w; see 'durable-steps runs prune --help'"
    )


def test_unreadable_checkpoint_gets_a_row_and_details_below(tmp_path: Path) -> None:
    """One unreadable checkpoint is a row marked unreadable; the other rows stay whole
    and the error follows the table; the listed id is one runs delete accepts."""
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path)})
    with cli.store() as store:
        ds.run("fine", [ds.Step("a", lambda s: {"a": 1})], store)
        store.file_for("broken").write_bytes(b'{"trunc')
    table = cli("runs", "list")
    assert table.returncode == 0, table.stderr
    rows = [line for line in table.stdout.splitlines() if "  " in line]
    broken = next(r for r in rows if "unreadable" in r)
    fine = next(r for r in rows if r.startswith("fine "))
    assert re.search(r"^fine\s+completed\s+-\s+0 a\s+1\s+-\s+\d+ B\s+\d{4}-", fine)
    assert "2 run(s); 1 unreadable, details below" in table.stdout
    details = table.stdout.split("details below\n")[1]
    assert details.startswith("unreadable ") and "not JSON" in details
    listed = {r["status"]: r for r in cli.json("runs", "list")}
    assert "not JSON" in listed["unreadable"]["error"]
    assert broken.split()[0] == listed["unreadable"]["run_id"]
    gone = cli("runs", "delete", listed["unreadable"]["run_id"], "--yes")
    assert gone.returncode == 0, gone.stderr
    assert [r["run_id"] for r in cli.json("runs", "list")] == ["fine"]


def test_a_long_listing_is_one_table_printed_page_by_page(tmp_path: Path) -> None:
    """More runs than a page: one header, every run on its own line, columns aligned."""
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path)})
    with cli.store() as store:
        for n in range(cli_runs.PAGE * 2 + 30):
            store.save(ds.Checkpoint(f"run-{n:04}", 0, {}, steps=("a",)))
    lines = cli("runs", "list").stdout.splitlines()
    assert lines[0].startswith("runs in FileStore(")
    header = ["run id", "status", "workflow", "last step", "attempt", "waits for / lease"]
    assert re.split(r"\s\s+", lines[1].strip()) == [*header, "size", "updated"]
    rows = lines[2:-1]
    assert [r.split()[0] for r in rows] == [f"run-{n:04}" for n in range(230)]
    assert len({r.index("running") for r in rows}) == 1
    assert lines[-1] == "230 run(s)"


def test_list_prints_rows_as_the_store_yields_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """runs list streams: the first page is printed before the listing ends (here it
    breaks), so a huge store never becomes one table in memory."""
    with ds.FileStore(tmp_path) as store:
        for n in range(cli_runs.PAGE + 50):
            store.save(ds.Checkpoint(f"run-{n:04}", -1, {}))
    monkeypatch.setattr(cli_runs, "store_for", lambda spec, **_: Unreachable(tmp_path, listed=120))
    with pytest.raises(ds.StoreError):
        cli_runs.runs_list.callback(status=None, workflow=None, limit=None, as_json=False)  # type: ignore[misc]
    printed = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]]
    assert printed == [f"run-{n:04}" for n in range(cli_runs.PAGE)]


def test_progress_counts_long_work_outside_a_terminal() -> None:
    """Outside a terminal, long work reports a line every `every` items."""
    log = io.StringIO()
    with Progress("deleting", every=2, console=Console(file=log, width=100)) as progress:
        for _ in range(5):
            progress.advance()
    assert log.getvalue() == "deleting: 2 so far\ndeleting: 4 so far\n"


def test_a_corrupt_run_can_be_deleted_to_start_over(tmp_path: Path) -> None:
    """The way out that CorruptCheckpointError names works: runs delete RUN_ID removes
    an unreadable checkpoint (there is no etag to check it against)."""
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path)})
    store = ds.FileStore(tmp_path)
    store.file_for("broken").write_bytes(b'{"trunc')
    shown = cli("runs", "show", "broken")
    assert shown.returncode == 1
    assert "unreadable" in shown.stderr and len(shown.stderr.splitlines()) == 1
    asked = cli("runs", "delete", "broken", input="n\n")
    assert "delete run 'broken' (its checkpoint is unreadable)" in asked.stderr
    done = cli("runs", "delete", "broken", "--yes")
    assert done.returncode == 0, done.stderr
    assert store.load("broken") is None
