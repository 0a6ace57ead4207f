"""What Cosmos DB requests cost in bytes, counted on the wire by a loopback proxy between
the real SDK and cosmos-local: a listing transfers no state, a save sends its update and
its answer carries no state, and a heartbeat does not resend the state (a partial update
of the head), falling back to a whole replace where the service refuses partial updates.

``python -m tests.stores.cosmos.test_cosmos_costs`` prints the numbers docs/cosmos-db.md quotes.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.state import frozen_state

from ...conftest import Cosmos
from ...helpers.proxy import Proxy, in_front_of

SYSTEM_FIELDS = {"_rid", "_self", "_etag", "_attachments", "_ts"}
"""What the service adds to every item; the rest is the body a client sent."""


def seed_runs(endpoint: Cosmos, run_id: str, count: int, state_bytes: int) -> None:
    state = {"blob": "s" * state_bytes}
    with endpoint.store() as store:
        for i in range(count):
            store.save(
                ds.Checkpoint(f"{run_id}-{i:04}", 0, state, steps=("a",), workflow="w", owner="o")
            )


def listing_bytes(store: Any, proxy: Proxy, **filters: Any) -> tuple[int, int, int]:
    """Runs listed, bytes received and bytes sent by one listing."""
    proxy.clear()
    count = sum(1 for _ in store.list_runs(**filters))
    calls = proxy.store_calls()
    return count, sum(e.received for e in calls), sum(e.sent for e in calls)


@pytest.mark.slow
def test_listing_1000_runs_of_50kb_transfers_no_state(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """Listing 1,000 runs whose states are 50 KB each receives under 1 KB per run (the
    states are 50 MB): one projected query, paged; the limit is the service's work."""
    endpoint, proxy = proxied
    seed_runs(replace(endpoint, endpoint=proxy.upstream_url), run_id, 1000, 50_000)
    with endpoint.store() as store:
        count, received, _ = listing_bytes(store, proxy)
        queries = proxy.of("QUERY")
        limited, few, _ = listing_bytes(store, proxy, limit=10, workflow="w")
    assert count == 1000
    assert received < 1000 * 1024, f"{received:,} bytes for 1,000 runs"
    assert queries and all(b"c.state" not in q.body and b"*" not in q.body for q in queries)
    assert limited == 10
    assert few < received / 20
    assert b"TOP @limit" in proxy.of("QUERY")[-1].body


def test_a_heartbeat_is_a_partial_update_that_does_not_resend_the_state(
    through: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """A save whose state is unchanged since the version it replaces is one conditional
    PATCH of a few hundred bytes (and ~1 KB of HTTP headers), at 1 KB and 1 MB of state;
    the stored item is exactly what a whole replace would have stored, size included."""
    store, proxy, direct = through
    for size in (1_000, 1_000_000):
        rid = f"{run_id}-{size}"
        cp = store.save(ds.Checkpoint(rid, -1, {"blob": "b" * size}, owner="me"))
        beat = replace(
            cp,
            state=frozen_state(cp.state, rid, stored_as=cp.etag),
            lease_expires=time.time() + 60,
            updated_at=None,
        )
        proxy.clear()
        renewed = store.save(beat)
        (patch,) = proxy.store_calls()
        assert (patch.method, patch.status) == ("PATCH", 200)
        assert patch.headers["if-match"] == cp.etag
        assert len(patch.body) < 512 and patch.sent < 2048 and patch.received < 1024
        item = direct.raw_container().read_item(rid, partition_key=rid)
        assert item["_etag"] == renewed.etag and item["lease_expires"] == beat.lease_expires
        assert ("state" in item) == (size < 4096)  # a large state lives in segments
        body = {k: v for k, v in item.items() if k not in SYSTEM_FIELDS}
        as_sent = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        assert item["size"] == len(as_sent)
        loaded = store.load(rid)
        assert loaded is not None and loaded.lease_expires == beat.lease_expires
        assert loaded.state == cp.state


def test_a_changed_state_or_an_unknown_version_is_a_whole_replace(
    through: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """Partial updates only where the state is known unchanged: a new state, or a plain
    dict (not the runner's frozen state), is a whole replace."""
    store, proxy, _ = through
    cp = store.save(ds.Checkpoint(run_id, -1, {"a": 1}))
    proxy.clear()
    cp = store.save(replace(cp, lease_expires=1.0))  # a plain dict: unknown whether changed
    frozen = frozen_state(cp.state, run_id, stored_as=cp.etag)
    store.save(replace(cp, state=frozen.updated({"b": 2}, run_id)))
    assert [e.method for e in proxy.store_calls()] == ["PUT", "PUT"]


def test_a_service_that_refuses_patch_gets_replaces(
    through: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """Where PATCH is refused (the vNext emulator's 400 "Invalid path or method", issue
    #232/#246), the heartbeat is saved by a whole replace at once, and later ones go
    straight to replace: no save fails, no second PATCH is tried."""
    store, proxy, _ = through
    proxy.answer("PATCH", 400, {"error": "Invalid path or method", "method": "PATCH"})
    cp = store.save(ds.Checkpoint(run_id, -1, {"x": 1}, owner="me"))
    proxy.clear()
    for _ in range(2):
        state = frozen_state(cp.state, run_id, stored_as=cp.etag)
        cp = store.save(replace(cp, state=state, lease_expires=time.time() + 60, updated_at=None))
    assert [(e.method, e.status) for e in proxy.store_calls()] == [
        ("PATCH", 400),
        ("PUT", 200),
        ("PUT", 200),
    ]
    loaded = store.load(run_id)
    assert loaded is not None and (loaded.etag, loaded.lease_expires) == (cp.etag, cp.lease_expires)


def test_heartbeats_of_a_running_step_are_small_patches(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """Under run(), a step longer than lease/3 is renewed by heartbeats; with 1 MB of
    state each is a PATCH under 1 KB, and the run completes with its state intact."""
    endpoint, proxy = proxied

    def wait_for_two_beats(state: Any) -> None:
        deadline = time.monotonic() + 60
        while len(proxy.of("PATCH")) < 2:
            assert time.monotonic() < deadline, "no heartbeat within 60 s"
            time.sleep(0.05)

    steps = [
        ds.Step("big", lambda s: {"blob": "m" * 1_000_000}),
        ds.Step("slow", wait_for_two_beats),
    ]
    with endpoint.store() as store:
        final = ds.run(run_id, steps, store, lease=0.9)
    beats = [e for e in proxy.of("PATCH") if e.status == 200]
    assert len(beats) >= 2
    assert all(len(b.body) < 512 for b in beats)
    assert len(final["blob"]) == 1_000_000


def test_a_resumed_runs_claim_is_a_small_patch(proxied: tuple[Cosmos, Proxy], run_id: str) -> None:
    """Resuming a run with 1 MB of state: one load (its head, and one query for its
    segments), the claim as a PATCH of a few hundred bytes (the store read that
    version), then the step's save: no data changed, so a small segment (history's mark
    of the completed step) and the head."""
    endpoint, proxy = proxied

    def fail(state: Any) -> None:
        raise RuntimeError("first attempt")

    with endpoint.store() as store, pytest.raises(RuntimeError):
        ds.run(
            run_id, [ds.Step("a", lambda s: {"blob": "r" * 1_000_000}), ds.Step("b", fail)], store
        )
    with endpoint.store() as store:
        proxy.clear()
        final = ds.run(run_id, [ds.Step("a", lambda s: None), ds.Step("b", lambda s: None)], store)
    methods = [(e.method, e.status) for e in proxy.store_calls() if "/docs" in e.path]
    assert methods == [("GET", 200), ("QUERY", 200), ("PATCH", 200), ("POST", 201), ("PUT", 200)]
    assert len(proxy.of("PATCH")[0].body) < 1024
    assert len(proxy.of("POST")[-1].body) < 1024
    assert len(proxy.of("PUT")[0].body) < 2048
    assert len(final["blob"]) == 1_000_000


# -- the numbers docs/cosmos-db.md quotes -------------------------------------------------


def saves_of(exchanges: list[Any], run_id: str) -> list[list[Any]]:
    """The writes of a run, one list per save: its segments (creates of "~" ids), then
    its head (a create of the run's id, a replace or a patch), which ends it."""
    saves: list[list[Any]] = []
    current: list[Any] = []
    for e in exchanges:
        if e.method not in ("POST", "PUT", "PATCH") or "/docs" not in e.path:
            continue
        current.append(e)
        if e.method != "POST" or json.loads(e.body).get("id") == run_id:
            saves.append(current)
            current = []
    return saves


def growing_workload(endpoint: Cosmos, proxy: Proxy, run_id: str) -> list[list[Any]]:
    """The issue-13 workload (200 steps, each adding one 5 KB string under a new key)
    under run(): the writes of each save (the first: the claim)."""
    text = "t" * 5_000
    steps = [ds.Step(f"s{i}", lambda s, i=i: {f"k{i}": text}) for i in range(200)]
    with endpoint.store() as store:
        proxy.clear()
        ds.run(run_id, steps, store)
    return saves_of(proxy.store_calls(), run_id)


def test_on_the_growing_workload_a_save_sends_its_update(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """200 steps of 5 KB each: every save is at most two writes (a segment with the
    update, then the head), sends about what step 1 sends (not the state so far), and
    every answer is a few hundred bytes (no echo)."""
    endpoint, proxy = proxied
    saves = growing_workload(endpoint, proxy, run_id)
    assert len(saves) == 201  # the claim, then one per step
    assert max(len(s) for s in saves) <= 2
    sent = [sum(w.sent for w in s) for s in saves[1:]]
    assert sent[-1] < 2 * sent[0] and max(sent) < 12_000, sent[::50]
    assert max(w.received for s in saves for w in s) < 1024
    assert sum(sent) < 3_000_000


@pytest.mark.filterwarnings("ignore:Sending a large body directly with raw bytes:ResourceWarning")
def test_steps_adding_more_than_an_item_each_send_their_updates_not_the_state(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """Four steps that each add 2.5 MB, more than one 2 MB item: each save sends its 2.5
    MB (a segment of two items, then the head), about the 10 MB of updates in all. A
    save that folded whenever a change did not fit one item sent the whole state each
    time: 2.5 + 5 + 7.5 + 10 = 25 MB. The run loads whole."""
    endpoint, proxy = proxied
    grown = 2_500_000
    steps = [ds.Step(f"s{i}", lambda s, i=i: {f"k{i}": chr(97 + i) * grown}) for i in range(4)]
    with endpoint.store() as store:
        proxy.clear()
        ds.run(run_id, steps, store)
        saves = saves_of(proxy.store_calls(), run_id)[1:]  # (the first: the claim)
        sent = [sum(w.sent for w in s) for s in saves]
        assert len(saves) == 4 and all(grown < n < grown * 1.05 for n in sent), sent
        assert sum(sent) < 4 * grown * 1.05, sum(sent)
        assert [len(s) for s in saves[1:]] == [3, 3, 3]  # two items and the head
        loaded = store.load(run_id)
    assert loaded is not None
    assert loaded.state == {f"k{i}": chr(97 + i) * grown for i in range(4)}


def main() -> None:  # pragma: no cover - prints the numbers of docs/cosmos-db.md
    import logging
    import uuid

    from durable_steps.devtools.cosmos_server import EMULATOR_KEY, start_cosmosdb_server, stop

    from ...helpers.servers import ROOT

    # The SDK's background health check of a client closed at once logs its failure.
    logging.getLogger("azure").setLevel(logging.CRITICAL)
    proc, url = start_cosmosdb_server(ROOT)
    try:
        base = Cosmos(url, EMULATOR_KEY, database=f"costs-{uuid.uuid4().hex[:8]}")
        base.create()
        with in_front_of(base) as (endpoint, proxy):
            saves = growing_workload(endpoint, proxy, "grow")
            print(
                "growing workload, 200 x 5 KB, per save ([method, sent, received] of each write):"
            )
            for i in (1, 50, 200):
                print(f"  step {i}: {[(w.method, w.sent, w.received) for w in saves[i]]}")
            writes = [w for s in saves for w in s]
            print(
                f"  all writes: {len(writes)}, sent {sum(w.sent for w in writes):,} B, "
                f"received {sum(w.received for w in writes):,} B"
            )
            with endpoint.store() as store:
                for size in (1_000, 1_000_000):
                    rid = f"beat-{size}"
                    cp = store.save(ds.Checkpoint(rid, -1, {"blob": "b" * size}, owner="me"))
                    beat = replace(cp, lease_expires=time.time() + 60, updated_at=None)
                    proxy.clear()
                    cp = store.save(beat)  # a plain dict: the whole replace
                    replaced = proxy.store_calls()[-1]
                    frozen = frozen_state(cp.state, rid, stored_as=cp.etag)
                    proxy.clear()
                    store.save(replace(cp, state=frozen, lease_expires=time.time() + 60))
                    patched = proxy.store_calls()[-1]
                    print(
                        f"heartbeat at {size:,} B of state: replace sends {replaced.sent:,} B "
                        f"(answer {replaced.received} B); patch sends {patched.sent:,} B "
                        f"(answer {patched.received} B)"
                    )
            seed_runs(replace(endpoint, endpoint=proxy.upstream_url), "list", 1000, 50_000)
            with endpoint.store() as store:
                count, received, sent = listing_bytes(store, proxy)
            print(
                f"listing {count:,} runs of 50 KB: received {received:,} B, sent {sent:,} B, "
                f"{len(proxy.of('QUERY'))} query page(s)"
            )
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
