"""FileStore's own promises: atomic writes, paths that stay inside, cost per save."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

import durable_steps as ds
from durable_steps import _file

IDS = ["...", "..x", "Run-A", "run-a", "ünïcødé-✓-検索", "x" * 255, "ü" * 255, "%2e%2e", "~root"]


@pytest.fixture
def store(tmp_path: Path) -> ds.FileStore:
    return ds.FileStore(tmp_path / "store")


@pytest.mark.parametrize("run_id", IDS)
def test_every_run_id_maps_strictly_inside_the_store(store: ds.FileStore, run_id: str) -> None:
    """Any valid run id names a file directly in runs/, short enough for any file system."""
    path = store.file_for(run_id)
    assert path.resolve().parent == (store.path / "runs").resolve()
    assert len(path.name.encode()) <= 120
    assert not path.name.startswith(".")


def test_ids_differing_only_in_case_get_different_files(store: ds.FileStore) -> None:
    """Case-insensitive file systems (macOS, Windows) cannot merge two runs."""
    assert store.file_for("Run-A").name.lower() != store.file_for("run-a").name.lower()


def test_failed_replace_keeps_old_checkpoint_and_leaves_no_temp_file(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the atomic rename fails, the error surfaces, the old checkpoint loads, no temp remains."""
    v1 = store.save(ds.Checkpoint("r", 0, {"v": 1}, steps=("a",)))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_file.os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        store.save(replace(v1, step=1, steps=("a", "b"), state={"v": 2}))
    monkeypatch.undo()
    loaded = store.load("r")
    assert loaded is not None
    assert (loaded.state, loaded.etag) == ({"v": 1}, v1.etag)
    assert sorted(p.name for p in (store.path / "runs").iterdir()) == [store.file_for("r").name]


def test_failed_fsync_keeps_old_checkpoint(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If fsync of the new file fails, nothing is renamed over the old checkpoint."""
    v1 = store.save(ds.Checkpoint("r", 0, {"v": 1}, steps=("a",)))

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_file.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output"):
        store.save(replace(v1, step=1, steps=("a", "b"), state={"v": 2}))
    monkeypatch.undo()
    loaded = store.load("r")
    assert loaded is not None
    assert loaded.state == {"v": 1}
    assert [p.name for p in (store.path / "runs").iterdir()] == [store.file_for("r").name]


def test_a_save_touches_only_its_own_run(store: ds.FileStore) -> None:
    """With 2,000 other runs stored, a save writes one file and leaves every other untouched
    (so its cost cannot grow with the number of runs, unlike one file of all runs)."""
    for i in range(2000):
        store.save(ds.Checkpoint(f"other-{i}", -1, {"i": i}))
    runs = store.path / "runs"
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in runs.iterdir()}
    store.save(ds.Checkpoint("mine", -1, {}))
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in runs.iterdir()}
    assert set(after) - set(before) == {store.file_for("mine").name}
    assert {k: after[k] for k in before} == before


def test_temp_files_left_by_a_crash_are_ignored(store: ds.FileStore) -> None:
    """A temp file from a killed writer is neither listed nor loaded as a checkpoint."""
    store.save(ds.Checkpoint("r", 0, {"v": 1}, steps=("a",)))
    (store.path / "runs" / f".tmp-dead-{store.file_for('r').name}").write_bytes(b'{"trunc')
    assert [i.run_id for i in store.list_runs()] == ["r"]
    loaded = store.load("r")
    assert loaded is not None
    assert loaded.state == {"v": 1}


def test_unreadable_file_is_listed_with_its_error(store: ds.FileStore) -> None:
    """list_runs reports a corrupt file (with the reason) instead of failing the whole listing."""
    store.save(ds.Checkpoint("ok", -1, {}))
    store.file_for("bad").write_bytes(b"\x00garbage")
    infos = {i.run_id: i for i in store.list_runs()}
    assert infos["ok"].error is None
    (bad,) = [i for i in infos.values() if i.error]
    assert "not JSON" in (bad.error or "")


def test_store_directory_is_created_with_parents(tmp_path: Path) -> None:
    """FileStore creates its directory tree on first use."""
    store = ds.FileStore(tmp_path / "a" / "b")
    store.save(ds.Checkpoint("r", -1, {}))
    assert (tmp_path / "a" / "b" / "runs").is_dir()
    assert os.listdir(tmp_path / "a" / "b" / "locks")


def test_files_lead_with_their_etag(store: ds.FileStore) -> None:
    """A checkpoint file starts with its etag, so a save compares versions from the first
    bytes instead of parsing the whole previous state."""
    saved = store.save(ds.Checkpoint("r", 0, {"blob": "x" * 100_000}, steps=("a",)))
    head = store.file_for("r").read_bytes()[:40]
    assert head.startswith(b'{"etag":"' + (saved.etag or "").encode() + b'"')


def test_a_foreign_file_is_still_checked_in_full(store: ds.FileStore) -> None:
    """A file not in the store's layout (no leading etag) is decoded in full on save:
    garbage is reported as corrupt, never silently overwritten."""
    store.file_for("r").write_bytes(b"garbage, not a checkpoint")
    with pytest.raises(ds.CorruptCheckpointError):
        store.save(ds.Checkpoint("r", -1, {}))
    assert store.file_for("r").read_bytes() == b"garbage, not a checkpoint"
