"""The fixtures tests share. First the contract suite's backends, built on the plugin
users get (durable_steps.testing):

file, memory                 the local stores
cosmos-local                 CosmosStore over HTTP against @vercel/cosmosdb-server
cosmos-emulator              CosmosStore against the Azure Cosmos DB emulator container
cosmos-live                  a real account, only when COSMOS_ENDPOINT is set
*-async                      the async store of each, behind a thin sync facade so
                             the same test bodies run against it

Which of file, memory, cosmos-local and cosmos-emulator run is the plugin's
``--durable-backends`` (this project's default, in pyproject.toml: all four). The
plugin gives ``cosmos_local`` and ``cosmos_emulator`` (session endpoints, a database
of their own) and a fresh store per test (``open_store``: a Cosmos container per
test, deleted after it).

Then what several test modules need: ``api`` (the public calls on every backend, sync
or async), ``pauses`` (a fake clock for retry pauses), ``store`` (a FileStore of the
test's own), ``env`` (the environment of a store that processes share), ``cli`` (the
console script on a store of the test's own), ``proxied`` and ``through`` (Cosmos DB
behind a counting proxy).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

import durable_steps as ds
from durable_steps.runner import clock as runner_clock
from durable_steps.seam.rules import RunFilter
from durable_steps.seam.store import ORPHAN_AGE
from durable_steps.testing import CosmosEndpoint, known_backends, open_store, selected_backends
from durable_steps.testing import _parametrized as parametrized

if os.environ.get("PYTHONPATH"):
    # `PYTHONPATH=src pytest` (a worktree over a shared editable install): a child that
    # runs in another directory (pytester's runpytest_subprocess, a CLI run in tmp_path)
    # must import these sources too, not whatever the install points at.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        str(Path(p).absolute()) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p
    )

from .helpers.clitools import Cli
from .helpers.proxy import Proxy, in_front_of

pytest_plugins = ["pytester"]
T = TypeVar("T")

Cosmos = CosmosEndpoint
"""The name the test modules know the plugin's endpoint by."""


COSMOS_BACKENDS = ["cosmos-local", "cosmos-emulator"]
if os.environ.get("COSMOS_ENDPOINT"):
    COSMOS_BACKENDS.append("cosmos-live")


ENCRYPTED = ["file+aes", "memory+aes-async", "cosmos-local+aes-async"]
"""Backends with their values compressed and encrypted (the plugin's ``+aes``): the
contract suite proves a codec changes nothing a store promises, on each store, sync and
async -- once per store, to keep the suite fast; CI runs every backend with a codec too
(``--durable-codec``, .github/workflows/ci.yml)."""


ENCRYPTED_MODULES = ("test_contract", "test_calls")
"""Where the encrypted backends run: the store's contract, and durable calls (whose
results are encrypted one record at a time) -- elsewhere a codec changes nothing the
store's contract does not already prove."""


def every_backend(module: str = "") -> list[str]:
    """Every backend there can be -- this package's, cosmos-live, and any another package
    registered -- and the async store of each, and the encrypted ones in the modules
    that prove them; a run uses those of --durable-backends (an encrypted one runs with
    its plain backend)."""
    names = [*known_backends(), *COSMOS_BACKENDS[2:]]
    coded = ENCRYPTED if module.rsplit(".", 1)[-1] in ENCRYPTED_MODULES else []
    return [*names, *(f"{b}-async" for b in names), *coded]


def _selected(config: pytest.Config, names: list[str]) -> list[str]:
    chosen = selected_backends(config)
    return [
        n
        for n in names
        if n.removesuffix("-async") in chosen
        or n.removesuffix("-async").removesuffix("+aes") in chosen
        or "cosmos-live" in n
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__
    for name, names in (("backend", every_backend(module)), ("cosmos", COSMOS_BACKENDS)):
        if name in metafunc.fixturenames and not parametrized(metafunc, name):
            metafunc.parametrize(name, _selected(metafunc.config, names), indirect=True)


# -- cosmos-live: a real account ------------------------------------------------------


@pytest.fixture(scope="session")
def cosmos_live() -> Cosmos:
    return Cosmos(
        os.environ["COSMOS_ENDPOINT"],
        os.environ.get("COSMOS_KEY"),
        database=os.environ.get("COSMOS_DATABASE", "durable"),
        container=os.environ.get("COSMOS_CONTAINER", "checkpoints"),
    )


@pytest.fixture
def cosmos(request: pytest.FixtureRequest) -> Iterator[Cosmos]:
    """Every Cosmos DB endpoint that exists here, on a container of the test's own
    (a real account's configured container, with fresh run ids)."""
    base: Cosmos = request.getfixturevalue(request.param.replace("-", "_"))
    if request.param == "cosmos-live":
        yield base
        return
    fresh = base.fresh()
    yield fresh
    fresh.drop()


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


class SyncFacade(ds.Store):
    """A sync Store over an AsyncStore: every call is awaited on the loop thread."""

    def __init__(self, store: ds.AsyncStore, loop: asyncio.AbstractEventLoop) -> None:
        self.aio, self._loop = store, loop
        self.kind = store.kind  # type: ignore[misc] # the async store's
        self.max_state_bytes = store.max_state_bytes

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    def load(self, run_id: str) -> ds.Checkpoint | None:
        return self._wait(self.aio.load(run_id))

    def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return self._wait(self.aio.save(checkpoint))

    def load_head(self, run_id: str) -> ds.Checkpoint | None:
        return self._wait(self.aio.load_head(run_id))

    def save_head(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        return self._wait(self.aio.save_head(checkpoint))

    def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return self._wait(self.aio.delete(run_id, etag=etag))

    def append_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._wait(self.aio.append_item(run_id, kind, key, value))

    def put_item(self, run_id: str, kind: str, key: str, value: Any) -> None:
        self._wait(self.aio.put_item(run_id, kind, key, value))

    def read_items(
        self, run_id: str, kind: str, *, after: str | None = None, limit: int | None = None
    ) -> list[Any]:
        return self._wait(self.aio.read_items(run_id, kind, after=after, limit=limit))

    def listing(self, filters: RunFilter) -> Iterator[ds.RunInfo]:
        async def collect(it: AsyncIterator[ds.RunInfo]) -> list[ds.RunInfo]:
            return [i async for i in it]

        return iter(self._wait(collect(self.aio.listing(filters))))

    def run_info(self, run_id: str) -> ds.RunInfo | None:
        return self._wait(self.aio.run_info(run_id))

    def takeable(self, workflows: Sequence[str], *, at: float) -> Iterator[ds.RunInfo]:
        async def collect(it: AsyncIterator[ds.RunInfo]) -> list[ds.RunInfo]:
            return [i async for i in it]

        return iter(self._wait(collect(self.aio.takeable(workflows, at=at))))

    def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        return self._wait(self.aio.prune_orphans(older_than))

    # -- history and retention (issue 33) --

    def run_history(self, run_id: str) -> list[ds.StepRecord] | None:
        return self._wait(self.aio.run_history(run_id))

    def load_at(self, run_id: str, step: int) -> ds.Checkpoint | None:
        return self._wait(self.aio.load_at(run_id, step))

    def delete_expired(self, now: float | None = None) -> int:
        return self._wait(self.aio.delete_expired(now))

    def close(self) -> None:
        self._wait(self.aio.close())


# -- the one backend fixture of the contract suite -------------------------------------


@dataclass
class Backend:
    name: str
    store: Any
    write_raw: Callable[[str, Any], None]
    """Store a raw document (a dict, or bytes for file stores) as run_id's checkpoint."""
    path: Path | None = None
    """A file store's directory (to list what is left of a run)."""
    cosmos: Cosmos | None = None
    """A Cosmos DB store's container (to list what is left of a run)."""


def _raw(doc: Any) -> bytes:
    return doc if isinstance(doc, bytes) else json.dumps(doc).encode()


def _raw_file_writer(path: Path) -> Callable[[str, Any], None]:
    """Raw documents as the file of their run in the layout of durable-steps 0.1 (one whole
    JSON document, not a journal): FileStore keeps reading that layout, so the contract
    tests of corrupt and old checkpoints hold for it."""

    def write(run_id: str, doc: Any) -> None:
        ds.FileStore(path).file_for(run_id).write_bytes(_raw(doc))

    return write


def _raw_memory_writer(store: ds.MemoryStore) -> Callable[[str, Any], None]:
    def write(run_id: str, doc: Any) -> None:
        store._runs[run_id] = _raw(doc)

    return write


def _raw_cosmos_writer(cosmos: Cosmos) -> Callable[[str, Any], None]:
    def write(run_id: str, doc: Any) -> None:
        if isinstance(doc, bytes):
            doc = {"garbage": doc.decode(errors="replace")}
        # ``run``: the partition key of the layout the store creates (/run); a container
        # of the earlier layout (/id) keeps it as one more field.
        body = {**(doc if isinstance(doc, dict) else {"value": doc}), "id": run_id, "run": run_id}
        cosmos.raw_container().upsert_item(body)

    return write


@pytest.fixture
def backend(request: pytest.FixtureRequest, loop: asyncio.AbstractEventLoop) -> Iterator[Backend]:
    name: str = request.param
    base, is_async = name.removesuffix("-async"), name.endswith("-async")
    if base == "cosmos-live":
        live: Cosmos = request.getfixturevalue("cosmos_live")
        store: Any = live.async_store() if is_async else live.store()
        facade = SyncFacade(store, loop) if is_async else store
        yield Backend(name, facade, _raw_cosmos_writer(live))
        facade.close()
        return
    with open_store(request, base, is_async=is_async) as opened:
        if opened.path is not None:
            writer = _raw_file_writer(opened.path)
        elif opened.cosmos is not None:
            writer = _raw_cosmos_writer(opened.cosmos)
        elif opened.write_raw is not None:  # a backend another package registered
            writer = functools.partial(opened.write_raw, opened.store)
        else:
            writer = _raw_memory_writer(opened.store.sync if is_async else opened.store)
        facade = SyncFacade(opened.store, loop) if is_async else opened.store
        yield Backend(name, facade, writer, opened.path, opened.cosmos)
        if is_async:
            facade.close()


@pytest.fixture
def run_id() -> str:
    """A fresh run id per test, so shared servers need no cleanup."""
    return f"test-{uuid.uuid4()}"


# -- the public calls on every backend ----------------------------------------------------


@dataclass
class Api:
    """The public calls, sync for sync stores and awaited (on the test loop) for async ones."""

    backend: Backend
    loop: asyncio.AbstractEventLoop

    @property
    def is_async(self) -> bool:
        return self.backend.name.endswith("-async")

    @property
    def store(self) -> Any:
        return self.backend.store

    def _call(
        self, sync: Callable[..., Any], aio: Callable[..., Any], *args: Any, **kw: Any
    ) -> Any:
        if not self.is_async:
            return sync(self.store, *args, **kw)
        future = asyncio.run_coroutine_threadsafe(aio(self.store.aio, *args, **kw), self.loop)
        return future.result(60)

    def run(self, run_id: str, steps: list[ds.Step], **kw: Any) -> dict[str, Any]:
        return self._call(  # type: ignore[no-any-return]
            lambda s, *a, **k: ds.run(a[0], a[1], s, **k),
            lambda s, *a, **k: ds.run_async(a[0], a[1], s, **k),
            run_id,
            steps,
            **kw,
        )

    def start(self, w: ds.Workflow, run_id: str, **kw: Any) -> dict[str, Any]:
        return self._call(  # type: ignore[no-any-return]
            lambda s, *a, **k: w.run(a[0], s, **k),
            lambda s, *a, **k: w.run_async(a[0], s, **k),
            run_id,
            **kw,
        )

    def create(self, w: ds.Workflow, run_id: str, **kw: Any) -> bool:
        """``Workflow.start``: the run created for the workers, nothing run."""
        return self._call(  # type: ignore[no-any-return]
            lambda s, *a, **k: w.start(a[0], s, **k),
            lambda s, *a, **k: w.start_async(a[0], s, **k),
            run_id,
            **kw,
        )

    def signal(self, run_id: str, name: str, payload: Any = None) -> ds.Checkpoint:
        return self._call(ds.send_signal, ds.send_signal_async, run_id, name, payload)  # type: ignore[no-any-return]

    def recover(self, workflows: list[ds.Workflow], **kw: Any) -> list[ds.Recovered]:
        return self._call(ds.recover, ds.recover_async, workflows, **kw)  # type: ignore[no-any-return]

    def cancel(self, run_id: str, **kw: Any) -> bool:
        return self._call(ds.cancel_run, ds.cancel_run_async, run_id, **kw)  # type: ignore[no-any-return]

    def result(self, run_id: str, **kw: Any) -> dict[str, Any]:
        return self._call(ds.wait_for_result, ds.wait_for_result_async, run_id, **kw)  # type: ignore[no-any-return]

    def fork(self, run_id: str, new_run_id: str, **kw: Any) -> ds.Checkpoint:
        """``fork_run`` (issue 33)."""
        return self._call(ds.fork_run, ds.fork_run_async, run_id, new_run_id, **kw)  # type: ignore[no-any-return]

    def step(self, name: str, body: Callable[[Any], Any], **kw: Any) -> ds.Step:
        """A step from an ``async def`` body: awaited under run_async, and under run run
        with ``asyncio.run`` in the step (where ``call_async`` saves with blocking I/O)."""
        if self.is_async:
            return ds.Step(name, body, **kw)
        return ds.Step(name, lambda state: asyncio.run(body(state)), **kw)


@pytest.fixture
def api(backend: Backend, loop: asyncio.AbstractEventLoop) -> Api:
    return Api(backend, loop)


def pause_with(monkeypatch: pytest.MonkeyPatch, pause: Callable[[float], Any]) -> None:
    """A fake clock: retry pauses call ``pause(seconds)`` instead of sleeping, under run()
    and under run_async() (there in a worker thread, so the event loop stays free)."""

    async def asleep(seconds: float) -> None:
        await asyncio.to_thread(pause, seconds)

    monkeypatch.setattr(runner_clock, "_sleep", pause)
    monkeypatch.setattr(runner_clock, "_asleep", asleep)


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake clock for retry backoff: pauses are recorded, not slept."""
    seen: list[float] = []
    pause_with(monkeypatch, seen.append)
    return seen


class Clock:
    """A fake wall clock for timers, deadlines and result polling: ``now`` stands still
    until a test moves it (``advance``), and a poll's pause moves it by its length."""

    def __init__(self) -> None:
        self.now = time.time()

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(runner_clock, "_now", lambda: fake.now)
    pause_with(monkeypatch, fake.advance)
    return fake


# -- one store of the test's own ------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ds.FileStore]:
    """A FileStore in the test's directory (the file store's own tests), closed after."""
    with ds.FileStore(tmp_path / "store") as opened:
        yield opened


def store_env(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> dict[str, str]:
    """The variables that make store_from_env() open ``backend``: ``file`` (in the
    test's directory), ``memory``, or ``cosmos-local`` (the local Cosmos DB server)."""
    if backend == "cosmos-local":
        cosmos: Cosmos = request.getfixturevalue("cosmos_local")
        return cosmos.env()
    return {"DURABLE_STORE": backend, "DURABLE_FILE_PATH": str(tmp_path / "store")}


@pytest.fixture(params=["file", "cosmos-local"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment of a store that several processes (or event loops) can share."""
    return store_env(request, tmp_path, request.param)


@pytest.fixture(params=["file", "cosmos-local"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    """The console script on a store of the test's own: a file store in the test's
    directory, or a fresh container on the local Cosmos DB server."""
    if request.param == "file":
        ds.FileStore(tmp_path / "store").close()  # there, as after a run (the CLI makes none)
        yield Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path / "store")})
        return
    cosmos = request.getfixturevalue("cosmos_local").fresh()
    try:
        yield Cli(cosmos.env())
    finally:
        cosmos.drop()


# -- Cosmos DB behind a proxy -------------------------------------------------------------


@pytest.fixture
def proxied(cosmos_local: Cosmos) -> Iterator[tuple[Cosmos, Proxy]]:
    """The local Cosmos DB server behind a counting proxy: the endpoint through it, and
    the proxy."""
    with in_front_of(cosmos_local) as pair:
        yield pair


@pytest.fixture(params=["sync", "async"])
def through(
    request: pytest.FixtureRequest,
    proxied: tuple[Cosmos, Proxy],
    loop: asyncio.AbstractEventLoop,
) -> Iterator[tuple[Any, Proxy, Cosmos]]:
    """A CosmosStore (or AsyncCosmosStore behind a sync facade) whose every request goes
    through a proxy; also the container's direct endpoint, for a second writer."""
    endpoint, proxy = proxied
    store: Any = (
        endpoint.store() if request.param == "sync" else SyncFacade(endpoint.async_store(), loop)
    )
    try:
        store.load("warm-up")  # the async store resolves its container on first use
        proxy.clear()
        yield store, proxy, replace(endpoint, endpoint=proxy.upstream_url)
    finally:
        store.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Each distinct skip reason once, with how many tests it skipped."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in reasons.items():
        terminalreporter.write_line(f"SKIPPED {count} tests: {reason}")
