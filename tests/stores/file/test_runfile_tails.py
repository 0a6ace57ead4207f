"""The end of a run file: the torn-tail rule at every byte offset, damage before the
tail, and a save or a listing that reads only the file's end."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import durable_steps as ds
from durable_steps.seam.state import frozen_state
from durable_steps.stores.file import fileio, runfile

from ...helpers.journals import Saved, advance, history, same

# -- the torn-tail rule ------------------------------------------------------------------


def truncations(saved: list[Saved], records: int) -> Iterator[tuple[int, Saved]]:
    """Every byte offset within the last ``records`` records, with the save it keeps."""
    start = saved[-records - 1].end
    for offset in range(start, saved[-1].end):
        yield offset, max((s for s in saved if s.end <= offset), key=lambda s: s.end)


def test_a_log_cut_at_any_byte_of_its_last_records_loads_the_last_whole_one(
    store: ds.FileStore, tmp_path: Path
) -> None:
    """Cut at every offset inside the last four records, the file loads as the last record
    that is whole: never an error, never a mix. The next save then cuts the torn bytes off
    and appends, and a fresh store loads that save."""
    saved = history(store)
    data = store.file_for("r").read_bytes()
    other = ds.FileStore(tmp_path / "other")
    target = other.file_for("r")
    checked = 0
    for offset, keep in truncations(saved, 4):
        target.write_bytes(data[:offset])
        assert same(other.load("r"), keep.checkpoint), offset
        checked += 1
    assert checked > 400
    # and a writer that finds a torn tail truncates it before appending
    torn = (saved[-2].end + saved[-1].end) // 2
    target.write_bytes(data[:torn])
    cp = other.load("r")
    assert cp is not None
    cp = advance(other, replace(cp, state=frozen_state(cp.state, "r", stored_as=cp.etag)), {"z": 1})
    assert same(ds.FileStore(other.path).load("r"), cp)
    assert target.read_bytes().startswith(data[: saved[-2].end] + runfile.RS)


@pytest.mark.parametrize(
    "tail", [b"\x00" * 700, b"\x1e", b"\x1eDSJ1 00000010 00000002\n{}", b"garbage\n" * 3]
)
def test_zeros_or_garbage_after_the_last_record_are_a_torn_tail(
    store: ds.FileStore, tail: bytes
) -> None:
    """Bytes after the last whole record that hold no record (zeros of a power cut, a
    partial header) are discarded by a load and cut off by the next save."""
    saved = history(store)
    target = store.file_for("r")
    with target.open("ab") as f:
        f.write(tail)
    fresh = ds.FileStore(store.path)
    cp = fresh.load("r")
    assert same(cp, saved[-1].checkpoint)
    assert cp is not None
    fresh.save(replace(cp, attempt=cp.attempt + 1, updated_at=None))
    data = target.read_bytes()
    new = runfile.record_at(data, saved[-1].end)
    assert new is not None
    assert new.end == len(data)  # the torn bytes are gone, the new record follows
    loaded = ds.FileStore(store.path).load("r")
    assert loaded is not None
    assert loaded.attempt == cp.attempt + 1


def test_damage_before_the_tail_is_corrupt_never_a_rollback(
    store: ds.FileStore, tmp_path: Path
) -> None:
    """A byte changed in any record but the last (HEAD, fields, state or TAIL) makes the
    run unreadable: CorruptCheckpointError naming where, not the state of an earlier save."""
    saved = history(store)
    data = store.file_for("r").read_bytes()
    other = ds.FileStore(tmp_path / "other")
    target = other.file_for("r")
    ends = [s.end for s in saved[:-1]]  # of every record but the last
    checked = 0
    for start, end in zip([0, *ends[:-1]], ends, strict=True):
        for offset in sorted({start, start + 5, start + 30, (start + end) // 2, end - 40, end - 2}):
            damaged = bytearray(data)
            damaged[offset] ^= 0x21
            target.write_bytes(bytes(damaged))
            with pytest.raises(ds.CorruptCheckpointError, match="unreadable"):
                other.load("r")
            checked += 1
    assert checked >= 6 * (len(saved) - 1) - 2
    zeroed = bytearray(data)
    zeroed[saved[1].end : saved[2].end] = bytes(saved[2].end - saved[1].end)
    target.write_bytes(bytes(zeroed))
    with pytest.raises(ds.CorruptCheckpointError, match="before records that are intact"):
        other.load("r")


def test_a_damaged_first_record_is_corrupt_even_alone(store: ds.FileStore) -> None:
    """The snapshot is written whole and renamed, so no crash can tear it: damage there is
    CorruptCheckpointError, also when it is the file's only record."""
    store.save(ds.Checkpoint("r", -1, {"v": 1}))
    target = store.file_for("r")
    data = bytearray(target.read_bytes())
    data[-3] ^= 1
    target.write_bytes(bytes(data))
    fresh = ds.FileStore(store.path)
    with pytest.raises(ds.CorruptCheckpointError, match="first record is damaged"):
        fresh.load("r")
    with pytest.raises(ds.CorruptCheckpointError):
        fresh.save(ds.Checkpoint("r", -1, {}))


def test_a_changed_byte_in_the_last_record_counts_as_torn(store: ds.FileStore) -> None:
    """The documented limit of the rule: damage to the last record cannot be told from a
    save torn by a power cut (whole length, bytes missing), so it loads as the save before."""
    saved = history(store)
    target = store.file_for("r")
    data = bytearray(target.read_bytes())
    data[saved[-1].end - 100] ^= 0x21
    target.write_bytes(bytes(data))
    assert same(ds.FileStore(store.path).load("r"), saved[-2].checkpoint)


def test_records_with_valid_checksums_but_bad_fields_are_corrupt(store: ds.FileStore) -> None:
    """A well-framed record that does not make sense (extends a key that is no list) is
    damage, whatever its checksums say."""
    store.save(ds.Checkpoint("r", -1, {"a": 1}))
    bad = runfile.encode(
        {"schema": 2, "run_id": "r", "status": "running", "step": -1, "attempt": 1},
        {"extend": {"a": [2]}},
        "f" * 24,
    )
    target = store.file_for("r")
    target.write_bytes(target.read_bytes() + bad + bad)
    with pytest.raises(ds.CorruptCheckpointError, match="extends 'a', which is not a list"):
        store.load("r")


# -- what a save and a listing read ----------------------------------------------------


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte counts the journal reads from files; reading a whole file fails the test."""
    counts: list[int] = []
    real_read_at = fileio.read_at

    def read_at(fd: int, offset: int, n: int) -> bytes:
        counts.append(n)
        return real_read_at(fd, offset, n)

    def read_all(fd: int) -> bytes:
        raise AssertionError("a whole file was read")

    monkeypatch.setattr(fileio, "read_at", read_at)
    monkeypatch.setattr(fileio, "read_all", read_all)
    return counts


def big_run(store: ds.FileStore) -> ds.Checkpoint:
    """A run with a 1 MB state: a snapshot, then one appended record."""
    cp = store.save(ds.Checkpoint("r", -1, {"blob": "x" * 1_000_000}))
    cp = replace(cp, state=frozen_state(cp.state, "r", stored_as=cp.etag))
    return advance(store, cp, {"a": 1}, step=0, steps=("a",), workflow="w")


def test_a_save_reads_the_files_end_not_the_file(
    store: ds.FileStore, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that never loaded the run checks the etag from the last record alone; one
    that wrote it last reads just the TAIL. Neither reads the whole file."""
    cp = big_run(store)
    reads.clear()
    cp = advance(store, cp, {"b": 2})  # the store that wrote it last
    assert sum(reads) < 200
    reads.clear()
    other = ds.FileStore(store.path)  # knows nothing of the run
    other.save(replace(cp, state=dict(cp.state), attempt=2, updated_at=None))
    assert sum(reads) < 5_000
    monkeypatch.undo()
    loaded = store.load("r")
    assert loaded is not None
    assert (loaded.attempt, loaded.state["b"]) == (2, 2)


def test_a_listing_reads_the_last_records_fields_not_the_state(
    store: ds.FileStore, reads: list[int]
) -> None:
    """With a 1 MB state, listing a journal reads its TAIL and its fields (a few hundred
    bytes), never the state."""
    big_run(store)
    reads.clear()
    (info,) = store.list_runs()
    assert (info.run_id, info.step_name, info.workflow) == ("r", "a", "w")
    assert info.size > 1_000_000
    assert sum(reads) < 2_000
