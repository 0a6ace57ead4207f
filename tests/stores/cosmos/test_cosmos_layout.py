"""The /run layout as it lands in Cosmos DB, read with azure-cosmos directly and counted
on the wire by the test proxy: a run's head and its segments, what a save and a load
send, folds, the chain that keeps orphans out of a load, deletes and the sweep of
orphaned segments (``stores/cosmos/segments.py`` has the design)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.document import dumps
from durable_steps.seam.state import frozen_state, mark_stored
from durable_steps.stores.cosmos import segments as sg
from durable_steps.stores.cosmos import store as cosmos_store

from ...conftest import Cosmos, SyncFacade
from ...helpers.clitools import Cli
from ...helpers.proxy import Proxy

KB5 = "v" * 5000


def items_of(cosmos: Cosmos, run_id: str) -> list[dict[str, Any]]:
    """Every item of the run: its head and its segments."""
    return list(
        cosmos.raw_container().query_items(
            "SELECT * FROM c WHERE c.run = @run",
            parameters=[{"name": "@run", "value": run_id}],
            partition_key=run_id,
        )
    )


def split(cosmos: Cosmos, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    found = items_of(cosmos, run_id)
    (head,) = [i for i in found if i["id"] == run_id]
    return head, sorted(
        (i for i in found if "seg" in i), key=lambda i: (i["seq"], i.get("part", 0))
    )


def grow(store: Any, cp: ds.Checkpoint, **updates: Any) -> ds.Checkpoint:
    """Save ``cp`` with ``updates`` merged, as the runner does (a frozen state that knows
    its change since the stored version), and mark it stored."""
    state = frozen_state(cp.state, cp.run_id, stored_as=cp.etag).updated(updates, cp.run_id)
    name = f"s{cp.step + 1}"
    saved: ds.Checkpoint = store.save(
        replace(cp, step=cp.step + 1, steps=(*cp.steps, name), state=state, updated_at=None)
    )
    mark_stored(state, saved.etag)
    return replace(saved, state=state)


def info_of(store: Any, run_id: str) -> ds.RunInfo | None:
    """``run_info``, through the sync facade of an async store too."""
    if isinstance(store, SyncFacade):
        return store._wait(store.aio.run_info(run_id))  # type: ignore[no-any-return]
    return store.run_info(run_id)  # type: ignore[no-any-return]


def segmented(store: Any, run_id: str, saves: int = 4) -> ds.Checkpoint:
    """A run of ``saves`` saves after its creation, each adding a 5 KB key."""
    cp = store.save(ds.Checkpoint(run_id, -1, {}))
    for i in range(saves):
        cp = grow(store, cp, **{f"k{i}": KB5})
    return cp


def test_a_larger_run_is_a_head_pointing_to_a_chain_of_segments(
    cosmos: Cosmos, run_id: str
) -> None:
    """Past 4 KiB of data the head holds no state: it points (gen, seq, tip) to a chain
    of immutable segments of its partition -- a snapshot, then one delta per save, each
    naming the one before -- and records the data's exact sizes and the log's bytes."""
    with cosmos.store() as store:
        cp = segmented(store, run_id)
    head, segs = split(cosmos, run_id)
    assert "state" not in head and "calls" not in head and head["run"] == run_id
    assert [s["seq"] for s in segs] == [0, 1, 2, 3]
    assert {s["gen"] for s in segs} == {head["gen"]} and head["seq"] == 3
    assert head["tip"] == segs[-1]["seg"] and segs[0]["seg"] == head["gen"]
    assert [s["prev"] for s in segs] == [None, *(s["seg"] for s in segs[:-1])]
    assert all(s["id"] == f"~{s['seg']}" and s["run"] == run_id for s in segs)
    assert segs[0]["change"] == {"state": {"k0": KB5}, "calls": []}
    assert [s["change"] for s in segs[1:]] == [{"set": {f"k{i}": KB5}} for i in (1, 2, 3)]
    assert head["sizes"] == [len(dumps(dict(cp.state))), 2]
    changes = [len(dumps(s["change"])) for s in segs]
    assert head["log"] == [changes[0], 3, sum(changes[1:])]


def test_a_save_sends_its_update_not_the_state(proxied: tuple[Cosmos, Proxy], run_id: str) -> None:
    """Adding 5 KB sends about the same bytes whether the state holds 10 KB or 1 MB: two
    requests, a segment with the update and the head, under 9 KB with their headers."""
    endpoint, proxy = proxied
    sent = {}
    with endpoint.store() as store:
        for size in (10_000, 1_000_000):
            rid = f"{run_id}-{size}"
            cp = grow(store, store.save(ds.Checkpoint(rid, -1, {})), blob="b" * size)
            proxy.clear()
            grow(store, cp, more=KB5)
            calls = proxy.store_calls()
            assert [e.method for e in calls] == ["POST", "PUT"]
            sent[size] = sum(e.sent for e in calls)
    assert abs(sent[1_000_000] - sent[10_000]) < 200, sent
    assert sent[1_000_000] < 9000


def test_a_load_is_one_read_and_one_query_and_run_info_reads_the_head(
    through: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """Loading a run with segments is one point read of its head and one query of its
    generation's segments; run_info and a listing read heads only, never the state."""
    store, proxy, _ = through
    cp = segmented(store, run_id, saves=6)
    proxy.clear()
    loaded = store.load(run_id)
    assert [e.method for e in proxy.store_calls()] == ["GET", "QUERY"]
    assert loaded is not None and loaded.state == cp.state and loaded.etag == cp.etag
    proxy.clear()
    info = info_of(store, run_id)
    (read,) = proxy.store_calls()
    assert read.method == "GET" and read.received < 2000
    assert info is not None and (info.step, info.etag) == (5, cp.etag)
    assert info.size > 30_000  # its head and its segments
    proxy.clear()
    (listed,) = [i for i in store.list_runs() if i.run_id == run_id]
    assert listed.size == info.size and sum(e.received for e in proxy.store_calls()) < 2000


def test_a_fold_rewrites_the_data_and_deletes_what_it_superseded(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """Rewriting a 40 KB value piles up superseded bytes: once the log outweighs twice
    the data (and 64 KiB), the save writes a new snapshot, commits the head, and deletes
    every segment of the older generation (one query of ids, then the deletes)."""
    endpoint, proxy = proxied
    direct = replace(endpoint, endpoint=proxy.upstream_url)
    with endpoint.store(history="none") as store:  # (history keeps what a fold supersedes)
        cp = grow(store, store.save(ds.Checkpoint(run_id, -1, {})), big="0" * 40_000)
        cp = grow(store, grow(store, cp, a=1), b=2)
        head, before = split(direct, run_id)
        proxy.clear()
        cp = grow(store, cp, big="1" * 40_000)
        methods = [e.method for e in proxy.store_calls()]
        after, segs = split(direct, run_id)
        loaded = store.load(run_id)
    assert [s["seq"] for s in before] == [0, 1, 2] and {s["gen"] for s in before} == {head["gen"]}
    assert after["gen"] != head["gen"] and after["fold"] > head["fold"]
    assert [s["seq"] for s in segs] == [0] and segs[0]["gen"] == after["gen"]
    assert methods == ["POST", "PUT", "QUERY", *["DELETE"] * 3]
    assert loaded is not None and loaded.state == {"big": "1" * 40_000, "a": 1, "b": 2}


def test_a_call_record_is_one_delta_segment_and_the_head(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """A durable call inside a step of a run past 4 KiB is saved as one segment holding
    just its record (``calls+``) and the head: two requests, a few KB, whatever the state."""
    endpoint, proxy = proxied
    seen: list[Any] = []

    def agent(state: Any) -> dict[str, Any]:
        proxy.clear()
        ds.call("tool", lambda: "r" * 2000)
        seen.extend(proxy.store_calls())
        return {"answer": "done"}

    with endpoint.store() as store:
        steps = [ds.Step("big", lambda s: {"blob": "m" * 500_000}), ds.Step("agent", agent)]
        final = ds.run(run_id, steps, store)
    assert [e.method for e in seen] == ["POST", "PUT"]
    change = json.loads(seen[0].body)["change"]
    assert list(change) == ["calls+"] and change["calls+"][0]["result"] == "r" * 2000
    assert sum(e.sent for e in seen) < 6000
    assert final["answer"] == "done" and len(final["blob"]) == 500_000


def test_orphans_of_failed_saves_never_mix_into_a_load(cosmos: Cosmos, run_id: str) -> None:
    """Segments that no head points to -- written by saves whose head never landed, one
    even sharing the tip's number -- are not applied: the load walks the chain from
    the head's tip. Saving on works, and the next fold removes them."""
    with cosmos.store() as store:
        cp = segmented(store, run_id)
        head, segs = split(cosmos, run_id)
        for seq, prev in ((3, segs[2]["seg"]), (4, head["tip"])):
            orphan = sg.nonce()
            body = sg.segment_head(
                run_id, orphan, gen=head["gen"], fold=head["fold"], seq=seq, prev=prev
            )
            cosmos.raw_container().create_item({**body, "change": {"set": {"k3": "ORPHAN"}}})
        loaded = store.load(run_id)
        assert loaded is not None and loaded.state == cp.state
        cp = grow(store, replace(cp, state=loaded.state), k4=KB5)
        assert store.load(run_id).state == {**{f"k{i}": KB5 for i in range(5)}}  # type: ignore[union-attr]
    with cosmos.store() as other:  # a store that does not know the version folds it
        cp = other.save(replace(cp, state=dict(cp.state), updated_at=None))
    head, segs = split(cosmos, run_id)
    assert [s["seq"] for s in segs] == [0] and segs[0]["gen"] == head["gen"]


@pytest.mark.parametrize("missing", ["a delta", "a part of the snapshot"])
def test_a_missing_segment_is_a_corrupt_checkpoint_not_a_mix(
    cosmos: Cosmos, run_id: str, missing: str
) -> None:
    """A segment the chain needs that is gone makes the run unreadable
    (CorruptCheckpointError), never an older or partial state; run() runs nothing."""
    with cosmos.store() as store:
        if missing == "a delta":
            segmented(store, run_id)
        else:  # a 5 MB state: a snapshot in three parts
            store.save(ds.Checkpoint(run_id, -1, {"blob": "p" * 5_000_000}))
        _, segs = split(cosmos, run_id)
        victim = segs[1]
        assert missing != "a delta" or "change" in victim
        assert missing == "a delta" or victim.get("parts", 0) >= 3
        cosmos.raw_container().delete_item(victim["id"], partition_key=run_id)
        with pytest.raises(ds.CorruptCheckpointError, match=r"segment .*(missing|lacks)"):
            store.load(run_id)
        ran: list[str] = []
        with pytest.raises(ds.CorruptCheckpointError):
            ds.run(run_id, [ds.Step("x", lambda s: ran.append("x"))], store)
        assert ran == []


def test_a_fold_between_a_loads_head_read_and_its_query_is_read_again_not_corrupt(
    cosmos: Cosmos, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer folds after a load read the head and before it queried the
    segments, deleting the generation the head named: the load sees the head changed,
    reads again, and returns the folded checkpoint (the race, not damage)."""
    with cosmos.store() as store, cosmos.store() as other:
        cp = segmented(store, run_id)
        folded = {**cp.state, "k9": "after the fold"}
        before, _ = split(cosmos, run_id)
        attempt = store._attempt
        queries: list[str] = []

        def fold_first(call: Any) -> Any:
            if call is not None and getattr(call, "method", "") == "query_items":
                if not queries:
                    other.save(
                        replace(
                            cp,
                            step=cp.step + 1,
                            steps=(*cp.steps, "s9"),
                            state=folded,
                            updated_at=None,
                        )
                    )
                queries.append(call.method)
            return attempt(call)

        monkeypatch.setattr(store, "_attempt", fold_first)
        loaded = store.load(run_id)
    after, _ = split(cosmos, run_id)
    assert after["gen"] != before["gen"] and len(queries) == 2
    assert loaded is not None and loaded.state == folded and loaded.step == cp.step + 1


def test_delete_removes_the_head_and_its_segments(cosmos: Cosmos, run_id: str) -> None:
    """delete() removes the head, then every segment of the run."""
    with cosmos.store() as store:
        segmented(store, run_id)
        assert len(items_of(cosmos, run_id)) == 5
        assert store.delete(run_id) is True
        assert items_of(cosmos, run_id) == [] and store.load(run_id) is None


def test_prune_sweeps_segments_whose_head_is_gone(cosmos: Cosmos, run_id: str) -> None:
    """Segments of a run whose head is gone (a delete that crashed between head and
    segments, an expired head) are removed by prune_orphans -- and by `durable-steps
    runs prune`, which says how many; a live run's segments stay."""
    with cosmos.store() as store:
        segmented(store, f"{run_id}-gone")
        live = segmented(store, f"{run_id}-live")
        cosmos.raw_container().delete_item(f"{run_id}-gone", partition_key=f"{run_id}-gone")
        assert store.prune_orphans(older_than=3600) == 0  # recent: may be a save under way
        pruned = Cli(cosmos.env()).json("runs", "prune", "--older-than", "1d", "--yes")
        assert pruned["orphaned_segments"] == 0 and len(items_of(cosmos, f"{run_id}-gone")) == 4
        assert store.prune_orphans(older_than=-60) == 4
        assert items_of(cosmos, f"{run_id}-gone") == []
        assert len(items_of(cosmos, f"{run_id}-live")) == 5
        loaded = store.load(f"{run_id}-live")
        assert loaded is not None and loaded.state == live.state


def test_the_segments_of_a_completed_run_expire_after_its_head(cosmos: Cosmos, run_id: str) -> None:
    """With finished_ttl, completing a run with segments folds them into a snapshot that
    carries a ttl an hour longer than the head's: Cosmos DB expires the head first, and
    then its data, with no job to run. (With history, the default, the generations it
    keeps carry none: ``delete_expired`` removes them once the head is gone,
    tests/history/test_retention.py.)"""
    with cosmos.store(finished_ttl=86400, history="none") as store:
        ds.run(run_id, [ds.Step(f"s{i}", lambda s, i=i: {f"k{i}": KB5}) for i in range(3)], store)
    head, segs = split(cosmos, run_id)
    assert head["ttl"] == 86400 and head["status"] == "completed"
    assert segs and all(s["ttl"] == 86400 + sg.TTL_MARGIN for s in segs)
    assert [s["seq"] for s in segs] == [0]


def test_a_signal_or_a_cancellation_writes_the_head_only(cosmos: Cosmos, run_id: str) -> None:
    """A change from outside (``runner.changes``) leaves the state alone: the run's
    segments stay as they were, and the state loads unchanged."""
    with cosmos.store() as store:
        steps = [ds.Step(f"s{i}", lambda s, i=i: {f"k{i}": KB5}) for i in range(3)]
        with pytest.raises(ds.RunWaiting):
            ds.run(run_id, [*steps, ds.Step("wait", lambda s: ds.wait_for_signal("never"))], store)
    _, segs = split(cosmos, run_id)
    with cosmos.store() as store:
        ds.send_signal(store, run_id, "other", {"n": 1})
        assert ds.cancel_run(store, run_id, reason="enough")
        head, after = split(cosmos, run_id)
        assert segs and after == segs
        assert head["status"] == "cancelled" and head["signals"] == {"other": {"n": 1}}
        loaded = store.load(run_id)
        assert loaded is not None and loaded.state == {f"k{i}": KB5 for i in range(3)}


def test_a_head_written_without_finished_ttl_still_goes_before_its_expiring_segments(
    cosmos: Cosmos, run_id: str
) -> None:
    """A signal sent to that completed run by a store without finished_ttl (as the CLI's
    is) keeps the head's expiry: a head that outlived its snapshot would name a missing
    segment, and the run would no longer load."""
    with cosmos.store(finished_ttl=86400, history="none") as store:
        ds.run(run_id, [ds.Step(f"s{i}", lambda s, i=i: {f"k{i}": KB5}) for i in range(3)], store)
    before, segs = split(cosmos, run_id)
    with cosmos.store() as store:
        ds.send_signal(store, run_id, "late", {"n": 1})
        head, after = split(cosmos, run_id)
        assert after == segs and segs[0]["ttl"] == 86400 + sg.TTL_MARGIN
        assert head["until"] == before["until"] and 0 < head["ttl"] <= 86400
        loaded = store.load(run_id)
        assert loaded is not None and loaded.signals == {"late": {"n": 1}}


def test_the_account_key_is_not_kept_on_the_store(cosmos: Cosmos, loop: Any) -> None:
    """The key goes to the SDK's client and nowhere else: no attribute of the store
    (sync or async) holds it."""
    assert cosmos.key
    for store in (cosmos.store(), cosmos.async_store()):
        try:
            assert cosmos.key not in repr(vars(store))
            assert all(cosmos.key not in repr(v) for v in vars(store).values())
        finally:
            SyncFacade(store, loop).close() if isinstance(
                store, ds.AsyncCosmosStore
            ) else store.close()


def test_the_async_store_sends_at_most_parallel_requests_at_once(
    cosmos: Cosmos, loop: Any, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting a run of 20 segments: the async store, like the sync one, has at most
    ``PARALLEL`` of the deletes in flight at a time."""
    attempt = ds.AsyncCosmosStore._attempt
    flying, most = [0], [0]

    async def counted(container: Any, call: Any) -> Any:
        flying[0] += 1
        most[0] = max(most[0], flying[0])
        try:
            return await attempt(container, call)
        finally:
            flying[0] -= 1

    store = SyncFacade(cosmos.async_store(), loop)
    try:
        segmented(store, run_id, saves=20)
        assert len(items_of(cosmos, run_id)) == 21
        monkeypatch.setattr(ds.AsyncCosmosStore, "_attempt", staticmethod(counted))
        assert store.delete(run_id)
    finally:
        store.close()
    assert items_of(cosmos, run_id) == []
    assert most[0] == cosmos_store.PARALLEL
