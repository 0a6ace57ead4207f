"""The fleet overview's edge cases (``durable_steps.fleet``), on a real MemoryStore and
a FileStore: owners given explicitly, expired leases, a registered process that died,
queue records of an older worker (no limits kept), schedule records whose cron cannot
be read; and how owner ids read (``owner_label``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import durable_steps as ds
from durable_steps.seam.lease import _here, default_owner
from durable_steps.workers import overview
from durable_steps.workers.queues import record_id
from durable_steps.workers.schedules import RECORD_PREFIX


def _running(run_id: str, owner: str | None, expires: float | None, **kw: object) -> ds.Checkpoint:
    return ds.Checkpoint(
        run_id, -1, {}, status="running", owner=owner, lease_expires=expires,
        workflow="w", **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_owner_labels() -> None:
    host, _ = _here()
    assert ds.owner_label(default_owner()) == f"{host} pid {os.getpid()}"
    for given in ("worker-a", "ds1:a:b:notapid:c:d", "ds1:too:few", ""):
        assert ds.owner_label(given) == given


def test_explicit_owners_expired_leases_and_dead_processes() -> None:
    now = time.time()
    store = ds.MemoryStore()
    store.save(_running("a", "worker-a", now + 60, version="v2"))
    store.save(_running("b", "worker-b", now - 1))  # its lease expired
    store.save(_running("c", None, None))  # not taken yet: no worker
    mine = default_owner()
    store.save(_running("d", mine, now + 60))
    got = {w.name: w for w in ds.fleet(store, now=now, parts=["workers"]).workers}
    a, b = got["worker-a"], got["worker-b"]
    assert (a.alive, a.runs, a.host, a.pid, a.versions) == (True, ("a",), None, None, ("v2",))
    assert (b.alive, b.runs, b.dead_leases) == (False, (), ("b",))
    me = got[ds.owner_label(mine)]
    assert me.alive and me.pid == os.getpid() and me.lease_expires == pytest.approx(now + 60)
    assert set(got) == {"worker-a", "worker-b", ds.owner_label(mine)}


def test_a_registered_process_that_died_is_dead_and_an_idle_one_live() -> None:
    host, boot = _here()
    gone = f"ds1:{host}:{boot}:999999999:12345"  # no such pid on this machine
    alive = default_owner().rsplit(":", 1)[0]
    got = overview.workers([], [gone, alive], time.time())
    by_pid = {w.pid: w for w in got}
    assert not by_pid[999999999].alive and by_pid[999999999].registered
    assert by_pid[os.getpid()].alive and by_pid[os.getpid()].runs == ()


def test_a_file_store_lists_the_processes_registered_with_it(tmp_path: Path) -> None:
    with ds.FileStore(tmp_path / "s") as store:
        assert store.processes() == []
        ds.run("one", [ds.Step("a", lambda s: {"v": 1})], store)
        mine = default_owner().rsplit(":", 1)[0]
        assert mine in (store.processes() or [])
    assert ds.MemoryStore().processes() is None  # no registry: leases only


def test_a_queue_record_without_limits_and_a_partition() -> None:
    now = time.time()
    store = ds.MemoryStore()
    store.save(_running("q1", None, None, queue="mail", partition="acme"))
    store.save(_running("q2", "worker-a", now + 60, queue="mail", partition="acme"))
    record = ds.Checkpoint(record_id("mail", "acme"), -1, {"slots": {}, "starts": [now]},
                           status="waiting")  # fmt: skip
    store.save(record)
    (q,) = ds.fleet(store, now=now, parts=["queues"]).queues
    assert (q.name, q.partition, q.running, q.depth) == ("mail", "acme", 1, 1)
    assert (q.limits_known, q.concurrency, q.rate, q.recent_starts) == (False, None, None, 0)
    assert q.oldest_waiting is not None


def test_schedule_records_with_no_tick_and_a_bad_cron() -> None:
    now = time.time()
    store = ds.MemoryStore()
    store.save(ds.Checkpoint(RECORD_PREFIX + "bad", -1, {"last": now - 600, "cron": "nope"},
                             status="waiting"))  # fmt: skip
    store.save(ds.Checkpoint(RECORD_PREFIX + "new", -1, {"cron": "*/5 * * * *"},
                             status="waiting"))  # fmt: skip
    got = {s.name: s for s in ds.fleet(store, now=now, parts=["schedules"]).schedules}
    assert (got["bad"].next_tick, got["bad"].missed, got["bad"].last_run) == (None, -1, None)
    assert got["new"].missed == 0 and got["new"].next_tick is not None
    assert now < got["new"].next_tick <= now + 300


def test_an_unknown_part_is_named() -> None:
    with pytest.raises(ValueError, match="no part \\['bogus'\\]"):
        ds.fleet(ds.MemoryStore(), parts=["bogus"])
