"""CosmosStore's own promises, on every Cosmos endpoint that exists here."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from azure.core.pipeline.transport import RequestsTransport

import durable_steps as ds
from durable_steps.seam.document import SCHEMA

from ...conftest import Cosmos, SyncFacade
from ...helpers.proxy import Proxy


class CountingTransport(RequestsTransport):  # type: ignore[misc]
    """Counts the HTTP requests the SDK sends (retries included) from the thread that
    made this transport: the SDK's own background work (its startup health check, an
    account refresh every few minutes, a GET /) runs in threads of its own and is not
    the hot path's cost, so the count cannot depend on when that work happens."""

    def __init__(self) -> None:
        super().__init__()
        self.owner = threading.get_ident()
        self.sent: list[tuple[int, str]] = []

    def send(self, request: Any, **kwargs: Any) -> Any:
        self.sent.append((threading.get_ident(), f"{request.method} {request.url}"))
        return super().send(request, **kwargs)

    @property
    def requests(self) -> list[str]:
        return [r for thread, r in self.sent if thread == self.owner]

    def clear(self) -> None:
        self.sent.clear()


@pytest.fixture(params=["none", "steps"])
def counted(
    cosmos: Cosmos, request: pytest.FixtureRequest
) -> Iterator[tuple[ds.CosmosStore, CountingTransport]]:
    """A store whose requests are counted: without history (``history="none"``: a small
    run's data inline in its head) and with it (the default)."""
    transport = CountingTransport()
    store = cosmos.store(transport=transport, history=request.param)
    transport.clear()  # construction resolves the container once; not the hot path
    yield store, transport
    store.close()


def test_one_request_per_save_and_per_load(
    counted: tuple[ds.CosmosStore, CountingTransport], run_id: str
) -> None:
    """Without history, each load and each save of a small run is exactly one HTTP
    request: no queries, no metadata reads. With history (the default) a save that
    completes a step is two (its update as a segment, then the head: DESIGN's "at most
    two requests per save"), and a load two (the head, one query of its segments); a
    save before any step completed (a new run, its claim) stays one."""
    store, transport = counted
    history = store.history.on
    assert store.load(run_id) is None
    assert len(transport.requests) == 1
    cp = store.save(ds.Checkpoint(run_id, -1, {}))
    assert len(transport.requests) == 2
    for i in range(5):
        cp = store.save(replace(cp, step=i, steps=(*cp.steps, f"s{i}"), state={"i": i}))
        store.load(run_id)
    methods = [r.split()[0] for r in transport.requests]
    if history:  # POST a segment, PUT the head; GET the head, POST the segments' query
        assert methods == ["GET", "POST"] + ["POST", "PUT", "GET", "POST"] * 5
    else:
        assert methods == ["GET", "POST"] + ["PUT", "GET"] * 5


def test_run_costs_one_request_per_step_plus_claim(
    counted: tuple[ds.CosmosStore, CountingTransport], run_id: str
) -> None:
    """run() over 10 steps sends one load, one claim and, per step, one save without
    history (12) or two with it (22: each step's update is a segment, then the head)."""
    store, transport = counted
    ds.run(run_id, [ds.Step(f"s{i}", lambda s: None) for i in range(10)], store)
    assert len(transport.requests) == (22 if store.history.on else 12)


def test_a_small_run_is_one_item_its_head_with_the_data_inline(cosmos: Cosmos, run_id: str) -> None:
    """A store creates containers partitioned by /run; without history a small run is
    one item, its head (id = run = run id) with the state inline, readable with
    azure-cosmos directly."""
    with cosmos.store(history="none") as store:
        ds.run(run_id, [ds.Step("a", lambda s: {"x": 1}), ds.Step("b", lambda s: {"y": 2})], store)
    container = cosmos.raw_container()
    assert container.read()["partitionKey"]["paths"] == ["/run"]
    items = list(
        container.query_items(
            "SELECT * FROM c WHERE c.run = @id",
            parameters=[{"name": "@id", "value": run_id}],
            enable_cross_partition_query=True,
        )
    )
    assert [i["id"] for i in items] == [run_id]
    item = container.read_item(run_id, partition_key=run_id)
    assert (item["id"], item["run"], item["run_id"], item["schema"], item["state"]) == (
        run_id,
        run_id,
        run_id,
        SCHEMA,
        {"x": 1, "y": 2},
    )
    assert "gen" not in item and item["sizes"] == [len('{"x":1,"y":2}'), 2]


def test_state_just_under_2mb_and_far_over_it_are_stored(cosmos: Cosmos, run_id: str) -> None:
    """States of 1.9 MB and 5 MB are saved and load back whole: the limit is the
    store's (64 MiB by default), not an item's."""
    with cosmos.store() as store:
        for n, size in enumerate((1_900_000, 5_000_000)):
            store.save(ds.Checkpoint(f"{run_id}-{n}", -1, {"blob": "y" * size}))
            loaded = store.load(f"{run_id}-{n}")
            assert loaded is not None and len(loaded.state["blob"]) == size


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


# -- what a save sends and receives ---------------------------------------------------


def test_writes_ask_for_no_echo_and_their_answers_carry_no_state(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """Every write (segments and heads) sends "Prefer: return=minimal"; each answer is
    headers only (a few hundred bytes), with the new etag, however large the state."""
    endpoint, proxy = proxied
    state = {"doc": "x" * 100_000}
    with endpoint.store() as store:
        proxy.clear()
        v1 = store.save(ds.Checkpoint(run_id, -1, state))
        v2 = store.save(replace(v1, step=0, steps=("a",), state={**state, "more": 1}))
        loaded = store.load(run_id)
    writes = proxy.of("POST", "/docs") + proxy.of("PUT", "/docs/")
    assert sorted(w.status for w in writes) == [200, 201, 201, 201]
    for w in writes:
        assert w.headers.get("prefer") == "return=minimal"
        assert w.answer_body == b""
        assert w.received < 1000
    assert max(w.sent for w in writes) > 100_000  # the snapshot
    (head,) = proxy.of("PUT", "/docs/")
    assert head.answer_headers["etag"] == v2.etag and head.sent < 2000
    assert loaded is not None and loaded.etag == v2.etag != v1.etag


def test_every_item_sent_fits_cosmos_db_measured_as_sent(
    proxied: tuple[Cosmos, Proxy], run_id: str
) -> None:
    """A state of 1,000,000 'é' is 2 MB of UTF-8 (compact writes, azure-cosmos 4.17+),
    and with compact writes off 6 MB of \\u00e9 escapes: either way it is split into
    items that each stay under Cosmos DB's 2 MB limit as the SDK sends them, and loads
    back whole."""
    endpoint, proxy = proxied
    text = "é" * 1_000_000
    for n, options in enumerate(({}, {"enable_compact_utf8_item_writes": False})):
        with endpoint.store(**options) as store:
            proxy.clear()
            store.save(ds.Checkpoint(f"{run_id}-{n}", -1, {"text": text}))
            loaded = store.load(f"{run_id}-{n}")
        sent = proxy.of("POST", "/docs")
        assert len(sent) >= (2 if n == 0 else 4)  # the snapshot (in parts when escaped), the head
        assert all(len(w.body) <= 2 * 1024 * 1024 - 1024 for w in sent)
        assert (b"\\u00e9" in sent[0].body) == (n == 1)
        assert loaded is not None and loaded.state["text"] == text


# -- errors that say what happened ----------------------------------------------------


def test_a_deleted_container_is_not_a_deleted_run(cosmos: Cosmos, run_id: str) -> None:
    """404 with sub-status 1003 (the container is gone) on a replace is a StoreError
    saying so, not "the run was deleted meanwhile"; a load says the same, never None."""
    gone = cosmos.fresh()
    with gone.store() as store:
        cp = store.save(ds.Checkpoint(run_id, -1, {}))
        gone.drop()
        with pytest.raises(ds.StoreError, match="container does not exist") as err:
            store.save(replace(cp, step=0, steps=("a",)))
        assert not isinstance(err.value, ds.ConflictError)
        assert err.value.status_code == 404
        with pytest.raises(ds.StoreError, match="container does not exist"):
            store.load(run_id)


def test_a_key_that_is_not_base64_is_refused_before_any_request() -> None:
    """A malformed COSMOS_KEY is a ConfigurationError naming COSMOS_KEY (not the key),
    raised before any request: nothing listens on the endpoint here."""
    key = "this is not base64!"
    env = {"DURABLE_STORE": "cosmos", "COSMOS_ENDPOINT": "http://127.0.0.1:9/", "COSMOS_KEY": key}
    for make in (
        lambda: ds.store_from_env(env),
        lambda: ds.CosmosStore("http://127.0.0.1:9/", key=key),
        lambda: ds.AsyncCosmosStore("http://127.0.0.1:9/", key=key),
    ):
        with pytest.raises(ds.ConfigurationError, match="COSMOS_KEY is not an account key") as err:
            make()
        assert err.value.variable == "COSMOS_KEY"
        assert key not in str(err.value) and "base64!" not in str(err.value)


def test_entra_id_over_http_is_a_configuration_error() -> None:
    """Without a key over http://, the error says Entra ID tokens need https (emulators
    take their key) before anything is sent, instead of "cannot reach"."""
    for make in (
        lambda: ds.store_from_env({"DURABLE_STORE": "cosmos", "COSMOS_ENDPOINT": "http://h:1/"}),
        lambda: ds.CosmosStore("http://127.0.0.1:9/", credential=object()),
        lambda: ds.AsyncCosmosStore("http://127.0.0.1:9/"),
    ):
        with pytest.raises(ds.ConfigurationError, match=r"only over https.*set COSMOS_KEY") as err:
            make()
        assert err.value.variable == "COSMOS_ENDPOINT"


def test_without_azure_cosmos_the_backend_raises_missing_extra_error() -> None:
    """Importing the Cosmos backend without azure-cosmos raises MissingExtraError, a
    ConfigurationError and an ImportError whose message has the pip command."""
    code = (
        "import sys; sys.modules['azure.cosmos'] = None\n"
        "import durable_steps as ds\n"
        "try:\n  import durable_steps.stores.cosmos.store\n"
        "except ds.MissingExtraError as e:\n"
        "  print(isinstance(e, ds.ConfigurationError), isinstance(e, ImportError), e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("True True ")
    assert "pip install 'durable-steps[cosmos]'" in out.stdout


# -- listing ------------------------------------------------------------------------------


def test_listing_reports_unreadable_and_old_items_without_stopping(
    cosmos: Cosmos, run_id: str
) -> None:
    """An item no checkpoint of ours could be is listed with its error; a schema-1 item
    is listed with its derived status; neither stops the listing or hides the others."""
    raw = cosmos.raw_container()
    raw.upsert_item({"id": f"{run_id}-junk", "run": f"{run_id}-junk", "garbage": True})
    future = f"{run_id}-future"
    raw.upsert_item({"id": future, "run": future, "run_id": future, "schema": 99})
    raw.upsert_item(
        {
            "id": f"{run_id}-v1",
            "run": f"{run_id}-v1",
            "run_id": f"{run_id}-v1",
            "schema": 1,
            "step": 0,
            "steps": ["a"],
            "done": True,
            "state": {},
            "updated_at": 1.0,
        }
    )
    with cosmos.store() as store:
        store.save(ds.Checkpoint(f"{run_id}-ok", -1, {}))
        infos = {i.run_id.removeprefix(f"{run_id}-"): i for i in store.list_runs()}
        assert set(infos) == {"junk", "future", "v1", "ok"}
        assert infos["junk"].error and "unreadable" in infos["junk"].error
        assert infos["future"].error and "upgrade durable-steps" in infos["future"].error
        assert infos["ok"].error is None and infos["ok"].size > 0
        v1 = infos["v1"]
        assert (v1.error, v1.status, v1.done, v1.step_name) == (None, "completed", True, "a")
        completed = {i.run_id for i in store.list_runs(status="completed")}
        assert completed == {f"{run_id}-v1"}  # unreadable items only in unfiltered listings


def test_a_bad_run_id_sends_nothing_even_as_the_first_call(
    proxied: tuple[Cosmos, Proxy], loop: asyncio.AbstractEventLoop
) -> None:
    """The run-id rules are checked before any I/O, also when the first call of an async
    store would otherwise open its container."""
    endpoint, proxy = proxied
    store = SyncFacade(endpoint.async_store(), loop)
    try:
        proxy.clear()
        for call in (
            lambda: store.load("a/b"),
            lambda: store.save(ds.Checkpoint("a/b", -1, {})),
            lambda: store.delete("a/b"),
        ):
            with pytest.raises(ds.InvalidRunIdError):
                call()
        assert proxy.exchanges == []
    finally:
        store.close()


def test_a_small_run_begun_inline_keeps_every_step(cosmos: Cosmos, run_id: str) -> None:
    """History is the default: a small run's first save (before any step) is inline in
    its head, and each step it then completes is kept -- ``load_at`` of every step,
    the first one included, gives the state after it."""
    with cosmos.store() as store:
        cp = store.save(ds.Checkpoint(run_id, -1, {"n": -1}))
        assert "state" in cosmos.raw_container().read_item(run_id, partition_key=run_id)
        for i in range(3):
            cp = store.save(replace(cp, step=i, steps=(*cp.steps, f"s{i}"), state={"n": i}))
        assert [h.step for h in store.run_history(run_id) or []] == [0, 1, 2]
        for i in range(3):
            at = store.load_at(run_id, i)
            assert at is not None and (at.state, at.steps) == ({"n": i}, cp.steps[: i + 1])
