"""Commands that read or change existing runs never create a store: run where there is
none (a wrong directory, a wrong DURABLE_FILE_PATH, a Cosmos DB container not there),
each exits 1 with one line that says where it looked, and leaves nothing behind. The
commands that may start a store (doctor, worker) create it and say so."""

from __future__ import annotations

from pathlib import Path

import pytest

import durable_steps as ds
from durable_steps.testing import CosmosEndpoint

from ..helpers.clitools import Cli, unique

READERS = [
    ["runs", "list"],
    ["runs", "list", "--json"],
    ["runs", "show", "order-7"],
    ["runs", "verify"],
    ["runs", "verify", "--json"],
    ["runs", "signal", "order-7", "approval", "--data", "true"],
    ["runs", "cancel", "order-7", "--reason", "wrong store"],
    ["runs", "delete", "order-7", "--yes"],
    ["runs", "prune", "--older-than", "7d", "--yes"],
    ["runs", "prune", "--older-than", "7d", "--dry-run"],
    ["migrate", "--to", "memory"],
]


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args", READERS, ids=lambda a: "-".join(a[:3]))
def test_in_a_directory_without_a_store_nothing_is_created(tmp_path: Path, args: list[str]) -> None:
    """In a directory with no .durable (DURABLE_FILE_PATH unset): exit 1, one line naming
    the absolute path it looked at and DURABLE_FILE_PATH, and no file created."""
    done = Cli({}, cwd=tmp_path)(*args)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith(f"error: there is no store at {tmp_path / '.durable'}: ")
    assert "DURABLE_FILE_PATH is not set, so it looked for .durable" in line
    assert _files(tmp_path) == []


def test_a_wrong_durable_file_path_is_named(tmp_path: Path) -> None:
    """DURABLE_FILE_PATH naming no store: the line quotes it, and nothing is created there;
    a relative one is shown as the absolute path it meant."""
    cli = Cli({"DURABLE_FILE_PATH": "stores/typo"}, cwd=tmp_path)
    done = cli("runs", "list")
    assert done.returncode == 1
    assert f"there is no store at {tmp_path / 'stores' / 'typo'}: " in done.stderr
    assert "DURABLE_FILE_PATH=stores/typo names no store" in done.stderr
    assert _files(tmp_path) == []
    (tmp_path / "stores" / "typo").mkdir(parents=True)  # a directory, but not a store
    assert cli("runs", "list").returncode == 1
    assert _files(tmp_path) == ["stores", "stores/typo"]


def test_migrate_from_a_missing_store_creates_neither_store(tmp_path: Path) -> None:
    """migrate --from file:PATH where there is none: one line naming it; the target is not
    created either (a copy of nothing is not reported as a success)."""
    done = Cli({}, cwd=tmp_path)("migrate", "--from", "file:old", "--to", "file:new")
    assert done.returncode == 1
    assert f"there is no store at {tmp_path / 'old'}: file:old names no store" in done.stderr
    assert _files(tmp_path) == []


def test_the_same_commands_work_once_a_run_made_the_store(tmp_path: Path) -> None:
    """After a run (the library creates the store), the same directory lists it."""
    ds.run("order-7", [ds.Step("a", lambda s: {"a": 1})], ds.FileStore(tmp_path / ".durable"))
    cli = Cli({}, cwd=tmp_path)
    assert [r["run_id"] for r in cli.json("runs", "list")] == ["order-7"]
    assert cli("runs", "verify").returncode == 0


def test_doctor_and_worker_create_the_store_and_say_where(tmp_path: Path) -> None:
    """doctor and the worker may come before the first run: they create the store, and
    say that they did and where (so that a wrong directory shows at once)."""
    cli = Cli({}, cwd=tmp_path)
    doctor = cli("doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert (
        f"✓ open the store: created it: there was no store at {tmp_path / '.durable'}"
        in doctor.stdout
    )
    assert cli("doctor").stdout.count("created it") == 0  # the second time it is there
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "flows.py").write_text("import durable_steps as ds\nW = ds.Workflow('w', [])\n")
    worker = Cli({}, cwd=elsewhere)("worker", "flows:W", "--once")  # (it imports from its cwd)
    assert worker.returncode == 0, worker.stderr
    assert f"worker: created it: there was no store at {elsewhere / '.durable'}" in worker.stderr
    assert (elsewhere / ".durable" / "runs").is_dir()


def test_with_create_if_missing_false_doctor_and_worker_refuse_to_create(tmp_path: Path) -> None:
    """DURABLE_CREATE_IF_MISSING=false (production): a worker started where there is no
    store exits 1 with one line naming the path and the variable, instead of working on
    a new, empty store; doctor says the same; nothing is created."""
    (tmp_path / "flows.py").write_text("import durable_steps as ds\nW = ds.Workflow('w', [])\n")
    cli = Cli({"DURABLE_CREATE_IF_MISSING": "false"}, cwd=tmp_path)
    worker = cli("worker", "flows:W", "--once")
    assert worker.returncode == 1, worker.stderr
    line = worker.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert f"error: there is no store at {tmp_path / '.durable'}, and " in line
    assert "DURABLE_CREATE_IF_MISSING=false forbids creating one" in line
    doctor = cli("doctor")
    assert doctor.returncode == 1
    assert "DURABLE_CREATE_IF_MISSING=false forbids creating one" in doctor.stdout + doctor.stderr
    assert _files(tmp_path) == ["flows.py"]


def test_a_missing_cosmos_container_is_not_created_by_reading(
    cosmos_local: CosmosEndpoint,
) -> None:
    """On Cosmos DB, a reading command does not apply COSMOS_CREATE_IF_MISSING: a database
    that is not there stays not there, and the line says which one it looked for."""
    database = unique("absent-db")
    missing = CosmosEndpoint(cosmos_local.endpoint, cosmos_local.key, database=database)
    cli = Cli({**missing.env(), "COSMOS_CREATE_IF_MISSING": "true"})
    for args in (["runs", "list"], ["runs", "verify"], ["runs", "delete", "x", "--yes"]):
        done = cli(*args)
        assert done.returncode == 1, done.stdout
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"there is no store at {cosmos_local.endpoint}, database '{database}'" in (
            done.stderr
        )
        assert "this command does not create it" in done.stderr
    with missing._client() as client:
        assert database not in [d["id"] for d in client.list_databases()]
