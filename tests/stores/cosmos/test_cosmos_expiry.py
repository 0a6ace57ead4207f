"""Retention on Cosmos DB at a cost that does not grow with the store (issue 31 item 3,
issue 33 item 5): the expiry index (``stores/cosmos/expiry.py``), on the real SDK against
cosmos-local through the counting proxy. The local server has no TTL: ``service_ttl``
deletes what the service would have deleted by then."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.stores.cosmos import expiry

from ...conftest import Cosmos, SyncFacade
from ...helpers.proxy import Proxy

TTL = 60
LATER = TTL + 2 * 3600 + 2 * expiry.SKEW
"""Seconds from now by which the head and the snapshot (its hour's margin) expired."""


def service_ttl(container: Any, at: float) -> None:
    """What Cosmos DB's TTL does by ``at``: every item whose ``_ts + ttl`` is past goes."""
    for item in list(container.query_items("SELECT * FROM c", enable_cross_partition_query=True)):
        if isinstance(item.get("ttl"), int) and item["_ts"] + item["ttl"] <= at:
            container.delete_item(item["id"], partition_key=item["run"])


def everything(container: Any) -> list[tuple[str, str]]:
    """Every item of the container as (partition key, id)."""
    rows = container.query_items("SELECT c.id, c.run FROM c", enable_cross_partition_query=True)
    return sorted((r["run"], r["id"]) for r in rows)


def pass_cost(store: Any, proxy: Proxy, now: float) -> tuple[int, int, int]:
    """Requests, bytes sent and bytes received by one retention pass."""
    proxy.clear()
    assert store.delete_expired(now=now) == 0
    calls = proxy.store_calls()
    return len(calls), sum(e.sent for e in calls), sum(e.received for e in calls)


def long_lived(store: Any, names: list[str]) -> None:
    """Running runs that hold items: a head and a stream chunk each (many at once)."""

    def one(name: str) -> None:
        store.save(ds.Checkpoint(name, -1, {}, workflow="w"))
        store.append_item(name, "stream", "out/0", {"chunk": "x" * 100})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, names))


def test_an_idle_pass_costs_the_same_with_10_or_2000_long_lived_runs(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """A worker's retention pass with nothing due: the same requests and bytes whether
    the container holds 10 or 2,000 running runs with items, all older than finished_ttl
    by the pass's clock (the earlier sweep read one row per such item)."""
    endpoint, proxy = proxied
    direct = replace(endpoint, endpoint=proxy.upstream_url)
    with direct.store() as seeding, endpoint.store(finished_ttl=TTL) as store:
        long_lived(seeding, [f"{run_id}-{i}" for i in range(10)])
        later = time.time() + 10 * 3600
        store.delete_expired(now=later)  # the first pass: the one-off sweep, the marker
        few = pass_cost(store, proxy, later)
        long_lived(seeding, [f"{run_id}-{i}" for i in range(10, 2000)])
        many = pass_cost(store, proxy, later)
    assert few[0] == many[0] == 1  # one query of the index partition
    # Bytes: equal but for the session token both ways, whose counter gains a digit
    # as the container's writes grow (10 vs 4,000 here); the earlier sweep received
    # one row per item (the run id of each of the 2,000 chunks).
    assert abs(few[1] - many[1]) <= 8 and abs(few[2] - many[2]) <= 8, (few, many)


def test_an_expired_run_leaves_nothing_and_others_keep_everything(cosmos_local: Cosmos) -> None:
    """A run completed with finished_ttl: once the service expired its head, a pass
    removes its stream chunks, events, kept history and its index entry -- every item of
    the container listed with its partition key. A failed run and a running run in the
    same container keep every item; the running one's entry never existed."""
    cosmos = cosmos_local.fresh()
    try:
        with cosmos.store(finished_ttl=TTL) as store:
            ds.run("ends", _chatty(4), store)
            with pytest.raises(RuntimeError):
                ds.run("fails", [*_chatty(2), ds.Step("boom", _fail)], store)
            with pytest.raises(ds.RunWaiting):
                ds.run("waits", [*_chatty(2), ds.Step("w", _wait)], store)
            container = cosmos.raw_container()
            before = everything(container)
            assert (expiry.PARTITION, "ends") in before  # written with its completing save
            assert {p for p, _ in before} == {"ends", "fails", "waits", expiry.PARTITION}
            later = time.time() + LATER
            service_ttl(container, later)
            assert ("ends", "ends") not in everything(container)  # the head went, not the rest
            assert store.delete_expired(now=time.time()) == 0  # not due yet
            assert store.delete_expired(now=later) == 1
            after = everything(container)
            assert [row for row in after if "ends" in row] == []
            for other in ("fails", "waits"):
                assert [r for r in after if r[0] == other] == [r for r in before if r[0] == other]
            assert len(list(ds.read_stream(store, "fails", "out", follow=False))) == 2
            assert store.delete_expired(now=later) == 0  # nothing due any more
    finally:
        cosmos.drop()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_entry_written_before_a_head_that_failed_is_harmless(
    proxied: tuple[Cosmos, Proxy], run_id: str, kind: str, loop: asyncio.AbstractEventLoop
) -> None:
    """The completing save's head write fails after its index entry landed (the point a
    crash between the two would leave): the run stays as it was, running; a pass drops
    the entry and touches nothing of the run; completed later, it expires whole.
    (Only a completed run expires on Cosmos DB: its head is the one that carries a ttl.)"""
    endpoint, proxy = proxied
    store: Any = (
        endpoint.store(finished_ttl=TTL)
        if kind == "sync"
        else SyncFacade(endpoint.async_store(finished_ttl=TTL), loop)
    )
    with store:
        with pytest.raises(ds.RunWaiting):
            ds.run(run_id, [*_chatty(2), ds.Step("w", _wait)], store)
        proxy.answer("PATCH", 503, {"code": "Injected"}, path=f"/docs/{run_id}")
        proxy.answer("PUT", 503, {"code": "Injected"}, path=f"/docs/{run_id}")
        waiting = store.load(run_id)
        assert waiting is not None
        done = replace(waiting, status="completed", updated_at=None)
        with pytest.raises(ds.StoreError):
            store.save(done)
        proxy.heal()
        container = endpoint.raw_container()
        entry = container.read_item(run_id, partition_key=expiry.PARTITION)
        assert entry["at"] > time.time()
        mine = [r for r in everything(container) if r[0] == run_id]
        loaded = store.load(run_id)
        assert loaded is not None and loaded.status == "waiting" and loaded.etag == waiting.etag
        later = time.time() + LATER
        assert store.delete_expired(now=later) == 0
        assert (expiry.PARTITION, run_id) not in everything(container)  # dropped: no ttl
        assert [r for r in everything(container) if r[0] == run_id] == mine
        store.save(done)  # completed for real
        assert (expiry.PARTITION, run_id) in everything(container)
        service_ttl(container, later)
        assert store.delete_expired(now=later) == 1
        assert [r for r in everything(container) if run_id in r] == []


def test_runs_completed_before_the_index_are_swept_once(cosmos_local: Cosmos) -> None:
    """A container written by an earlier version: a completed run with no index entry,
    and no marker. The first pass sweeps the whole container once (the earlier sweep)
    and writes the marker; the run's leftovers go."""
    cosmos = cosmos_local.fresh()
    try:
        with cosmos.store(finished_ttl=TTL) as store:
            ds.run("old", _chatty(2), store)
            container = cosmos.raw_container()
            container.delete_item("old", partition_key=expiry.PARTITION)  # as before the index
            later = time.time() + LATER
            service_ttl(container, later)
            assert [r for r in everything(container) if r[0] == "old"]
            assert store.delete_expired(now=later) == 1
            assert everything(container) == [(expiry.PARTITION, expiry.SCANNED)]
    finally:
        cosmos.drop()


def _chatty(n: int) -> list[ds.Step]:
    def step(i: int) -> ds.Step:
        def body(state: Any) -> dict[str, Any]:
            ds.write_stream("out", f"chunk {i}")
            ds.set_event("progress", i)
            return {f"k{i}": "v" * 2000}  # past the inline size: history's segments

        return ds.Step(f"s{i}", body)

    return [step(i) for i in range(n)]


def _fail(state: Any) -> None:
    raise RuntimeError("fails for good")


def _wait(state: Any) -> None:
    ds.wait_for_signal("never")
