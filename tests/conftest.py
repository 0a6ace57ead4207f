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
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

import durable_steps as ds
from durable_steps.runner import clock as runner_clock
from durable_steps.testing import CosmosEndpoint, known_backends, selected_backends
from durable_steps.testing import _parametrized as parametrized
from durable_steps.testing.contract import fixtures as contract
from durable_steps.testing.contract.fixtures import Backend, SyncFacade, cosmos_hooks, open_backend

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

loop, run_id = contract.loop, contract.run_id  # the shipped suite's fixtures, for every test


COSMOS_BACKENDS = ["cosmos-local", "cosmos-emulator"]
if os.environ.get("COSMOS_ENDPOINT"):
    COSMOS_BACKENDS.append("cosmos-live")


ENCRYPTED = ["file+aes", "memory+aes-async", "cosmos-local+aes-async"]
"""Backends with their values compressed and encrypted (the plugin's ``+aes``): the
contract suite proves a codec changes nothing a store promises, on each store, sync and
async -- once per store, to keep the suite fast; CI runs every backend with a codec too
(``--durable-codec``, .github/workflows/ci.yml)."""


ENCRYPTED_MODULES = ("test_contract", "test_calls", "test_langgraph_conformance")
"""Where the encrypted backends run: the store's contract, and durable calls (whose
results are encrypted one record at a time) -- elsewhere a codec changes nothing the
store's contract does not already prove."""


def every_backend(module: str = "", chosen: Sequence[str] = ()) -> list[str]:
    """Every backend there can be -- this package's, cosmos-live, and any another package
    registered -- and the async store of each, and the encrypted ones in the modules
    that prove them; a run uses those of --durable-backends (an encrypted one runs with
    its plain backend; one chosen as NAME+aes runs encrypted, sync and async)."""
    names = [*known_backends(), *COSMOS_BACKENDS[2:]]
    asked = [n for n in chosen if n.endswith("+aes") and n not in names]
    coded = ENCRYPTED if module.rsplit(".", 1)[-1] in ENCRYPTED_MODULES else []
    coded = [*coded, *(c for n in asked for c in (n, f"{n}-async") if c not in coded)]
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
    chosen = selected_backends(metafunc.config)
    for name, names in (("backend", every_backend(module, chosen)), ("cosmos", COSMOS_BACKENDS)):
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


# -- the contract suite's backends (shipped: durable_steps.testing.contract) ------------


@pytest.fixture
def backend(request: pytest.FixtureRequest, loop: asyncio.AbstractEventLoop) -> Iterator[Backend]:
    """The shipped suite's ``backend``, and ``cosmos-live`` (a real account)."""
    name: str = request.param
    if name.removesuffix("-async") != "cosmos-live":
        with open_backend(request, name, loop) as opened:
            yield opened
        return
    live: Cosmos = request.getfixturevalue("cosmos_live")
    is_async = name.endswith("-async")
    store: Any = live.async_store() if is_async else live.store()
    facade = SyncFacade(store, loop) if is_async else store
    yield Backend(name, facade, *cosmos_hooks(live))
    facade.close()


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
