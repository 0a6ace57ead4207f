"""Damaged run files as a disk or a bad copy leaves them, and how FileStore reports them:
a load never passes damage off as a checkpoint, and a listing names a damaged journal by
its run id when its first record still tells it (so ``delete(run_id)`` starts it over),
else by its file name."""

from __future__ import annotations

from pathlib import Path

import pytest

import durable_steps as ds


def five_saves(store: ds.FileStore, run_id: str) -> Path:
    """A completed run of five steps: a journal of a snapshot and a record per save."""
    steps = [ds.Step(f"s{i}", lambda s, i=i: {f"k{i}": "x" * 100}) for i in range(5)]
    ds.run(run_id, steps, store)
    return store.file_for(run_id)


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_byte_flipped_mid_file_lists_as_before_and_fails_to_load(store: ds.FileStore) -> None:
    """The listing reads the last record only, so damage before it lists the run as it
    was (that is what 'runs verify' is for); a load checks every record and refuses."""
    target = five_saves(store, "order-7")
    _flip(target, target.stat().st_size // 2)
    (info,) = store.list_runs()
    assert (info.run_id, info.status, info.error) == ("order-7", "completed", None)
    with pytest.raises(ds.CorruptCheckpointError, match=r"run 'order-7' .* damaged at byte"):
        store.load("order-7")
    assert store.delete("order-7") is True
    assert list(store.list_runs()) == []


@pytest.mark.parametrize("cut", ["in-the-body", "in-the-tail"])
def test_a_journal_cut_in_its_first_record_is_listed_by_its_run_id(
    store: ds.FileStore, cut: str
) -> None:
    """A file cut short inside its first record (its only one here: a fresh snapshot) is
    unreadable; its fields still name the run, so it is listed under that run id, with
    an error naming the run and the file, and load and delete accept that id."""
    store.save(ds.Checkpoint("order-7", -1, {"text": "x" * 1000}))
    target = store.file_for("order-7")
    size = target.stat().st_size
    target.write_bytes(target.read_bytes()[: size // 2 if cut == "in-the-body" else size - 10])
    (info,) = store.list_runs()
    assert info.run_id == "order-7"
    assert info.error is not None
    assert "run 'order-7'" in info.error and str(target) in info.error
    assert "first record is damaged" in info.error
    with pytest.raises(ds.CorruptCheckpointError):
        store.load("order-7")
    with pytest.raises(ds.CorruptCheckpointError):
        store.run_info("order-7")
    assert store.delete("order-7") is True
    assert not target.exists()


def test_a_journal_whose_first_fields_are_damaged_is_listed_by_its_file_name(
    store: ds.FileStore,
) -> None:
    """When the first record's fields cannot tell the run (a byte flipped in its run id),
    the file's name is what the listing gives, and load and delete accept it."""
    store.save(ds.Checkpoint("order-7", -1, {}))
    target = store.file_for("order-7")
    data = target.read_bytes()
    _flip(target, data.index(b'"order-7"') + 3)
    (info,) = store.list_runs()
    assert info.run_id == target.name and info.error is not None
    with pytest.raises(ds.CorruptCheckpointError):
        store.load(target.name)
    assert store.delete(target.name) is True


def test_a_first_record_naming_another_run_does_not_claim_the_file(
    store: ds.FileStore,
) -> None:
    """A run id in a damaged file counts only if the file's name was made from it: a
    damaged copy of run a's file under run b's name is listed by its file name."""
    store.save(ds.Checkpoint("a", -1, {"text": "x" * 1000}))
    stray = store.file_for("b")
    stray.write_bytes(store.file_for("a").read_bytes()[:500])
    store.delete("a")
    (info,) = store.list_runs()
    assert info.run_id == stray.name and info.error is not None


def test_garbage_is_listed_by_its_file_name(store: ds.FileStore) -> None:
    """A file that is not a log at all (random bytes) cannot tell its run."""
    store.save(ds.Checkpoint("ok", -1, {}))
    junk = store.file_for("junk")
    junk.write_bytes(bytes(range(256)) * 4)
    infos = {i.run_id: i for i in store.list_runs()}
    assert infos["ok"].error is None
    assert infos[junk.name].error is not None
    assert store.delete(junk.name) is True
