"""A FileStore head read (``load_head``: what a send, a signal and a cancel read) reads
the last record and where it says the step names and signals lie (``head_place``),
not the run file: a send reads as much after 400 consumed messages as after 1,
counted by the kernel (this process's bytes read, /proc/self/io). An earlier
version's log, whose records place nothing, still loads whole."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.stores.file import runfile
from durable_steps.stores.file.runfile_tail import read_head

MANY = 400


def _chat() -> ds.Workflow:
    def talk(state: Any) -> dict[str, Any]:
        while ds.receive("chat") != "bye":
            pass
        return {}

    return ds.Workflow("chat", [ds.Step("hello", lambda s: {}), ds.Step("talk", talk)])


def _consume(store: ds.FileStore, run_id: str, n: int) -> None:
    for i in range(n):
        ds.send_message(store, run_id, "chat", f"message {i}: " + "x" * 80)
    with contextlib.suppress(ds.RunWaiting):  # it took them all and waits for more
        _chat().run(run_id, store)


def _read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _send_reads(path: Path, run_id: str) -> int:
    """Bytes read by one send from a store that has not read the run (another process's)."""
    with ds.FileStore(path) as fresh:
        fresh.load_head("other")  # (the store's own files opened before counting)
        before = _read_bytes()
        ds.send_message(fresh, run_id, "chat", "measured: " + "y" * 80)
        return _read_bytes() - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts with /proc/self/io")
def test_a_send_reads_as_much_after_many_consumed_messages_as_after_one(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with ds.FileStore(path) as store:
        _chat().start("chat", store)
        _consume(store, "chat", 1)
        first = _send_reads(path, "chat")
        _consume(store, "chat", MANY)
        size = (path / "runs" if (path / "runs").is_dir() else path).stat().st_size
        later = _send_reads(path, "chat")
        _consume(store, "chat", 0)
        run_file = store.file_for("chat")
        assert run_file.stat().st_size > 20 * later, (run_file.stat().st_size, later, size)
        assert later <= 1.5 * first, (first, later)
        head = store.load_head("chat")
        assert head is not None and head.steps == ("hello",) and head.receiving == "chat"
        assert head == ds.FileStore(path).load_head("chat")  # the same, read anew


def test_the_head_read_from_its_place_is_the_head_replayed(tmp_path: Path) -> None:
    """Signals, step names and the mailbox as a full load gives them, after head-only
    saves, data saves and a compaction."""
    path = tmp_path / "store"
    waits = ds.Step("b", lambda s: {"got": ds.wait_for_signal("go")})
    flow = ds.Workflow("w", [ds.Step("a", lambda s: {"n": 1}), waits])
    with ds.FileStore(path) as store:
        with contextlib.suppress(ds.RunWaiting):
            flow.run("r", store)
        ds.send_message(store, "r", "t", {"x": 1})
        ds.send_signal(store, "r", "go", [1, 2])
        found = read_head(store.file_for("r"))
        assert found is not None, "the last record places the head"
        full = store.load("r")
        assert full is not None
        head = ds.FileStore(path).load_head("r")
        assert head is not None
        assert (head.steps, dict(head.signals), head.mailbox, head.etag) == (
            full.steps, dict(full.signals), full.mailbox, full.etag
        )  # fmt: skip
        assert flow.run("r", store) == {"n": 1, "got": [1, 2]}


def test_a_log_whose_records_place_nothing_is_read_whole(tmp_path: Path) -> None:
    """A record without ``hd`` (an earlier version's): the head read replays the file."""
    path = tmp_path / "store"
    with ds.FileStore(path) as store:
        ds.Workflow("w", [ds.Step("a", lambda s: {"n": 1})]).start("r", store)
        target = store.file_for("r")
    data = target.read_bytes()
    rec = runfile.record_at(data, 0)
    assert rec is not None and b'"hd":' in rec.meta
    meta = rec.meta.replace(rec.meta[: rec.meta.index(b",") + 1], b"{")  # "hd" leads
    assert b'"hd"' not in meta
    target.write_bytes(runfile.frame(meta, rec.body, rec.etag))
    assert read_head(target) is None
    with ds.FileStore(path) as store:
        head = store.load_head("r")
        assert head is not None and head.workflow == "w" and head.steps == ()
        ds.send_message(store, "r", "t", 1)  # saves on it, as before
        assert (cp := store.load("r")) is not None and cp.mailbox is not None
