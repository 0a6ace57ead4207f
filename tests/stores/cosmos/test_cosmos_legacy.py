"""Containers of the earlier layout (partition key /id, the whole checkpoint in one
item) keep working exactly as before -- loads, saves of whole items up to Cosmos DB's
2 MB, listings -- with a warning that says how to move, which `durable-steps migrate
--to cosmos:CONTAINER` does; `doctor` says the same."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace

import pytest

import durable_steps as ds

from ...conftest import Cosmos
from ...helpers.clitools import Cli
from ...helpers.proxy import Proxy, in_front_of


@pytest.fixture
def legacy(cosmos_local: Cosmos) -> Iterator[Cosmos]:
    """A container created directly with partition key /id, as earlier versions had it."""
    old = cosmos_local.fresh(partition_key="/id")
    yield old
    old.drop()


@pytest.fixture
def legacy_proxied(legacy: Cosmos) -> Iterator[tuple[Cosmos, Proxy]]:
    with in_front_of(legacy, fresh=False) as pair:
        yield pair


def earlier_item(run_id: str, state: dict[str, object]) -> dict[str, object]:
    """An item as durable-steps wrote it before the /run layout (schema 2)."""
    return {
        "schema": 2,
        "run_id": run_id,
        "workflow": None,
        "status": "running",
        "step": 0,
        "steps": ["a"],
        "attempt": 1,
        "owner": None,
        "lease_expires": None,
        "updated_at": 1_700_000_000.0,
        "signals": {},
        "state": state,
        "id": run_id,
        "nonce": "0123456789abcdef",
        "size": 300,
    }


def test_runs_of_the_earlier_layout_load_save_and_list_as_before(
    legacy: Cosmos, run_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An item of the earlier layout loads; its run resumes and saves as one whole item
    (no segments, no partition field of the new layout); it is listed; the store warns
    once that the container has the earlier layout and says how to move."""
    legacy.raw_container().create_item(earlier_item(run_id, {"a": "x" * 10_000}))
    with caplog.at_level(logging.WARNING, logger="durable_steps"), legacy.store() as store:
        assert store.partition_key == "/id"
        loaded = store.load(run_id)
        assert loaded is not None and loaded.state == {"a": "x" * 10_000}
        final = ds.run(
            run_id, [ds.Step("a", lambda s: None), ds.Step("b", lambda s: {"b": 1})], store
        )
        assert final == {"a": "x" * 10_000, "b": 1}
        (info,) = [i for i in store.list_runs() if i.run_id == run_id]
        assert (info.status, info.step_name) == ("completed", "b")
    warnings = [r.getMessage() for r in caplog.records if "earlier layout" in r.getMessage()]
    assert len(warnings) == 1
    assert "durable-steps migrate --from cosmos --to cosmos:NEWCONTAINER" in warnings[0]
    items = list(
        legacy.raw_container().query_items("SELECT * FROM c", enable_cross_partition_query=True)
    )
    assert [i["id"] for i in items] == [run_id]
    assert items[0]["state"] == final and "run" not in items[0] and "gen" not in items[0]


def test_the_2mb_item_limit_stays_and_says_how_to_move(
    legacy_proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """Past 2 MB as sent (1,000,000 'é' are 2.0 MB of UTF-8 and fit; 50,000 more do
    not), a save is refused before anything is sent, with StateTooLargeError naming the
    earlier layout and the migration; the previous checkpoint stays."""
    endpoint, proxy = legacy_proxied
    text = "é" * 1_000_000
    with endpoint.store() as store:
        proxy.clear()
        saved = store.save(ds.Checkpoint(run_id, -1, {"text": text}))
        (sent,) = proxy.of("POST", "/docs")
        assert json.loads(sent.body)["size"] == len(sent.body) <= 2 * 1024 * 1024 - 1024
        with pytest.raises(
            ds.StateTooLargeError, match=r"2,097,152-byte item limit.*/id.*migrate"
        ) as err:
            store.save(replace(saved, state={"text": text + "é" * 50_000}))
        assert err.value.size > err.value.limit == 2 * 1024 * 1024
        assert len(proxy.of("PUT")) == 0
        loaded = store.load(run_id)
    assert loaded is not None and (loaded.state["text"], loaded.etag) == (text, saved.etag)


def test_escaped_writes_are_measured_escaped(
    legacy_proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """A client that escapes non-ASCII (compact writes off) is measured as it sends: 'é'
    counts 6 bytes, so 400,000 of them (800 KB of UTF-8) are refused before sending."""
    endpoint, proxy = legacy_proxied
    with endpoint.store(enable_compact_utf8_item_writes=False) as store:
        proxy.clear()
        saved = store.save(ds.Checkpoint(run_id, -1, {"text": "é" * 300_000}))
        (sent,) = proxy.of("POST", "/docs")
        assert b"\\u00e9" in sent.body
        assert json.loads(sent.body)["size"] == len(sent.body) > 1_800_000
        with pytest.raises(ds.StateTooLargeError, match="bytes as sent"):
            store.save(replace(saved, state={"text": "é" * 400_000}))
    assert len(proxy.of("PUT")) == 0


def test_migrate_moves_the_runs_to_a_container_of_the_new_layout(
    legacy: Cosmos, cosmos_local: Cosmos, run_id: str
) -> None:
    """`durable-steps migrate --from cosmos --to cosmos:NEW` copies every run of an /id
    container into a /run one (steps, state, age intact), where it grows past 2 MB; it
    says which runs came without history (that layout keeps none);
    `doctor` on the old container says what is wrong and what to do."""
    legacy.raw_container().create_item(earlier_item(f"{run_id}-a", {"a": 1}))
    with legacy.store() as store:
        ds.run(f"{run_id}-b", [ds.Step("s", lambda s: {"blob": "b" * 1_500_000})], store)
        ds.run(f"{run_id}-c", [ds.Step("s", lambda s: None), ds.Step("t", lambda s: None)], store)
    new = cosmos_local.fresh()
    try:
        cli = Cli(legacy.env())
        doctor = cli("doctor")
        assert doctor.returncode == 0, doctor.stderr
        assert "partition key /id, the earlier layout" in doctor.stdout + doctor.stderr
        assert "migrate --from cosmos --to cosmos:NEWCONTAINER" in doctor.stdout + doctor.stderr
        moved = cli.json("migrate", "--from", "cosmos", "--to", f"cosmos:{new.container}")
        assert sorted(moved["copied"]) == [f"{run_id}-a", f"{run_id}-b", f"{run_id}-c"]
        # the /id layout keeps no history: the run of two steps came without its first
        assert moved["latest_only"] == [f"{run_id}-c"] and moved["history_steps"] == 0
        assert "partition key /run" in Cli(new.env())("doctor").stdout
        with new.store() as store:
            assert store.partition_key == "/run"
            a = store.load(f"{run_id}-a")
            assert a is not None and (a.state, a.updated_at) == ({"a": 1}, 1_700_000_000.0)
            b = store.load(f"{run_id}-b")
            assert b is not None and b.status == "completed" and len(b.state["blob"]) == 1_500_000
            grown = store.save(replace(b, state={**b.state, "more": "m" * 2_000_000}))
            assert len(store.load(grown.run_id).state["more"]) == 2_000_000  # type: ignore[union-attr]
    finally:
        new.drop()


def test_a_container_of_another_shape_is_refused_at_open(cosmos_local: Cosmos) -> None:
    """A container partitioned otherwise is no store of runs: ConfigurationError naming
    its partition key, COSMOS_CONTAINER and what to do, before any run is read."""
    odd = cosmos_local.fresh(partition_key="/tenant")
    try:
        with pytest.raises(
            ds.ConfigurationError, match=r"partition key \['/tenant'\].*/run"
        ) as err:
            odd.store()
        assert err.value.variable == "COSMOS_CONTAINER"
    finally:
        odd.drop()
