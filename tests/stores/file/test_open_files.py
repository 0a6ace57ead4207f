"""The files a FileStore keeps open between saves (``stores.file.open_files``): a kept
run file is used only while it still is the file at its path, threads sharing a store
still exclude each other, a forked child never shares its parent's locks, and the
number of open files stays bounded."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.state import frozen_state, mark_stored
from durable_steps.stores.file import open_files, runfile
from durable_steps.stores.file import store as file_store


def advance(store: ds.FileStore, cp: ds.Checkpoint, **updates: Any) -> ds.Checkpoint:
    """One step's save as the runner makes it (a frozen state and its delta)."""
    state = cp.state
    if not hasattr(state, "updated"):
        state = frozen_state(state, cp.run_id, stored_as=cp.etag)
    state = state.updated(updates, cp.run_id)
    name = f"s{cp.step + 1}"
    saved = store.save(replace(cp, state=state, step=cp.step + 1, steps=(*cp.steps, name)))
    mark_stored(state, saved.etag)
    return replace(saved, state=state)


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="counts descriptors in /proc"
)


def test_a_steady_save_opens_no_file(store: ds.FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a run's file and its stripe's lock file are open, a save opens neither again:
    it only checks, by the path, that the kept file is still the run's file."""
    cp = advance(store, store.save(ds.Checkpoint("r", -1, {})), a=1)
    opened: list[str] = []
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any) -> int:
        opened.append(str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(file_store.os, "open", open_)
    for i in range(5):
        cp = advance(store, cp, a=i)
    assert opened == []
    monkeypatch.undo()
    loaded = ds.FileStore(store.path).load("r")
    assert loaded is not None
    assert (loaded.etag, loaded.state) == (cp.etag, {"a": 4})


def test_a_file_replaced_by_another_store_is_not_written_through_the_kept_one(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store (another process, for all it knows) compacts the run: a new file at
    the path. The next save goes to that file, not to the kept one, which nobody reads."""
    cp = advance(store, store.save(ds.Checkpoint("r", -1, {})), a=1)
    other = ds.FileStore(store.path)
    loaded = other.load("r")
    assert loaded is not None
    monkeypatch.setattr(runfile, "compact_at", lambda base: 0)  # its save: a new snapshot
    theirs = advance(other, loaded, b=2)
    monkeypatch.undo()
    with pytest.raises(ds.ConflictError):  # the kept file's end says cp.etag: not trusted
        advance(store, cp, c=3)
    ours = advance(store, theirs, c=3)
    fresh = ds.FileStore(store.path).load("r")
    assert fresh is not None
    assert (fresh.etag, fresh.state) == (ours.etag, {"a": 1, "b": 2, "c": 3})


def test_a_hard_link_to_the_old_file_does_not_fool_the_store(
    store: ds.FileStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With the run's file also linked elsewhere (a backup made with hard links), a
    compaction elsewhere leaves the kept file linked: still, the path names another
    file, and that is where the next save goes."""
    advance(store, store.save(ds.Checkpoint("r", -1, {})), a=1)
    os.link(store.file_for("r"), tmp_path / "backup.json")
    other = ds.FileStore(store.path)
    loaded = other.load("r")
    assert loaded is not None
    monkeypatch.setattr(runfile, "compact_at", lambda base: 0)
    theirs = advance(other, loaded, b=2)
    monkeypatch.undo()
    ours = advance(store, theirs, c=3)
    fresh = ds.FileStore(store.path).load("r")
    assert fresh is not None
    assert fresh.etag == ours.etag
    assert (tmp_path / "backup.json").stat().st_size < store.file_for("r").stat().st_size


def test_a_run_deleted_elsewhere_is_not_resurrected_through_the_kept_file(
    store: ds.FileStore,
) -> None:
    """Deleted by another store: a save on the old etag is a conflict (the run has no
    checkpoint), and a fresh start creates a new file that loads."""
    cp = advance(store, store.save(ds.Checkpoint("r", -1, {})), a=1)
    assert ds.FileStore(store.path).delete("r") is True
    with pytest.raises(ds.ConflictError, match="deleted"):
        advance(store, cp, b=2)
    assert ds.FileStore(store.path).load("r") is None
    store.save(ds.Checkpoint("r", -1, {"new": True}))
    fresh = ds.FileStore(store.path).load("r")
    assert fresh is not None
    assert dict(fresh.state) == {"new": True}


def test_threads_sharing_one_store_and_one_run_win_each_step_once(store: ds.FileStore) -> None:
    """flock does not exclude threads that share a descriptor: the stripe's mutex does.
    Eight threads race one run through one store; every step is won exactly once, and
    the file loads as the last win."""
    store.save(ds.Checkpoint("r", -1, {}))
    wins: list[int] = []
    go = threading.Barrier(8)

    def racer() -> None:
        go.wait()
        for _ in range(40):
            cp = store.load("r")
            assert cp is not None
            try:
                advance(store, cp, last=cp.step + 1)
            except ds.ConflictError:
                continue
            wins.append(cp.step + 1)

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = ds.FileStore(store.path).load("r")
    assert final is not None
    assert sorted(wins) == list(range(final.step + 1))
    assert final.state == {"last": final.step}


def test_threads_on_many_runs_of_one_stripe_set_keep_every_save(store: ds.FileStore) -> None:
    """Threads saving many runs at once (more stripes than are kept open, so kept files
    are closed and reopened while others write): every run ends with all its saves."""
    runs = [f"run-{i}" for i in range(3 * open_files.KEPT)]

    def worker(ids: list[str]) -> None:
        for run_id in ids:
            cp = store.save(ds.Checkpoint(run_id, -1, {}))
            for i in range(5):
                cp = advance(store, cp, i=i)

    threads = [threading.Thread(target=worker, args=(runs[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fresh = ds.FileStore(store.path)
    for run_id in runs:
        cp = fresh.load(run_id)
        assert cp is not None
        assert (cp.step, dict(cp.state)) == (4, {"i": 4})


@linux_only
def test_open_files_are_bounded_and_closed_with_the_store(tmp_path: Path) -> None:
    """Saving a hundred runs keeps at most two files per kept stripe open; close() (and
    leaving the store's with block) closes them all, and the store still works after."""
    before = open_fds()
    with ds.FileStore(tmp_path / "store") as store:
        for i in range(100):
            advance(store, store.save(ds.Checkpoint(f"r{i}", -1, {})), a=i)
        assert 0 < len(open_fds() - before) <= 2 * open_files.KEPT
    assert open_fds() - before == set()
    store.save(ds.Checkpoint("after", -1, {}))
    store.close()
    assert open_fds() - before == set()


@linux_only
def test_the_async_store_closes_its_files_as_the_sync_one_does(tmp_path: Path) -> None:
    """Leaving ``async with AsyncFileStore(...)`` after five runs closes every file the
    runs kept open (issue 30: its close() released nothing), and the store still works
    after close()."""

    async def main() -> None:
        before = open_fds()  # the event loop's own descriptors included
        async with ds.AsyncFileStore(tmp_path / "store") as store:
            for i in range(5):
                await ds.run_async(f"r{i}", [ds.Step("s", lambda state: {"a": 1})], store)
            assert open_fds() - before  # kept open between saves
        assert open_fds() - before == set()
        await store.save(ds.Checkpoint("after", -1, {}))
        await store.close()
        assert open_fds() - before == set()

    asyncio.run(main())


@linux_only
def test_a_store_dropped_without_close_closes_its_files(tmp_path: Path) -> None:
    before = open_fds()
    store = ds.FileStore(tmp_path / "store")
    advance(store, store.save(ds.Checkpoint("r", -1, {})), a=1)
    assert open_fds() - before
    del store
    assert open_fds() - before == set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_share_its_parents_locks(store: ds.FileStore) -> None:
    """flock belongs to the open file description, which a child shares with its parent.
    A child that holds the run's stripe (through the store it inherited) therefore makes
    the parent wait: it took its own lock, not the parent's."""
    cp = advance(store, store.save(ds.Checkpoint("r", -1, {})), a=1)  # files kept open
    target = store.file_for("r")
    held, release = os.pipe(), os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child
        status = 1
        try:
            with store._lock(target) as stripe:
                os.write(held[1], b"1" if stripe is not None else b"0")
                os.read(release[0], 1)
            status = 0
        finally:
            os._exit(status)
    os.close(held[1])  # a child that dies early ends the parent's read (EOF), not hangs it
    os.close(release[0])
    try:
        assert os.read(held[0], 1) == b"1"
        with store._lock(target, wait=False) as stripe:
            assert stripe is None  # busy: the child holds it
    finally:
        os.write(release[1], b"x")
        _, status = os.waitpid(pid, 0)
        os.close(held[0])
        os.close(release[1])
    assert os.waitstatus_to_exitcode(status) == 0
    with store._lock(target, wait=False) as stripe:
        assert stripe is not None
    cp = advance(store, cp, b=2)
    assert ds.FileStore(store.path).load("r") is not None


@pytest.mark.skipif(sys.platform == "win32", reason="closes the process's fd 0: POSIX only")
def test_descriptor_zero_is_a_file_like_any_other(tmp_path: Path) -> None:
    """With stdin closed, the first file a store opens (an existing lock file) is
    descriptor 0; it is kept and closed with the store like any other, never leaked."""
    import subprocess

    script = (
        "import os, sys\n"
        "os.close(0)\n"
        "import durable_steps as ds\n"
        "with ds.FileStore(sys.argv[1]) as first:  # creates the lock files\n"
        "    cp = first.save(ds.Checkpoint('r', -1, {}))\n"
        "with ds.FileStore(sys.argv[1]) as store:  # opens the existing ones\n"
        "    store.save(ds.Checkpoint('r', 0, {'a': 1}, etag=cp.etag, steps=('a',)))\n"
        "try:\n"
        "    os.fstat(0)\n"
        "except OSError:\n"
        "    print('closed')\n"
        "else:\n"
        "    print('leaked', os.readlink('/proc/self/fd/0') if os.path.isdir('/proc') else '')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "closed"
