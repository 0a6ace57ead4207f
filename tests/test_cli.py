"""The console script, driven in a subprocess against the file store and cosmos-local."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

SCRIPT = str(Path(sys.executable).with_name("durable-steps"))


@dataclass
class Cli:
    env: dict[str, str]

    def __call__(
        self, *args: str, input: str | None = None, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS_", "DURABLE_"))}
        return subprocess.run(
            [SCRIPT, *args],
            env={**env, **self.env, **extra},
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def json(self, *args: str) -> Any:
        done = self(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def store(self) -> Any:
        return ds.store_from_env(self.env)


@pytest.fixture(params=["file", "cosmos-local"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Cli:
    if request.param == "file":
        return Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path / "store")})
    return Cli(request.getfixturevalue("cosmos_local").env())


def _seed(cli: Cli, run_id: str, done: bool = True) -> None:
    def b(state: Any) -> dict[str, str]:
        if not done:
            raise RuntimeError("stop here")
        return {"b": "β"}

    store = cli.store()
    with contextlib.suppress(RuntimeError):
        ds.run(run_id, [ds.Step("a", lambda s: {"a": 1}), ds.Step("b", b)], store)
    store.close()


def test_list_and_show_report_the_checkpoint(cli: Cli, run_id: str) -> None:
    """runs list --json has the run with its last step and status; show --json has the state."""
    _seed(cli, run_id)
    _seed(cli, f"{run_id}-half", done=False)
    listed = {r["run_id"]: r for r in cli.json("runs", "list")}
    mine = listed[run_id]
    assert (mine["step"], mine["step_name"], mine["status"]) == (1, "b", "completed")
    assert mine["size"] > 0 and mine["updated_at"] > time.time() - 600
    half = listed[f"{run_id}-half"]
    assert (half["step"], half["step_name"], half["status"]) == (0, "a", "in progress")
    shown = cli.json("runs", "show", run_id)
    assert (shown["state"], shown["steps"], shown["done"]) == ({"a": 1, "b": "β"}, ["a", "b"], True)
    assert shown["etag"]
    table = cli("runs", "list")
    assert table.returncode == 0
    assert run_id[:12] in table.stdout
    pretty = cli("runs", "show", run_id)
    assert "✓ 1 b" in pretty.stdout and '"β"' in pretty.stdout


def test_delete_asks_unless_yes(cli: Cli, run_id: str) -> None:
    """delete without --yes asks; 'n' keeps the run; --yes deletes it."""
    _seed(cli, run_id)
    kept = cli("runs", "delete", run_id, input="n\n")
    assert kept.returncode == 1
    assert "aborted" in kept.stderr
    assert cli.store().load(run_id) is not None
    gone = cli("runs", "delete", run_id, "--yes")
    assert gone.returncode == 0, gone.stderr
    assert cli.store().load(run_id) is None


def test_prune_deletes_only_old_completed_runs(cli: Cli, run_id: str) -> None:
    """prune --older-than deletes completed runs older than the age; unfinished only with --all."""
    store = cli.store()
    old = time.time() - 3 * 86400
    store.save(ds.Checkpoint(f"{run_id}-old", 0, {}, steps=("a",), done=True, updated_at=old))
    store.save(ds.Checkpoint(f"{run_id}-old-open", 0, {}, steps=("a",), updated_at=old))
    store.save(ds.Checkpoint(f"{run_id}-new", 0, {}, steps=("a",), done=True))
    dry = cli.json("runs", "prune", "--older-than", "2d", "--dry-run")
    assert [r for r in dry["matched"] if r.startswith(run_id)] == [f"{run_id}-old"]
    assert dry["deleted"] == []
    done = cli.json("runs", "prune", "--older-than", "2d", "--yes")
    assert f"{run_id}-old" in done["deleted"]
    assert store.load(f"{run_id}-old") is None
    assert store.load(f"{run_id}-old-open") is not None
    cli.json("runs", "prune", "--older-than", "2d", "--yes", "--all")
    assert store.load(f"{run_id}-old-open") is None
    assert store.load(f"{run_id}-new") is not None


def test_doctor_checks_write_and_read_back(cli: Cli) -> None:
    """doctor passes on a working store and leaves no probe behind."""
    before = {r["run_id"] for r in cli.json("runs", "list")}
    done = cli("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "read it back" in done.stdout and "the store is ready" in done.stdout
    assert {r["run_id"] for r in cli.json("runs", "list")} == before


def test_migrate_copies_runs_intact(cli: Cli, run_id: str, tmp_path: Path) -> None:
    """migrate --to file:PATH copies steps, state and age; a second migrate finds them there."""
    _seed(cli, run_id)
    src = cli.store().load(run_id)
    target = tmp_path / "copy"
    first = cli.json("migrate", "--to", f"file:{target}")
    assert run_id in first["copied"]
    copy = ds.FileStore(target).load(run_id)
    assert copy is not None and src is not None
    assert (copy.state, copy.steps, copy.done, copy.updated_at) == (
        src.state,
        src.steps,
        src.done,
        src.updated_at,
    )
    again = cli.json("migrate", "--to", f"file:{target}")
    assert run_id in again["identical"]
    assert again["copied"] == []


def test_migrate_from_files_to_cosmos(cosmos_local: Any, run_id: str, tmp_path: Path) -> None:
    """Laptop files to Cosmos DB: --from file:PATH --to cosmos."""
    files = ds.FileStore(tmp_path / "laptop")
    ds.run(run_id, [ds.Step("a", lambda s: {"x": 1})], files)
    cli = Cli({k: v for k, v in cosmos_local.env().items() if k != "DURABLE_STORE"})
    out = cli.json("migrate", "--from", f"file:{tmp_path / 'laptop'}", "--to", "cosmos")
    assert out["copied"] == [run_id]
    there = ds.store_from_env(cosmos_local.env()).load(run_id)
    assert there is not None
    assert there.state == {"x": 1}


@pytest.mark.parametrize(
    ("args", "extra", "says"),
    [
        (["runs", "show", "a/b"], {}, "invalid run id 'a/b'"),
        (["runs", "show", "no-such-run"], {}, "has no checkpoint"),
        (["runs", "list"], {"DURABLE_STORE": "redis"}, "DURABLE_STORE='redis' is not a backend"),
        (
            ["runs", "list"],
            {
                "DURABLE_STORE": "cosmos",
                "COSMOS_ENDPOINT": "http://127.0.0.1:9/",
                "COSMOS_KEY": "a2V5",
            },
            "cannot reach Cosmos DB",
        ),
        (["migrate", "--to", "s3://bucket"], {}, "is not a store"),
    ],
    ids=["bad-run-id", "missing-run", "bad-backend", "unreachable", "bad-target"],
)
def test_errors_are_one_clear_line_and_nonzero(
    tmp_path: Path, args: list[str], extra: dict[str, str], says: str
) -> None:
    """Errors exit 1 with one line on stderr and no traceback (unless --debug)."""
    cli = Cli({"DURABLE_FILE_PATH": str(tmp_path), **extra})
    done = cli(*args)
    assert done.returncode == 1
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    debug = cli("--debug", *args)
    assert "Traceback" in debug.stderr


def test_doctor_names_what_to_fix(tmp_path: Path) -> None:
    """doctor on a broken configuration exits 1 and says which variable to set."""
    done = Cli({"DURABLE_STORE": "cosmos"})("doctor")
    assert done.returncode == 1
    assert "✗ configuration" in done.stdout and "COSMOS_ENDPOINT" in done.stdout


def test_demo_crashes_then_resumes_only_the_rest(cli: Cli, tmp_path: Path) -> None:
    """The demo's first attempt is SIGKILLed in summarise; the second skips the two
    checkpointed steps and runs only summarise (attempt 2) and write."""
    extra = ["--dir", str(tmp_path / "demo")] if cli.env["DURABLE_STORE"] == "file" else []
    done = cli("demo", "--step-seconds", "0.2", "--json", *extra)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [(e["event"], e.get("step")) for e in events]
    killed = kinds.index(("killed", "summarise"))
    first, second = kinds[:killed], kinds[killed + 1 :]
    assert first == [
        ("start", "retrieve"),
        ("done", "retrieve"),
        ("start", "call_tool"),
        ("done", "call_tool"),
        ("start", "summarise"),
    ]
    assert events[killed]["checkpointed"] == ["retrieve", "call_tool"]
    assert second == [
        ("skip", "retrieve"),
        ("skip", "call_tool"),
        ("start", "summarise"),
        ("done", "summarise"),
        ("start", "write"),
        ("done", "write"),
        ("finished", None),
    ]
    retry = [e for e in events if e["event"] == "start" and e["step"] == "summarise"]
    assert [e["attempt"] for e in retry] == [1, 2]
    assert retry[0]["key"] == retry[1]["key"]


def test_demo_reads_well_for_a_newcomer(tmp_path: Path) -> None:
    """The human output tells the story: the kill, what was skipped, the time saved."""
    done = Cli({})(
        "demo", "--step-seconds", "0.1", "--crash-at", "write", "--dir", str(tmp_path / "d")
    )
    assert done.returncode == 0, done.stderr
    for text in (
        "killed (SIGKILL)",
        "skipped: checkpointed",
        "finished work",
        "idempotency_key",
        "durable-steps runs show",
    ):
        assert text in done.stdout, text
    assert Cli({})("demo", "--crash-at", "nope").returncode == 2


def test_a_corrupt_run_can_be_deleted_to_start_over(tmp_path: Path) -> None:
    """The way out that CorruptCheckpointError names works: runs delete removes it."""
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path)})
    store = ds.FileStore(tmp_path)
    store.file_for("broken").write_bytes(b'{"trunc')
    assert "unreadable" in cli("runs", "show", "broken").stderr
    done = cli("runs", "delete", "broken", "--yes")
    assert done.returncode == 0, done.stderr
    assert store.load("broken") is None
