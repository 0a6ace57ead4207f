"""FileStore when the file system fails: every OSError becomes a StoreError that names the
run, the path and what to do, and says truthfully what became of the save. A full and a
read-only file system are real (a small tmpfs) where mounting is allowed; the rest, and
errors a root user cannot meet for real (EACCES), are injected."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.state import frozen_state, mark_stored
from durable_steps.stores.file import fileio, platform, runfile
from durable_steps.stores.file import store as file_store


def first(store: ds.FileStore, run_id: str = "r", **state: Any) -> ds.Checkpoint:
    cp = store.save(ds.Checkpoint(run_id, 0, {"v": 1, **state}, steps=("a",)))
    return replace(cp, state=frozen_state(cp.state, run_id, stored_as=cp.etag))


def step(store: ds.FileStore, cp: ds.Checkpoint, **updates: Any) -> ds.Checkpoint:
    state = cp.state.updated(updates, cp.run_id)
    saved = store.save(replace(cp, state=state, step=cp.step + 1, steps=(*cp.steps, "x")))
    mark_stored(state, saved.etag)
    return replace(saved, state=state)


def fail(code: int, after: Any = None) -> Any:
    def broken(*args: Any, **kwargs: Any) -> Any:
        if after is not None:
            after(*args)
        raise OSError(code, os.strerror(code))

    return broken


def intact(store: ds.FileStore, cp: ds.Checkpoint) -> None:
    """The stored checkpoint is ``cp``, as a fresh store reads it, and no temp file is left."""
    loaded = ds.FileStore(store.path).load(cp.run_id)
    assert loaded is not None
    assert (loaded.etag, loaded.state) == (cp.etag, dict(cp.state))
    assert not [p for p in (store.path / "runs").iterdir() if p.name.startswith(".tmp-")]


def test_a_full_disk_mid_append_keeps_the_previous_checkpoint(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC after part of the record was written: StoreError (chained, no status code)
    saying the disk is full and the previous checkpoint is intact; the partial record is
    cut off, and the next save works."""
    cp = first(store)
    size = store.file_for("r").stat().st_size
    real_write, real_pwrite = os.write, os.pwrite

    def write(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    def pwrite(fd: int, data: Any, offset: int) -> int:
        real_pwrite(fd, bytes(data)[: len(data) // 2], offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "write", write)
    monkeypatch.setattr(fileio.os, "pwrite", pwrite)  # what appends, where there is one
    with pytest.raises(ds.StoreError, match="disk is full: free disk space") as caught:
        step(store, cp, w=2)
    monkeypatch.undo()
    error = caught.value
    assert isinstance(error.__cause__, OSError)
    assert error.status_code is None
    assert "run 'r'" in str(error)
    assert str(store.file_for("r")) in str(error)
    assert "previous checkpoint is intact" in str(error)
    assert store.file_for("r").stat().st_size == size
    intact(store, cp)
    assert step(store, cp, w=3).state["w"] == 3


def test_a_failed_fdatasync_removes_the_record(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EIO from fdatasync: the record that may not be on disk is cut off again, and the
    error says so; the previous checkpoint is what loads."""
    cp = first(store)
    monkeypatch.setattr(platform.current, "sync_data", fail(errno.EIO))
    with pytest.raises(ds.StoreError, match=r"I/O error.*previous checkpoint is intact"):
        step(store, cp, w=2)
    monkeypatch.undo()
    intact(store, cp)


def test_when_the_record_cannot_be_removed_the_error_says_the_outcome_is_unknown(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If cutting the unsynced record off fails too, the error does not claim that nothing
    was written: it says to load the run to see."""
    cp = first(store)
    monkeypatch.setattr(platform.current, "sync_data", fail(errno.EIO))
    monkeypatch.setattr(file_store.os, "ftruncate", fail(errno.EIO))
    with pytest.raises(ds.StoreError, match="may or may not be stored: load the run") as caught:
        step(store, cp, w=2)
    assert "intact" not in str(caught.value)


@pytest.mark.parametrize("where", ["write", "sync_file", "replace"])
def test_a_failed_new_file_leaves_no_temp_and_the_old_checkpoint(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A compaction (a new snapshot file) that fails while the temp file is written,
    synced or renamed leaves the previous checkpoint and no temp file; the same for a new
    run, which then has no checkpoint."""
    cp = first(store)
    monkeypatch.setattr(runfile, "compact_at", lambda base: 0)  # every save: a new snapshot
    broken = fail(errno.ENOSPC)
    if where == "write":
        monkeypatch.setattr(fileio.os, "write", broken)
        monkeypatch.setattr(fileio.os, "pwrite", broken)
    else:
        monkeypatch.setattr(platform.current, where, broken)
    with pytest.raises(ds.StoreError, match="disk is full"):
        step(store, cp, w=2)
    with pytest.raises(ds.StoreError, match="disk is full"):
        store.save(ds.Checkpoint("new", -1, {}))
    monkeypatch.undo()
    intact(store, cp)
    assert store.load("new") is None


def test_a_failed_directory_sync_says_the_checkpoint_was_written(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the rename, a failing directory fsync cannot undo the write: the error says
    the checkpoint was written but may not survive a power cut, and a load shows it."""
    monkeypatch.setattr(platform.current, "sync_dir", fail(errno.EIO))
    with pytest.raises(ds.StoreError, match="was written, but the directory could not be synced"):
        store.save(ds.Checkpoint("r", -1, {"v": 1}))
    monkeypatch.undo()
    loaded = store.load("r")
    assert loaded is not None
    assert loaded.state == {"v": 1}


def test_permission_errors_name_the_path_and_the_fix(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EACCES (which root never meets for real) on load, save and delete: StoreError naming
    the run, the file and the permissions to fix; nothing is deleted."""
    first(store)
    target = str(store.file_for("r"))
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any) -> int:
        if str(path) == target:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(file_store.os, "open", open_)
    for call in (lambda: store.load("r"), lambda: store.delete("r")):
        with pytest.raises(
            ds.StoreError, match="Permission denied; fix the permissions: give the user"
        ) as caught:
            call()
        assert target in str(caught.value)
        assert "run 'r'" in str(caught.value)
    (listed,) = store.list_runs()
    assert listed.run_id == Path(target).name
    assert listed.error is not None
    assert "fix the permissions" in listed.error
    monkeypatch.undo()
    assert store.load("r") is not None


def test_a_store_it_cannot_create_or_list_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EROFS while creating the store's directories, EACCES while reading runs/: each a
    StoreError naming the directory and what to do."""
    monkeypatch.setattr(file_store.os, "mkdir", fail(errno.EROFS))
    with pytest.raises(ds.StoreError, match="read-only: remount it") as caught:
        ds.FileStore(tmp_path / "ro")
    assert str(tmp_path / "ro") in str(caught.value)
    monkeypatch.undo()
    store = ds.FileStore(tmp_path / "ok")
    monkeypatch.setattr(file_store.os, "scandir", fail(errno.EACCES))
    with pytest.raises(ds.StoreError, match="could not list the runs"):
        store.list_runs()


def test_a_failed_delete_says_nothing_was_deleted(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EPERM on removing the file: StoreError; the run is still there."""
    first(store)
    monkeypatch.setattr(platform.current, "remove", fail(errno.EPERM))
    with pytest.raises(ds.StoreError, match="Nothing was deleted"):
        store.delete("r")
    monkeypatch.undo()
    assert store.load("r") is not None


# -- a real full, then read-only, file system ------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs of the test's own (root on Linux; elsewhere the test is skipped)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    tool = shutil.which("mount")
    done = (
        subprocess.run(
            [tool, "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
            capture_output=True,
            text=True,
            check=False,
        )
        if tool and sys.platform == "linux"
        else None
    )
    if done is None or done.returncode != 0:
        why = done.stderr.strip() if done else "no mount(8) on Linux here"
        pytest.skip(
            f"cannot mount a small tmpfs ({why}); run as root on Linux for a real full disk"
        )
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def fill(path: Path) -> int | None:
    """Write to ``path`` until the file system refuses; the errno it refused with."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        return exc.errno
    finally:
        os.close(fd)


def test_a_really_full_then_read_only_disk(small_disk: Path) -> None:
    """On a real 256 KiB file system filled up: an append, a new run and a compaction fail
    with StoreError 'disk is full', each keeping what was stored and leaving no temp file;
    with space freed, saves work again. Remounted read-only: StoreError 'read-only' on save,
    while load and list still work."""
    with ds.FileStore(small_disk / "store") as store:  # closed even if the test fails
        cp = first(store)
        filler = small_disk / "filler"
        assert fill(filler) == errno.ENOSPC
        with pytest.raises(ds.StoreError, match="disk is full") as caught:
            step(store, cp, big="x" * 20_000)
        assert isinstance(caught.value.__cause__, OSError)
        assert caught.value.__cause__.errno == errno.ENOSPC
        intact(store, cp)
        with pytest.raises(ds.StoreError, match="disk is full"):
            store.save(ds.Checkpoint("new", -1, {"big": "y" * 20_000}))
        assert store.load("new") is None
        intact(store, cp)
        filler.unlink()
        cp = step(store, cp, big="x" * 20_000)
        intact(store, cp)
        store.close()  # the files it keeps open between saves would keep the disk busy
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        with pytest.raises(ds.StoreError, match="read-only: remount it read-write"):
            step(store, cp, w=1)
        assert [i.run_id for i in store.list_runs()] == ["r"]
        loaded = store.load("r")
        assert loaded is not None
        assert loaded.etag == cp.etag
