"""CosmosStore's own promises, on every Cosmos endpoint that exists here."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from azure.core.pipeline.transport import RequestsTransport

import durable_steps as ds

from .conftest import Cosmos


class CountingTransport(RequestsTransport):  # type: ignore[misc]
    """Counts every HTTP request the SDK sends (retries included)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    def send(self, request: Any, **kwargs: Any) -> Any:
        self.requests.append(f"{request.method} {request.url}")
        return super().send(request, **kwargs)


@pytest.fixture
def counted(cosmos: Cosmos) -> Iterator[tuple[ds.CosmosStore, CountingTransport]]:
    transport = CountingTransport()
    store = cosmos.store(transport=transport)
    for thread in threading.enumerate():  # the SDK's startup health check (a GET /) runs
        if thread.name == "cosmos-endpoint-refresh":  # in the background: let it finish
            thread.join(30)
    transport.requests.clear()  # construction resolves the container once; not the hot path
    yield store, transport
    store.close()


def test_one_request_per_save_and_per_load(
    counted: tuple[ds.CosmosStore, CountingTransport], run_id: str
) -> None:
    """Each load and each save is exactly one HTTP request: no queries, no metadata reads."""
    store, transport = counted
    assert store.load(run_id) is None
    assert len(transport.requests) == 1
    cp = store.save(ds.Checkpoint(run_id, -1, {}))
    assert len(transport.requests) == 2
    for i in range(5):
        cp = store.save(replace(cp, step=i, steps=(*cp.steps, f"s{i}"), state={"i": i}))
        store.load(run_id)
    assert len(transport.requests) == 12
    methods = [r.split()[0] for r in transport.requests]
    assert methods == ["GET", "POST"] + ["PUT", "GET"] * 5


def test_run_costs_one_request_per_step_plus_claim(
    counted: tuple[ds.CosmosStore, CountingTransport], run_id: str
) -> None:
    """run() over 10 steps sends 12 requests: one load, one claim, one save per step."""
    store, transport = counted
    ds.run(run_id, [ds.Step(f"s{i}", lambda s: None) for i in range(10)], store)
    assert len(transport.requests) == 12


def test_one_item_per_run_with_id_equal_to_run_id(cosmos: Cosmos, run_id: str) -> None:
    """The store writes one item per run, id = run id, readable with azure-cosmos directly."""
    with cosmos.store() as store:
        ds.run(run_id, [ds.Step("a", lambda s: {"x": 1}), ds.Step("b", lambda s: {"y": 2})], store)
    container = cosmos.raw_container()
    items = list(
        container.query_items(
            "SELECT * FROM c WHERE c.id = @id",
            parameters=[{"name": "@id", "value": run_id}],
            enable_cross_partition_query=True,
        )
    )
    assert len(items) == 1
    item = container.read_item(run_id, partition_key=run_id)
    assert (item["id"], item["run_id"], item["schema"], item["state"]) == (
        run_id,
        run_id,
        2,
        {"x": 1, "y": 2},
    )
    assert container.read()["partitionKey"]["paths"] == ["/id"]


def test_state_over_2mb_is_refused_before_sending(
    counted: tuple[ds.CosmosStore, CountingTransport], run_id: str
) -> None:
    """A checkpoint over 2 MB raises StateTooLargeError, sends nothing, keeps the old one."""
    store, transport = counted
    v1 = store.save(ds.Checkpoint(run_id, 0, {"small": 1}, steps=("a",)))
    sent = len(transport.requests)
    big = {"small": 1, "blob": "x" * (2 * 1024 * 1024)}
    with pytest.raises(ds.StateTooLargeError, match="2,097,152-byte item limit") as err:
        store.save(replace(v1, step=1, steps=("a", "b"), state=big))
    assert err.value.size > err.value.limit
    assert len(transport.requests) == sent
    loaded = store.load(run_id)
    assert loaded is not None
    assert (loaded.state, loaded.etag) == ({"small": 1}, v1.etag)


def test_state_just_under_the_limit_is_stored(cosmos: Cosmos, run_id: str) -> None:
    """A state of 1.9 MB is fine: the limit is the item's, not an arbitrary smaller one."""
    with cosmos.store() as store:
        store.save(ds.Checkpoint(run_id, -1, {"blob": "y" * 1_900_000}))
        loaded = store.load(run_id)
    assert loaded is not None
    assert len(loaded.state["blob"]) == 1_900_000


def test_missing_container_is_a_clear_error_not_an_empty_store(cosmos: Cosmos) -> None:
    """Without create_if_missing, a missing container fails at construction with a 404 hint."""
    with pytest.raises(ds.StoreError, match="does not exist: provision it") as err:
        ds.CosmosStore(cosmos.endpoint, **cosmos.kwargs(container="no-such-container"))
    assert err.value.status_code == 404


def test_unreachable_endpoint_fails_fast_with_a_clear_error() -> None:
    """Nothing listening: StoreError saying to check COSMOS_ENDPOINT, not minutes of retries."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ds.StoreError, match=r"cannot reach Cosmos DB.*check COSMOS_ENDPOINT"):
        ds.store_from_env(
            {
                "DURABLE_STORE": "cosmos",
                "COSMOS_KEY": "a2V5",
                "COSMOS_ENDPOINT": f"http://127.0.0.1:{port}/",
            }
        )


@pytest.mark.timeout(60)
def test_endpoint_that_never_answers_times_out_with_a_clear_error() -> None:
    """A server that accepts but never answers: StoreError within the default timeouts
    (about 25 s: the SDK's own retries; the 60 s test timeout is the bound)."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        stop = threading.Event()
        held: list[socket.socket] = []

        def accept() -> None:
            srv.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(srv.accept()[0])
                except OSError:
                    continue

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        try:
            with pytest.raises(ds.StoreError, match="cannot reach Cosmos DB"):
                ds.CosmosStore(f"http://127.0.0.1:{srv.getsockname()[1]}/", key="a2V5")
        finally:
            stop.set()
            t.join()
            for c in held:
                c.close()


def test_store_from_env_builds_a_working_cosmos_store(cosmos: Cosmos, run_id: str) -> None:
    """DURABLE_STORE=cosmos with the COSMOS_* variables gives a CosmosStore that runs steps."""
    store = ds.store_from_env(cosmos.env())
    assert isinstance(store, ds.CosmosStore)
    try:
        assert ds.run(run_id, [ds.Step("a", lambda s: {"ok": True})], store) == {"ok": True}
    finally:
        store.close()


def test_finished_runs_carry_the_ttl_unfinished_ones_do_not(cosmos: Cosmos, run_id: str) -> None:
    """With finished_ttl, the item of a completed run gets Cosmos DB's ttl; a running one not."""
    container = cosmos.raw_container()
    with cosmos.store(finished_ttl=86400) as store:

        def look(state: object) -> None:
            assert "ttl" not in container.read_item(run_id, partition_key=run_id)

        ds.run(run_id, [ds.Step("a", lambda s: None), ds.Step("b", look)], store)
    assert container.read_item(run_id, partition_key=run_id)["ttl"] == 86400
