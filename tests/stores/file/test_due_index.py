"""FileStore's index of runs to take (``stores/file/due_index``): a look reads the
files of the runs it could take, not of the runs live workers hold; an index that is
lost is rebuilt; an entry that went stale is only a hint."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.stores.file import listing


def seeded(path: Path, leased: int, free: int) -> ds.FileStore:
    store = ds.FileStore(path)
    t = time.time()
    for i in range(leased):
        store.save(
            ds.Checkpoint(f"leased-{i}", -1, {}, workflow="w", owner="live", lease_expires=t + 600)
        )
    for i in range(free):
        store.save(ds.Checkpoint(f"free-{i}", -1, {}, workflow="w"))
    return store


def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run files a look reads, from now on."""
    read: list[str] = []
    entry_of = listing.entry_of

    def counted(d: Any, path: Path) -> Any:
        read.append(path.name)
        return entry_of(d, path)

    monkeypatch.setattr(listing, "entry_of", counted)
    return read


def test_a_look_reads_only_the_runs_it_could_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 runs leased by a live worker and 3 free: the look reads the 3 files."""
    store = seeded(tmp_path / "s", leased=200, free=3)
    read = reads(monkeypatch)
    found = {i.run_id for i in store.takeable(["w"], at=time.time())}
    assert found == {"free-0", "free-1", "free-2"}
    assert len(read) == 3


def test_a_lost_index_is_rebuilt_by_the_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With due/ gone (deleted, or a store an earlier version wrote), the next look lists
    every run once and answers right; the look after reads only what it could take."""
    seeded(tmp_path / "s", leased=20, free=2).close()
    shutil.rmtree(tmp_path / "s" / "due")
    store = ds.FileStore(tmp_path / "s")
    assert {i.run_id for i in store.takeable(["w"], at=time.time())} == {"free-0", "free-1"}
    read = reads(monkeypatch)
    assert {i.run_id for i in store.takeable(["w"], at=time.time())} == {"free-0", "free-1"}
    assert len(read) == 2


def test_a_stale_entry_is_a_hint_the_run_file_decides(tmp_path: Path) -> None:
    """A run saved by another process (another FileStore on the same directory) leaves
    this store's entry behind: the look checks the run's file, answers by it, and moves
    the entry to where the run is due."""
    here, there = ds.FileStore(tmp_path / "s"), ds.FileStore(tmp_path / "s")
    cp = here.save(ds.Checkpoint("r", -1, {}, workflow="w"))  # due now
    there.save(replace(cp, owner="live", lease_expires=time.time() + 600))
    assert list(here.takeable(["w"], at=time.time())) == []
    stale = [p for p in (tmp_path / "s" / "due").glob("*/*") if p.parent.name == "0" * 12]
    assert stale == []  # moved: the next look does not read it again
