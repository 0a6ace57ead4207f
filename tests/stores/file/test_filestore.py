"""FileStore's own promises: paths that stay inside, private files, temp files that do
not pile up, earlier versions' files, listings that never abort, cost per save."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import durable_steps as ds
from durable_steps.stores.file import runfile
from durable_steps.stores.file import store as file_store

IDS = ["...", "..x", "Run-A", "run-a", "ünïcødé-✓-検索", "x" * 255, "ü" * 255, "%2e%2e", "~root"]


def legacy_bytes(run_id: str, state: dict[str, object], etag: str = "e" * 24) -> bytes:
    """A checkpoint file as durable-steps 0.1 wrote it: one JSON document, etag first."""
    doc = {
        "etag": etag,
        "schema": 2,
        "run_id": run_id,
        "workflow": "w",
        "status": "running",
        "step": 0,
        "steps": ["a"],
        "attempt": 1,
        "first_attempt": 1,
        "owner": None,
        "lease_expires": None,
        "waiting_for": None,
        "error": None,
        "trace": None,
        "updated_at": 1700000000.0,
        "signals": {},
        "state": state,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


# -- paths ---------------------------------------------------------------------------------


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


def test_a_save_touches_only_its_own_run(store: ds.FileStore) -> None:
    """With 300 other runs stored, a save writes one file and leaves every other untouched
    (so its cost cannot grow with the number of runs, unlike one file of all runs)."""
    for i in range(300):
        store.save(ds.Checkpoint(f"other-{i}", -1, {"i": i}))
    runs = store.path / "runs"
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in runs.iterdir()}
    mine = store.save(ds.Checkpoint("mine", -1, {}))
    store.save(replace(mine, step=0, steps=("a",), state={"a": 1}))
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in runs.iterdir()}
    assert set(after) - set(before) == {store.file_for("mine").name}
    assert {k: after[k] for k in before} == before


def test_store_directory_is_created_with_parents(tmp_path: Path) -> None:
    """FileStore creates its directory tree on first use."""
    store = ds.FileStore(tmp_path / "a" / "b")
    store.save(ds.Checkpoint("r", -1, {}))
    assert (tmp_path / "a" / "b" / "runs").is_dir()
    assert os.listdir(tmp_path / "a" / "b" / "locks")


# -- privacy -------------------------------------------------------------------------------


@pytest.fixture(params=[0o022, 0o000, 0o277], ids=["umask-022", "umask-000", "umask-277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has ACLs, not POSIX modes")
def test_files_are_private_whatever_the_umask(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run files, temp files and lock files are 0600; the directories the store creates
    (its parents included) 0700, under any umask."""
    store = ds.FileStore(tmp_path / "new" / "store")
    temps: list[int] = []
    real_sync = file_store.platform.current.sync_file

    def sync_file(fd: int) -> None:  # the temp file, while it is written
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            temps.append(stat.S_IMODE(st.st_mode))
        real_sync(fd)

    monkeypatch.setattr(file_store.platform.current, "sync_file", sync_file)
    cp = store.save(ds.Checkpoint("r", -1, {"secret": "x"}))
    store.save(replace(cp, step=0, steps=("a",)))
    assert temps == [0o600]
    for d in (tmp_path / "new", store.path, store.path / "runs", store.path / "locks"):
        assert mode(d) == 0o700, d
    assert mode(store.file_for("r")) == 0o600
    locks = list((store.path / "locks").iterdir())
    assert locks
    assert all(mode(lock) == 0o600 for lock in locks)


# -- temp files ----------------------------------------------------------------------------


def test_temp_files_left_by_a_crash_are_ignored_then_removed(store: ds.FileStore) -> None:
    """Temp files of killed saves (this version's name and the earlier one's) are neither
    listed nor loaded, and a listing removes them."""
    store.save(ds.Checkpoint("r", 0, {"v": 1}, steps=("a",)))
    name = store.file_for("r").name
    runs = store.path / "runs"
    (runs / f".tmp-{name}").write_bytes(b"\x1eDSJ1 trunc")
    (runs / f".tmp-0123456789abcdef-{name}").write_bytes(b'{"trunc')
    loaded = store.load("r")
    assert loaded is not None
    assert loaded.state == {"v": 1}
    assert [i.run_id for i in store.list_runs()] == ["r"]
    assert sorted(p.name for p in runs.iterdir()) == [name]


def test_a_live_writers_temp_file_is_left_alone(store: ds.FileStore) -> None:
    """A temp file whose stripe lock is held (a writer busy with it, here in another
    process) survives a listing; once the lock is free, the next listing removes it."""
    store.save(ds.Checkpoint("r", -1, {}))
    target = store.file_for("r")
    tmp = target.with_name(f".tmp-{target.name}")
    tmp.write_bytes(b"being written")
    lock = store._stripes[int(target.stem[-2:], 16)]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys; from durable_steps.stores.file import platform; "
            "fd = os.open(sys.argv[1], os.O_RDWR); platform.current.lock(fd); "
            "print('locked', flush=True); sys.stdin.read(); "
            # Windows frees a dead process's byte-range locks only eventually: unlock first
            "platform.current.unlock(fd); os.close(fd)",
            lock,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        list(store.list_runs())
        assert tmp.exists()
    finally:
        holder.communicate("", timeout=30)
    list(store.list_runs())
    assert not tmp.exists()


def test_the_next_new_file_of_a_run_replaces_its_crashed_temp(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's temp file has one name, so a crashed compaction's leftover is overwritten
    (then renamed) by the run's next compaction: no pile-up, whatever the crashes."""
    monkeypatch.setattr(runfile, "compact_at", lambda base: 0)  # every save: a new snapshot
    cp = store.save(ds.Checkpoint("r", -1, {}))
    target = store.file_for("r")
    tmp = target.with_name(f".tmp-{target.name}")
    tmp.write_bytes(b"x" * 10_000)
    for i in range(5):
        cp = store.save(replace(cp, step=i, steps=(*cp.steps, f"s{i}"), state={"i": i}))
    assert not tmp.exists()
    assert [p.name for p in target.parent.iterdir()] == [target.name]


# -- earlier versions' files ---------------------------------------------------------------


def test_a_file_of_the_earlier_layout_loads_lists_and_migrates(store: ds.FileStore) -> None:
    """A whole-document file (as durable-steps 0.1 wrote them) loads and lists as it is;
    its next save turns it into a journal that loads the same checkpoint."""
    target = store.file_for("old")
    target.write_bytes(legacy_bytes("old", {"a": [1, 2]}))
    cp = store.load("old")
    assert cp is not None
    assert (cp.etag, cp.state, cp.steps, cp.workflow) == ("e" * 24, {"a": [1, 2]}, ("a",), "w")
    (info,) = store.list_runs()
    assert (info.run_id, info.etag, info.step_name, info.error) == ("old", "e" * 24, "a", None)
    saved = store.save(replace(cp, step=1, steps=("a", "b"), state={**cp.state, "b": 2}))
    assert runfile.is_log(target.read_bytes())
    again = store.load("old")
    assert again is not None
    assert (again.etag, again.state, again.steps) == (saved.etag, {"a": [1, 2], "b": 2}, ("a", "b"))


def test_an_earlier_layout_file_deletes_with_its_etag(store: ds.FileStore) -> None:
    """delete(etag=...) compares against an earlier version's file too."""
    store.file_for("old").write_bytes(legacy_bytes("old", {}))
    with pytest.raises(ds.ConflictError, match="changed since"):
        store.delete("old", etag="f" * 24)
    assert store.delete("old", etag="e" * 24) is True
    assert store.load("old") is None


def test_a_foreign_file_is_checked_in_full_and_never_overwritten(store: ds.FileStore) -> None:
    """A file in no known layout is reported as corrupt on save, never silently replaced."""
    store.file_for("r").write_bytes(b"garbage, not a checkpoint")
    with pytest.raises(ds.CorruptCheckpointError):
        store.save(ds.Checkpoint("r", -1, {}))
    assert store.file_for("r").read_bytes() == b"garbage, not a checkpoint"


# -- listing -------------------------------------------------------------------------------


def test_an_unreadable_file_is_listed_under_a_name_load_and_delete_accept(
    store: ds.FileStore,
) -> None:
    """A file whose run cannot be read is listed under its file name, with an error naming
    the file; load(name) raises CorruptCheckpointError naming it; delete(name) removes it."""
    store.save(ds.Checkpoint("ok", -1, {}))
    bad = store.file_for("bad")
    bad.write_bytes(b"\x00garbage")
    infos = {i.run_id: i for i in store.list_runs()}
    assert infos["ok"].error is None
    listed = infos[bad.name]
    assert listed.error is not None
    assert "not JSON" in listed.error
    assert str(bad) in listed.error
    with pytest.raises(ds.CorruptCheckpointError, match=str(bad)):
        store.load(listed.run_id)
    assert store.delete(listed.run_id) is True
    assert not bad.exists()
    assert [i.run_id for i in store.list_runs()] == ["ok"]


def test_a_file_naming_another_run_is_listed_and_deletable_by_its_name(
    store: ds.FileStore,
) -> None:
    """A readable file that does not name its own run (copied under another name) is
    reported, not attributed to a run, and can be deleted by its listed name."""
    store.save(ds.Checkpoint("a", -1, {}))
    stray = store.file_for("b")
    stray.write_bytes(store.file_for("a").read_bytes())
    (listed,) = [i for i in store.list_runs() if i.error]
    assert listed.run_id == stray.name
    assert "does not name its run" in (listed.error or "")
    with pytest.raises(ds.CorruptCheckpointError, match="belongs to run 'a'"):
        store.load("b")
    assert store.delete(stray.name) is True
    assert store.load("a") is not None


def test_a_healthy_file_is_not_addressed_by_its_file_name(store: ds.FileStore) -> None:
    """Only an unreadable file answers to its file name: the file of a healthy run is
    neither loaded nor deleted through it."""
    store.save(ds.Checkpoint("a", -1, {}))
    name = store.file_for("a").name
    assert store.load(name) is None
    assert store.delete(name) is False
    assert store.load("a") is not None


def test_listing_skips_directories_and_vanished_files(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory in runs/ is skipped, and so is a file deleted while the listing runs."""
    for r in ("a", "b", "c"):
        store.save(ds.Checkpoint(r, -1, {}))
    (store.path / "runs" / "zz-dir.json").mkdir()
    gone = str(store.file_for("b"))
    real_open = os.open

    def open_(path: object, flags: int, *args: object) -> int:
        if str(path) == gone:
            os.unlink(gone)  # deleted between the directory read and the open
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(file_store.os, "open", open_)
    assert sorted(i.run_id for i in store.list_runs()) == ["a", "c"]


def test_list_runs_is_a_generator_and_stops_at_the_limit(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results come one at a time: a limit of 2 opens (about) 2 files, not all 50."""
    for i in range(50):
        store.save(ds.Checkpoint(f"r{i:02}", -1, {}))
    opened: list[str] = []
    real_open = os.open

    def open_(path: object, flags: int, *args: object) -> int:
        if str(path).endswith(".json"):
            opened.append(str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(file_store.os, "open", open_)
    listing = store.list_runs(limit=2)
    assert opened == []
    assert [i.run_id for i in listing] == ["r00", "r01"]
    assert len(opened) == 2


def test_async_listing_streams_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AsyncFileStore.list_runs pulls the sync listing in chunks through worker threads
    (``seam.store.ThreadedStore``)."""
    import asyncio

    from durable_steps.seam import store as seam_store

    sync = ds.FileStore(tmp_path)
    for i in range(250):
        sync.save(ds.Checkpoint(f"r{i:03}", -1, {}))
    calls: list[int] = []
    real = asyncio.to_thread

    async def to_thread(fn: object, *args: object) -> object:
        calls.append(1)
        return await real(fn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(seam_store.asyncio, "to_thread", to_thread)

    async def first_ten() -> list[str]:
        out = []
        async for info in ds.AsyncFileStore(tmp_path).list_runs():
            out.append(info.run_id)
            if len(out) == 10:
                break
        return out

    assert asyncio.run(first_ten()) == [f"r{i:03}" for i in range(10)]
    assert len(calls) == 2  # the directory, then one chunk of 100 runs: not all 250

    async def everything() -> int:
        return len([i async for i in ds.AsyncFileStore(tmp_path).list_runs()])

    calls.clear()
    assert asyncio.run(everything()) == 250
    assert len(calls) == 1 + 3 + 1  # the directory, three chunks, the empty one that ends it
