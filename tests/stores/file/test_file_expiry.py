"""FileStore's retention pass reads only what became due (``stores/file/expiry.py``):
counted by wrappers around the calls that read the file system, on real files."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.stores.file import due_index

TTL = 3600


def ended(store: ds.FileStore, names: list[str]) -> None:
    for name in names:
        store.save(ds.Checkpoint(name, 0, {}, steps=("s",), status="completed"))


def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls that open or list files, and directory entries read, from now on."""
    seen: Counter[str] = Counter()
    scandir, open_fd = os.scandir, os.open

    def counting_scandir(path: Any = ".") -> Iterator[os.DirEntry[str]]:
        seen["scandir"] += 1
        entries = list(scandir(path))
        seen["entries"] += len(entries)
        return iter(entries)

    def counting_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        seen["open"] += 1
        return open_fd(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    monkeypatch.setattr(os, "open", counting_open)
    return seen


def pass_reads(store: ds.FileStore, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    with monkeypatch.context() as patch:
        seen = counted(patch)
        assert store.delete_expired(now=time.time() + TTL / 2) == 0
    return seen


def test_a_pass_reads_the_same_with_10_or_300_ended_runs_not_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ended runs not due yet cost a pass nothing: no run file opened, one listing of
    the index's bucket names (the earlier pass read every run file's end)."""
    store = ds.FileStore(tmp_path, finished_ttl=TTL)
    ended(store, [f"r{i}" for i in range(10)])
    few = pass_reads(store, monkeypatch)
    ended(store, [f"r{i}" for i in range(10, 300)])
    many = pass_reads(store, monkeypatch)
    assert few["open"] == many["open"] == 0
    assert few["scandir"] == many["scandir"] == 1
    buckets = len(os.listdir(tmp_path / "expiry"))  # one per 10 s of ends, and .complete
    assert few["entries"] <= many["entries"] == buckets < 10


def test_a_pass_deletes_what_is_due_and_keeps_what_was_resumed(tmp_path: Path) -> None:
    """Due entries are checked against the run: a run resumed since it ended stays (its
    entry goes with the save that resumed it), an ended one goes with its history."""
    store = ds.FileStore(tmp_path, finished_ttl=60)
    ended(store, ["a", "b"])
    running = store.load("b")
    assert running is not None
    store.save(ds.Checkpoint("b", 0, {}, steps=("s",), status="running", etag=running.etag))
    assert store.delete_expired(now=time.time() + 120) == 1
    assert store.load("a") is None and store.load("b") is not None
    assert not any((tmp_path / "expiry").rglob("a-*"))


def test_a_store_written_without_the_index_is_listed_once(tmp_path: Path) -> None:
    """Runs ended by a store opened without finished_ttl are not noted: its save of one
    marks the index incomplete (its reads and other saves do not), and the next pass
    rebuilds it from one full listing."""
    ended(ds.FileStore(tmp_path, finished_ttl=60), ["noted"])
    complete = tmp_path / "expiry" / ".complete"
    without = ds.FileStore(tmp_path)
    assert len(list(without.list_runs())) == 1
    without.save(ds.Checkpoint("running", -1, {}))
    assert complete.exists()
    ended(without, ["unnoted"])
    assert not complete.exists()
    store = ds.FileStore(tmp_path, finished_ttl=60)
    assert store.delete_expired(now=time.time() + 120) == 2
    assert [i.run_id for i in store.list_runs()] == ["running"] and complete.exists()


def test_an_entry_of_a_save_that_crashed_before_its_run_file_is_harmless(tmp_path: Path) -> None:
    """A save notes the entry before it writes the run's file: a crash between the two
    leaves an entry of a run that has not ended (made here as that save would have). A
    pass checks the file, keeps the run, and removes the entry."""
    store = ds.FileStore(tmp_path, finished_ttl=60)
    running = store.save(ds.Checkpoint("r", -1, {"n": 1}))
    bucket = due_index.bucket_of(time.time() + 60)
    (tmp_path / "expiry" / bucket).mkdir(exist_ok=True)
    (tmp_path / "expiry" / bucket / store.file_for("r").name).touch()
    assert store.delete_expired(now=time.time() + 120) == 0
    loaded = store.load("r")
    assert loaded is not None and loaded.etag == running.etag
    assert not any((tmp_path / "expiry").rglob("r-*"))
