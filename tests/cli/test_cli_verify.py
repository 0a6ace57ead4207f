"""`durable-steps runs verify` and `doctor --verify` as real processes: a damaged run
that `runs list` shows as healthy is found, named by its run id where the store can
tell it, with the command that starts it over; the exit status says whether any is
damaged. On real damaged files, and on cosmos-local items with garbage fields."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

import durable_steps as ds
from durable_steps.cli.common import Progress
from durable_steps.cli.verify import verify
from durable_steps.testing import CosmosEndpoint

from ..helpers.clitools import Cli


def _completed(store: Any, run_id: str, steps: int = 5) -> None:
    ds.run(
        run_id, [ds.Step(f"s{i}", lambda s, i=i: {f"k{i}": "x" * 100}) for i in range(steps)], store
    )


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _damaged(done: Any) -> dict[str, dict[str, Any]]:
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False
    return {d["run_id"]: d for d in report["damaged"]}


def test_verify_finds_damaged_files_that_list_as_healthy(tmp_path: Path) -> None:
    """A byte flipped mid-file lists as completed; verify loads every run and reports
    it, the run cut short in its first record by its run id, and a garbage file by its
    file name, each with the delete command, and what is lost; exit 1. Deleting them
    as told leaves a store that verifies clean (exit 0)."""
    path = tmp_path / "store"
    cli = Cli({"DURABLE_FILE_PATH": str(path)})
    with ds.FileStore(path) as store:
        for run_id in ("healthy", "flipped"):
            _completed(store, run_id)
        store.save(ds.Checkpoint("snapshot-only", -1, {"text": "y" * 1000}))
        flipped, cut = store.file_for("flipped"), store.file_for("snapshot-only")
        junk = store.file_for("junk")
    _flip(flipped, flipped.stat().st_size // 2)
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    junk.write_bytes(bytes(range(256)) * 4)

    listed = {r["run_id"]: r["status"] for r in cli.json("runs", "list")}
    assert listed["flipped"] == "completed"  # cheap listing: it reads the last record only
    assert listed["snapshot-only"] == "unreadable"  # (named by its run id, not its file)

    damaged = _damaged(cli("runs", "verify", "--json"))
    assert set(damaged) == {"flipped", "snapshot-only", junk.name}
    assert "damaged at byte" in damaged["flipped"]["error"]
    assert str(flipped) in damaged["flipped"]["error"]
    assert damaged["snapshot-only"]["delete"] == "durable-steps runs delete snapshot-only"

    text = cli("runs", "verify")
    assert text.returncode == 1
    assert "read 4 run(s) in FileStore" in text.stdout and "3 damaged, 1 whole" in text.stdout
    for name in ("flipped", "snapshot-only", junk.name):
        assert f"damaged {name}: " in text.stdout
        assert f"to start it over: durable-steps runs delete {name}\n" in text.stdout
    assert "restore it from a backup" in text.stdout
    assert "its completed steps run again" in text.stdout  # what a delete loses

    for name in damaged:
        deleted = cli("runs", "delete", name, "--yes")
        assert deleted.returncode == 0, deleted.stderr
        assert f"deleted run '{name}'" in deleted.stderr
    clean = cli("runs", "verify")
    assert clean.returncode == 0, clean.stdout
    assert "read 1 run(s) in FileStore" in clean.stdout and "none is damaged" in clean.stdout


def test_doctor_verify_runs_the_same_check(tmp_path: Path) -> None:
    """doctor alone says the store is ready without reading the runs (and says so);
    doctor --verify reads them, lists the damaged one and exits 1."""
    path = tmp_path / "store"
    cli = Cli({"DURABLE_FILE_PATH": str(path)})
    with ds.FileStore(path) as store:
        _completed(store, "flipped")
        target = store.file_for("flipped")
    _flip(target, target.stat().st_size // 2)
    quick = cli("doctor")
    assert quick.returncode == 0, quick.stdout
    assert "the store is ready (its runs were not read: --verify reads them)" in quick.stdout
    full = cli("doctor", "--verify")
    assert full.returncode == 1, full.stdout
    assert "✓ delete it" in full.stdout
    assert "✗ read every run whole: read 1 run(s)" in full.stdout
    assert "damaged flipped: " in full.stdout
    assert "the store is ready" not in full.stdout
    cli("runs", "delete", "flipped", "--yes")
    fixed = cli("doctor", "--verify")
    assert fixed.returncode == 0, fixed.stdout
    assert "✓ read every run whole: read 0 run(s)" in fixed.stdout


def test_verify_finds_cosmos_items_with_garbage_fields(cosmos_local: CosmosEndpoint) -> None:
    """On Cosmos DB: an item whose listed fields are garbage (listed unreadable) and one
    whose state is garbage (listed as healthy, fails to load) are both reported by id;
    'runs delete' removes them, and verify then passes."""
    cosmos = cosmos_local.fresh()
    try:
        cli = Cli(cosmos.env())
        with cosmos.store() as store:
            for run_id in ("healthy", "bad-fields", "bad-state"):
                _completed(store, run_id, steps=2)
        raw = cosmos.raw_container()
        item = raw.read_item("bad-fields", partition_key="bad-fields")
        raw.upsert_item({**item, "status": 42, "step": "seven"})
        item = raw.read_item("bad-state", partition_key="bad-state")
        raw.upsert_item({**item, "state": "not an object"})
        listed = {r["run_id"]: r["status"] for r in cli.json("runs", "list")}
        assert listed == {
            "healthy": "completed",
            "bad-fields": "unreadable",
            "bad-state": "completed",
        }

        damaged = _damaged(cli("runs", "verify", "--json"))
        assert set(damaged) == {"bad-fields", "bad-state"}
        assert "state is not a JSON object" in damaged["bad-state"]["error"]
        for run_id in damaged:
            assert cli("runs", "delete", run_id, "--yes").returncode == 0
        assert cli("runs", "verify").returncode == 0
    finally:
        cosmos.drop()


def test_verify_shows_its_progress(tmp_path: Path) -> None:
    """Long work shows it is alive: off a terminal, a line every ``every`` runs."""
    with ds.FileStore(tmp_path) as store:
        for n in range(5):
            store.save(ds.Checkpoint(f"r{n}", -1, {}))
        buffer = io.StringIO()
        with Progress("verifying runs", every=2, console=Console(file=buffer)) as progress:
            report = verify(store, progress)
    assert (report.runs, report.ok) == (5, True)
    assert buffer.getvalue().splitlines() == [
        "verifying runs: 2 so far",
        "verifying runs: 4 so far",
    ]
