"""An idle worker's store traffic does not grow with the number of runs (issue 31 item
3): the same number of looks at a store of 10 runs and at one of 2,000 -- finished runs
and runs leased by a live worker, none to take -- sends the same requests and (within a
few bytes of headers) the same bytes to cosmos-local, and opens the same files and
directories of a FileStore. Counted per look, not per second: no timing in the test."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam import lease as ds_lease
from durable_steps.testing import CosmosEndpoint
from durable_steps.workers.discovery import Look

from ..helpers.proxy import in_front_of

LOOKS = 5
FEW, MANY = 10, 2_000


class FileOps:
    """Files opened and directories listed by one thread while counting (an audit hook:
    every ``open``, ``os.listdir`` and ``os.scandir`` of the process passes through it)."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.seen: list[tuple[str, str]] = []
        if not _COUNTERS:  # (an audit hook cannot be removed: one per process)
            sys.addaudithook(_heard)
        _COUNTERS.append(self)

    def hear(self, event: str, args: tuple[Any, ...]) -> None:
        if self.thread == threading.get_ident() and event in ("open", "os.listdir", "os.scandir"):
            self.seen.append((event, str(args[0] if args else "")))


_COUNTERS: list[FileOps] = []


def _heard(event: str, args: tuple[Any, ...]) -> None:
    _COUNTERS[-1].hear(event, args)


Counted = tuple[int, int]
"""Requests (or file operations) and bytes (0 where not measured) of LOOKS looks."""


def _fill(store: ds.Store, workflow: str, n: int) -> None:
    """``n`` runs of ``workflow``: half completed, half leased by a live worker for an hour."""
    t = time.time()

    def put(i: int) -> None:
        fields: dict[str, Any] = (
            {"status": "completed", "done": True}
            if i % 2
            else {"owner": "live", "lease_expires": t + 3600}
        )
        store.save(ds.Checkpoint(f"{workflow}-{i:05d}", 0, {}, steps=("s",), workflow=workflow,
                                 **fields))  # fmt: skip

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(n)))


def _idle_looks(store: ds.Store, workflow: str) -> Look:
    look = Look(store, {workflow: ds.Workflow(workflow, [])}, owner="idle-worker")
    assert look.take(4, set(), 1.0)[0] == []  # the first look (a full one): not counted
    return look


@pytest.fixture(params=["file", "cosmos-local"])
def traffic(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[int], Counted]:
    """A function: the traffic of LOOKS idle looks at a fresh store of n runs."""
    if request.param == "file":

        def file_traffic(n: int) -> Counted:
            with ds.FileStore(tmp_path / f"store-{n}") as store:
                _fill(store, "idle", n)
                look = _idle_looks(store, "idle")
                return _file_ops(lambda: _looks(look))

        return file_traffic
    cosmos: CosmosEndpoint = request.getfixturevalue("cosmos_local")

    def cosmos_traffic(n: int) -> Counted:
        with _cosmos_filled(cosmos, n) as (proxied, proxy), proxied.store() as store:
            look = _idle_looks(store, "idle")
            proxy.clear()
            _looks(look)
            return _requests(proxy)

    return cosmos_traffic


def _looks(look: Look) -> None:
    for _ in range(LOOKS):
        assert look.take(4, set(), 1.0)[0] == []


def _file_ops(act: Callable[[], object]) -> Counted:
    """The file operations ``act`` makes in this thread."""
    ops = FileOps()
    ops.thread = threading.get_ident()
    act()
    ops.thread = None
    return len(ops.seen), 0


@contextmanager
def _cosmos_filled(cosmos: CosmosEndpoint, n: int) -> Iterator[tuple[CosmosEndpoint, Any]]:
    """A fresh container of n runs (``_fill``) behind a counting proxy."""
    with in_front_of(cosmos) as (proxied, proxy):
        with replace(proxied, endpoint=proxy.upstream_url).store() as filler:
            _fill(filler, "idle", n)
        yield proxied, proxy


def _requests(proxy: Any) -> Counted:
    calls = proxy.store_calls()
    return len(calls), sum(e.sent + e.received for e in calls)


def test_an_idle_workers_looks_cost_the_same_at_10_and_2000_runs(
    traffic: Callable[[int], Counted],
) -> None:
    """LOOKS looks of an idle worker (nothing to take) at 10 runs and at 2,000 (finished,
    or leased by a live worker): the same requests or file operations, at least one per
    look, and bytes within 64 per request (headers: dates, session tokens, ids)."""
    few, many = traffic(FEW), traffic(MANY)
    assert few[0] >= LOOKS, few
    assert many[0] == few[0], (few, many)
    assert abs(many[1] - few[1]) <= 64 * few[0], (few, many)


def recovering(tmp_path: Path, n: int) -> Counted:
    """What ``recover`` reads of a fresh FileStore of n runs, finished or leased by a
    live worker, none to take: file operations."""
    quiet = ds.Workflow("idle", [])
    with ds.FileStore(tmp_path / f"store-{n}") as store:
        _fill(store, "idle", n)
        return _file_ops(lambda: _nothing(ds.recover(store, [quiet])))


def _nothing(recovered: list[ds.Recovered]) -> None:
    assert recovered == []


def test_recover_reads_the_same_at_10_and_2000_runs(tmp_path: Path) -> None:
    """``recover`` goes through the look a worker makes (``Store.takeable``), not a
    listing of every run, on the stores that see a dead local process's leases
    themselves: at 2,000 finished or leased runs it reads what it reads at 10 (the
    same file operations). (On Cosmos DB it lists, as a worker's first look does:
    ``test_recover_takes_a_dead_local_processs_run_at_once``.)"""
    few, many = recovering(tmp_path, FEW), recovering(tmp_path, MANY)
    assert few[0] >= 1, few
    assert many[0] == few[0], (few, many)
    assert abs(many[1] - few[1]) <= 64 * few[0], (few, many)


def _dead_local_owner() -> str:
    """A default owner id of this machine whose process has ended."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    owner = ds_lease.default_owner().split(":")
    owner[3] = child.stdout.strip()
    gone = ":".join(owner)
    assert ds_lease.owner_gone(gone), gone
    return gone


def test_recover_takes_a_dead_local_processs_run_at_once(cosmos_local: CosmosEndpoint) -> None:
    """A run leased for an hour by a process of this machine that has ended is taken by
    ``recover`` at once on Cosmos DB, whose filter would leave it until the lease
    expires: ``recover`` lists the running runs there, as a worker's first look does.
    (On FileStore the dead process's runs are found through the processes it
    registered: ``test_fleet_wakeup``, with real processes killed.)"""
    flow = ds.Workflow("orphaned", [ds.Step("s", lambda s: {"done": 1})])
    with cosmos_local.store() as store:
        assert flow.start("orphan", store)
        cp = store.load("orphan")
        assert cp is not None
        store.save(replace(cp, owner=_dead_local_owner(), lease_expires=time.time() + 3600))
        done = ds.recover(store, [flow])
        assert [(r.run_id, r.outcome) for r in done] == [("orphan", "completed")]
        assert ds.wait_for_result(store, "orphan", timeout=5) == {"done": 1}
