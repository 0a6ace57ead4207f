"""Backends for the contract suite, from one parametrised fixture.

file, memory                 the local stores
cosmos-local                 CosmosStore over HTTP against @vercel/cosmosdb-server
cosmos-emulator              CosmosStore against the Azure Cosmos DB emulator container
cosmos-live                  a real account, only when COSMOS_ENDPOINT is set
*-async                      the async store of each, behind a thin sync facade so
                             the same test bodies run against it
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from .servers import EMULATOR_KEY, ServerError, start_cosmosdb_server, stop

VNEXT_IMAGE = "mcr.microsoft.com/cosmosdb/linux/azure-cosmos-emulator:vnext-EN20250117"


@dataclass
class Cosmos:
    """Where a Cosmos DB endpoint for tests lives and how to open stores on it."""

    endpoint: str
    key: str | None
    verify_tls: bool = True
    database: str = "durable-tests"
    container: str = "checkpoints"

    def env(self) -> dict[str, str]:
        env = {
            "DURABLE_STORE": "cosmos",
            "COSMOS_ENDPOINT": self.endpoint,
            "COSMOS_DATABASE": self.database,
            "COSMOS_CONTAINER": self.container,
            "COSMOS_VERIFY_TLS": str(self.verify_tls).lower(),
        }
        if self.key:
            env["COSMOS_KEY"] = self.key
        return env

    def kwargs(self, **extra: Any) -> dict[str, Any]:
        return {
            "key": self.key,
            "database": self.database,
            "container": self.container,
            "verify_tls": self.verify_tls,
            **extra,
        }

    def store(self, **extra: Any) -> ds.CosmosStore:
        return ds.CosmosStore(self.endpoint, **self.kwargs(**extra))

    def raw_container(self) -> Any:
        """The container through azure-cosmos directly, to check what the store wrote."""
        from azure.cosmos import CosmosClient

        client = CosmosClient(
            self.endpoint,
            credential=self.key,
            connection_verify=self.verify_tls,
            enable_endpoint_discovery=False,
        )
        return client.get_database_client(self.database).get_container_client(self.container)


# -- cosmos-local: the npm protocol server, a real process on loopback ----------------


@pytest.fixture(scope="session")
def cosmos_local() -> Iterator[Cosmos]:
    try:
        proc, endpoint = start_cosmosdb_server()
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    cosmos = Cosmos(endpoint, EMULATOR_KEY)
    cosmos.store(create_if_missing=True).close()
    yield cosmos
    stop(proc)


# -- cosmos-emulator: the Azure Cosmos DB emulator container through testcontainers -----


def _no_docker_engine() -> str | None:
    """Why no Docker engine answers (None when one does), asked in at most 3 seconds."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return None  # tcp:// or ssh://: docker-py finds out itself
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(3)
            sock.connect(host.removeprefix("unix://"))
            sock.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            reply = sock.recv(64)
    except OSError as exc:
        return f"{host}: {exc.strerror or exc}"
    return None if b" 200 " in reply else f"{host} answered {reply[:40]!r}"


def _docker_or_skip(image: str) -> None:
    if why := _no_docker_engine():
        pytest.skip(
            f"cosmos-emulator: no Docker engine answers here ({why}); "
            "it runs wherever Docker does (see .github/workflows/ci.yml)"
        )
    import docker

    with docker.from_env(timeout=300) as client:
        try:
            client.images.get(image)
        except Exception:
            try:
                client.images.pull(image)
            except Exception as exc:
                pytest.skip(f"cosmos-emulator: cannot pull {image} ({type(exc).__name__})")


def _wait_ready(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)  # the vnext emulator answers 5xx for a few seconds after start


@pytest.fixture(scope="session")
def cosmos_emulator() -> Iterator[Cosmos]:
    if endpoint := os.environ.get("DURABLE_TEST_EMULATOR_ENDPOINT"):
        # A running emulator, e.g. a CI service container.
        cosmos = Cosmos(endpoint, EMULATOR_KEY, verify_tls=not endpoint.startswith("https"))
        _retry_5xx(lambda: cosmos.store(create_if_missing=True).close())
        yield cosmos
        return
    image = os.environ.get("AZURE_COSMOS_EMULATOR_IMAGE", VNEXT_IMAGE)
    _docker_or_skip(image)
    if "vnext" in image:
        from testcontainers.core.container import DockerContainer

        container = (
            DockerContainer(image)
            .with_exposed_ports(8081, 8080)
            .with_env("ENABLE_EXPLORER", "false")
            .with_command("--protocol http")
        )
        with container:
            host = container.get_container_host_ip()
            _wait_ready(f"http://{host}:{container.get_exposed_port(8080)}/ready", 120)
            cosmos = Cosmos(f"http://{host}:{container.get_exposed_port(8081)}/", EMULATOR_KEY)
            _retry_5xx(lambda: cosmos.store(create_if_missing=True).close())
            yield cosmos
    else:
        from testcontainers.community.cosmosdb import CosmosDBNoSQLEndpointContainer

        with CosmosDBNoSQLEndpointContainer(image=image) as legacy:
            cosmos = Cosmos(legacy.url, legacy.key, verify_tls=False)
            cosmos.store(create_if_missing=True).close()
            yield cosmos


def _retry_5xx(fn: Callable[[], None], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except ds.StoreError as exc:
            if (exc.status_code or 0) < 500 or time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest.fixture(scope="session")
def cosmos_live() -> Cosmos:
    return Cosmos(
        os.environ["COSMOS_ENDPOINT"],
        os.environ.get("COSMOS_KEY"),
        database=os.environ.get("COSMOS_DATABASE", "durable"),
        container=os.environ.get("COSMOS_CONTAINER", "checkpoints"),
    )


COSMOS_BACKENDS = ["cosmos-local", "cosmos-emulator"]
if os.environ.get("COSMOS_ENDPOINT"):
    COSMOS_BACKENDS.append("cosmos-live")


@pytest.fixture(params=COSMOS_BACKENDS)
def cosmos(request: pytest.FixtureRequest) -> Cosmos:
    """Every Cosmos DB endpoint that exists here."""
    return request.getfixturevalue(request.param.replace("-", "_"))  # type: ignore[no-any-return]


# -- the async stores behind a sync facade ---------------------------------------------


@pytest.fixture(scope="session")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop in a thread, so that sync test bodies can drive async stores."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


class SyncFacade:
    """A sync Store over an AsyncStore: every call is awaited on the loop thread."""

    def __init__(self, store: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.aio, self._loop = store, loop

    def _wait(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    def load(self, run_id: str) -> ds.Checkpoint | None:
        return self._wait(self.aio.load(run_id))  # type: ignore[no-any-return]

    def save(self, cp: ds.Checkpoint) -> ds.Checkpoint:
        return self._wait(self.aio.save(cp))  # type: ignore[no-any-return]

    def delete(self, run_id: str, **kw: Any) -> bool:
        return self._wait(self.aio.delete(run_id, **kw))  # type: ignore[no-any-return]

    def list_runs(self, **filters: Any) -> Iterator[ds.RunInfo]:
        async def collect(it: AsyncIterator[ds.RunInfo]) -> list[ds.RunInfo]:
            return [i async for i in it]

        return iter(self._wait(collect(self.aio.list_runs(**filters))))

    def close(self) -> None:
        self._wait(self.aio.close())


# -- the one backend fixture of the contract suite -------------------------------------


@dataclass
class Backend:
    name: str
    store: Any
    write_raw: Callable[[str, Any], None]
    """Store a raw document (a dict, or bytes for file stores) as run_id's checkpoint."""


def _raw_file_writer(path: Path) -> Callable[[str, Any], None]:
    def write(run_id: str, doc: Any) -> None:
        target = ds.FileStore(path).file_for(run_id)
        target.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())

    return write


def _raw_memory_writer(store: ds.MemoryStore) -> Callable[[str, Any], None]:
    def write(run_id: str, doc: Any) -> None:
        store._runs[run_id] = doc if isinstance(doc, bytes) else json.dumps(doc).encode()

    return write


def _raw_cosmos_writer(cosmos: Cosmos) -> Callable[[str, Any], None]:
    container = cosmos.raw_container()

    def write(run_id: str, doc: Any) -> None:
        if isinstance(doc, bytes):
            doc = {"garbage": doc.decode(errors="replace")}
        container.upsert_item({**(doc if isinstance(doc, dict) else {"value": doc}), "id": run_id})

    return write


BACKENDS = ["file", "memory", *COSMOS_BACKENDS]
BACKENDS += [f"{b}-async" for b in BACKENDS]


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> Iterator[Backend]:
    name: str = request.param
    base, is_async = name.removesuffix("-async"), name.endswith("-async")
    store: Any
    if base == "file":
        store = ds.AsyncFileStore(tmp_path) if is_async else ds.FileStore(tmp_path)
        writer = _raw_file_writer(tmp_path)
    elif base == "memory":
        store = ds.AsyncMemoryStore() if is_async else ds.MemoryStore()
        writer = _raw_memory_writer(store.sync if is_async else store)
    else:
        cosmos: Cosmos = request.getfixturevalue(base.replace("-", "_"))
        store = (
            ds.AsyncCosmosStore(cosmos.endpoint, **cosmos.kwargs()) if is_async else cosmos.store()
        )
        writer = _raw_cosmos_writer(cosmos)
    facade = SyncFacade(store, loop) if is_async else store
    yield Backend(name, facade, writer)
    facade.close()


@pytest.fixture
def run_id() -> str:
    """A fresh run id per test, so shared servers need no cleanup."""
    return f"test-{uuid.uuid4()}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Each distinct skip reason once, with how many tests it skipped."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in reasons.items():
        terminalreporter.write_line(f"SKIPPED {count} tests: {reason}")
