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


def test_looks_offer_the_due_runs_from_different_places_and_read_no_more_than_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 free runs: each look starts at a random place of its bucket (several workers
    do not all offer the same run first), still offers each run once, and a look that
    stops after 5 runs has read 5 run files, not 100."""
    store = seeded(tmp_path / "s", leased=0, free=100)
    firsts = set()
    for _ in range(20):
        offered = [i.run_id for i in store.takeable(["w"], at=time.time())]
        assert sorted(offered) == sorted(f"free-{i}" for i in range(100))
        firsts.add(offered[0])
    assert len(firsts) > 1, firsts
    read = reads(monkeypatch)
    looked = store.takeable(["w"], at=time.time())
    taken = [next(looked) for _ in range(5)]
    looked.close()
    assert len(taken) == 5 and len(read) == 5


def test_a_dead_process_s_runs_are_due_at_once(tmp_path: Path) -> None:
    """A run leased for ten minutes by a process of this machine that has ended (its
    owner id names its pid) is offered by the next look, once the process's file in
    procs/ is found gone; a live owner's is not."""
    import subprocess
    import sys

    from durable_steps.seam.lease import default_owner

    store = ds.FileStore(tmp_path / "s")
    code = (
        "import sys, time, durable_steps as ds\n"
        "from durable_steps.seam.lease import default_owner\n"
        "s = ds.FileStore(sys.argv[1])\n"
        "s.save(ds.Checkpoint('orphan', -1, {}, workflow='w', owner=default_owner(),\n"
        "                     lease_expires=time.time() + 600))\n"
        "import os; os._exit(0)\n"  # (no atexit: as a SIGKILL leaves it)
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], check=True)
    t = time.time()
    store.save(ds.Checkpoint("alive", -1, {}, workflow="w", owner=default_owner(),
                             lease_expires=t + 600))  # fmt: skip
    assert [i.run_id for i in store.takeable(["w"], at=time.time())] == ["orphan"]
    assert [i.run_id for i in store.takeable(["w"], at=time.time())] == ["orphan"]
