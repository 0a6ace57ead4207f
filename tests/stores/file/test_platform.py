"""FileStore's platform seam (platform) on Linux, macOS and Windows: the other systems'
paths run here by swapping ``platform.current`` (and, for Windows, a stand-in for
msvcrt on flock that answers like the real one: EACCES while another handle holds it)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

if sys.platform == "win32":  # pragma: no cover
    pytest.skip(
        "these run the Windows and macOS paths on POSIX; on Windows the whole suite runs "
        "the real one",
        allow_module_level=True,
    )

import fcntl  # after the skip: Windows has none

import durable_steps as ds
from durable_steps.stores.file import platform, runfile

from ...helpers.fake_msvcrt import fake_msvcrt


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    msvcrt: types.ModuleType = fake_msvcrt()
    monkeypatch.setitem(sys.modules, "msvcrt", msvcrt)
    monkeypatch.setattr(platform, "current", platform.Windows())

    def missing(*args: object) -> None:
        raise AssertionError("Windows has no fdatasync, fchmod or directory handles")

    # (raising=False: macOS has no fdatasync to replace either)
    monkeypatch.setattr(platform.os, "fdatasync", missing, raising=False)
    monkeypatch.setattr(platform.os, "fchmod", missing)
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any) -> int:
        if os.path.isdir(path):
            missing()
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", open_)
    return msvcrt


def a_life(store: ds.FileStore, run_id: str = "r") -> ds.Checkpoint:
    """Create, append, compact, conflict, list and load one run."""
    cp = store.save(ds.Checkpoint(run_id, -1, {"log": []}))
    for i in range(6):
        cp = store.save(
            replace(cp, step=i, steps=(*cp.steps, f"s{i}"), state={**cp.state, f"k{i}": i})
        )
    with pytest.raises(ds.ConflictError):
        store.save(replace(cp, etag="0" * 24))
    assert [i.run_id for i in store.list_runs()] == [run_id]
    loaded = ds.FileStore(store.path).load(run_id)
    assert loaded is not None
    assert (loaded.etag, loaded.state) == (cp.etag, cp.state)
    return cp


def test_windows_locks_through_msvcrt_and_skips_what_windows_lacks(
    tmp_path: Path, windows: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Windows path: one byte of the stripe file locked from position 0 and unlocked
    before close; fsync for data (no fdatasync), no directory sync, no chmod."""
    monkeypatch.setattr(runfile, "COMPACT_MIN", 600)  # compactions (renames) too
    store = ds.FileStore(tmp_path)
    cp = a_life(store)
    assert store.delete("r", etag=cp.etag) is True
    modes = [mode for mode, _, _ in windows.calls]
    assert modes.count(windows.LK_NBLCK) == modes.count(windows.LK_UNLCK) > 8
    assert {(pos, n) for _, pos, n in windows.calls} == {(0, 1)}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts descriptors in /proc")
def test_windows_keeps_no_file_open_between_saves(
    tmp_path: Path, windows: types.ModuleType
) -> None:
    """There a file held open could not be replaced or removed (a compaction by another
    process, deleting the store's directory): after each save nothing stays open."""
    before = set(os.listdir("/proc/self/fd"))
    store = ds.FileStore(tmp_path)
    a_life(store)
    assert set(os.listdir("/proc/self/fd")) - before == set()


def test_windows_locks_exclude_each_other(tmp_path: Path, windows: types.ModuleType) -> None:
    """Threads racing on one run through the polled msvcrt lock: every step is won once."""
    store = ds.FileStore(tmp_path)
    store.save(ds.Checkpoint("r", -1, {}))
    wins: list[int] = []

    def racer() -> None:
        for _ in range(30):
            cp = store.load("r")
            assert cp is not None
            nxt = cp.step + 1
            try:
                store.save(replace(cp, step=nxt, steps=(*cp.steps, f"s{nxt}"), updated_at=None))
            except ds.ConflictError:
                continue
            wins.append(nxt)

    threads = [threading.Thread(target=racer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.load("r")
    assert final is not None
    assert sorted(wins) == list(range(final.step + 1))


def test_windows_waits_for_a_held_lock(tmp_path: Path, windows: types.ModuleType) -> None:
    """A save while another handle holds the stripe lock polls until it is released."""
    store = ds.FileStore(tmp_path)
    cp = store.save(ds.Checkpoint("r", -1, {}))
    stripe = store._stripes[int(store.file_for("r").stem[-2:], 16)]
    holder = os.open(stripe, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    polled = threading.Event()
    real = windows.locking

    def locking(fd: int, mode: int, n: int) -> None:
        try:
            real(fd, mode, n)
        except OSError:
            polled.set()
            raise

    windows.locking = locking
    saver = threading.Thread(target=lambda: store.save(replace(cp, attempt=2, updated_at=None)))
    saver.start()
    assert polled.wait(30)
    assert (store.load("r") or cp).attempt == 1
    os.close(holder)
    saver.join(30)
    assert (store.load("r") or cp).attempt == 2


def test_windows_retries_a_replace_or_delete_that_meets_an_open_handle(
    tmp_path: Path, windows: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sharing violation (PermissionError: a reader has the file open) is retried; one
    that lasts is a StoreError after a bounded number of tries."""
    store = ds.FileStore(tmp_path)
    tries: list[str] = []
    real_replace, real_unlink = os.replace, os.unlink

    def busy(real: Any, times: int) -> Any:
        def call(*args: Any) -> None:
            tries.append(real.__name__)
            if len(tries) <= times:
                raise PermissionError(errno.EACCES, "being used by another process")
            real(*args)

        return call

    monkeypatch.setattr(platform.os, "replace", busy(real_replace, 3))
    cp = store.save(ds.Checkpoint("r", -1, {}))
    assert tries == ["replace"] * 4
    tries.clear()
    monkeypatch.setattr(platform.os, "unlink", busy(real_unlink, 2))
    assert store.delete("r", etag=cp.etag) is True
    assert tries == ["unlink"] * 4  # three tries of the run file, then its (absent) temp
    tries.clear()
    monkeypatch.setattr(platform.Windows, "attempts", 5)
    monkeypatch.setattr(platform.os, "replace", busy(real_replace, 10**6))
    with pytest.raises(ds.StoreError, match="fix the permissions"):
        store.save(ds.Checkpoint("s", -1, {}))
    assert tries.count("replace") == 5


def test_macos_syncs_with_f_fullfsync_and_falls_back_to_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The macOS path asks the drive to flush (F_FULLFSYNC) for appends, new files and
    directories; where the file system refuses, it uses fsync."""
    monkeypatch.setattr(platform, "current", platform.MacOS())
    calls: list[str] = []
    refuse = False

    def fcntl_(fd: int, cmd: int, *args: Any) -> int:
        assert cmd == getattr(fcntl, "F_FULLFSYNC", 51)
        calls.append("full")
        if refuse:
            raise OSError(errno.ENOTSUP, "Operation not supported")
        return 0

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        raise AssertionError("macOS has no fdatasync")

    monkeypatch.setattr(fcntl, "fcntl", fcntl_)
    monkeypatch.setattr(platform.os, "fsync", fsync)
    monkeypatch.setattr(platform.os, "fdatasync", fdatasync, raising=False)  # none on macOS
    store = ds.FileStore(tmp_path)
    calls.clear()
    cp = store.save(ds.Checkpoint("r", -1, {}))  # temp file, then its directory
    cp = store.save(replace(cp, attempt=2, updated_at=None))  # an append
    assert calls == ["full"] * 3
    calls.clear()
    refuse = True
    store.save(replace(cp, attempt=3, updated_at=None))
    assert calls == ["full", "fsync"]


def test_the_package_imports_and_stores_without_fcntl(tmp_path: Path) -> None:
    """As on Windows (no fcntl module): `import durable_steps` works, and FileStore works
    through the Windows path with the msvcrt stand-in."""
    script = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from fake_msvcrt import fake_msvcrt  # holds on to the real fcntl\n"
        "sys.modules['fcntl'] = None  # import fcntl now fails, as on Windows\n"
        "import durable_steps as ds\n"
        "from dataclasses import replace\n"
        "from durable_steps.stores.file import platform\n"
        "sys.modules['msvcrt'] = fake_msvcrt()\n"
        "platform.current = platform.Windows()\n"
        "store = ds.FileStore(sys.argv[1])\n"
        "cp = store.save(ds.Checkpoint('r', -1, {'a': 1}))\n"
        "cp = store.save(replace(cp, step=0, steps=('a',), state={'a': 2}))\n"
        "assert ds.FileStore(sys.argv[1]).load('r').state == {'a': 2}\n"
        "assert [i.run_id for i in store.list_runs()] == ['r']\n"
        "assert store.delete('r', etag=cp.etag)\n"
        "print('ok', sys.modules['fcntl'] is None, len(sys.modules['msvcrt'].calls) > 4)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), str(Path(__file__).parents[2] / "helpers")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "True", "True"]
