"""durable_steps.testing: a pytest plugin to test your workflows on every store.

Installed with ``pip install 'durable-steps[testing]'`` and loaded by pytest through
the ``pytest11`` entry point ``durable_steps`` (``-p no:durable_steps`` turns it off;
``import durable_steps`` never imports it). It adds:

- ``durable_store`` / ``async_durable_store``: a fresh, empty store per test, the test
  run once per backend chosen with ``--durable-backends`` (or the ini option
  ``durable_backends``; default ``file,memory``). Backends: ``file`` (a FileStore in
  the test's ``tmp_path``), ``memory``, ``cosmos-local`` and ``cosmos-emulator`` (a
  CosmosStore on a container of its own, deleted after the test). The async store is
  not open yet: ``async with async_durable_store as store:`` in your test opens it in
  your event loop and closes it, whatever runs your async tests.
- ``cosmos_emulator`` (session): the Azure Cosmos DB emulator (Linux vNext, pinned in
  ``_emulator.IMAGE``) started through testcontainers, or the running emulator named
  by ``DURABLE_TEST_EMULATOR_ENDPOINT``; ``cosmos_local`` (session): the npm protocol
  server (``durable_steps.devtools.cosmos_server``, which ``durable-steps dev
  cosmos-server`` starts too). Each yields a ``CosmosEndpoint`` with a database of its own.
- Skips only where a backend cannot exist here, with one line: no Docker engine, no
  Node.js or no ``@vercel/cosmosdb-server``, or a backend not among
  ``--durable-backends``. With ``--durable-strict`` those of the selected backends
  fail instead (for CI, where they must run). An engine that answers but cannot pull
  or start the emulator always fails.

Nothing here imports azure-cosmos, docker or testcontainers until a Cosmos backend
is used, so the plugin costs nothing in test runs that do not use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

import durable_steps as ds

from ..devtools.cosmos_server import ServerError, ServerMissing, start_cosmosdb_server, stop
from ..runner.replay import RunReplay, replay, replay_async
from ..seam.codec import ValueCodec
from ..seam.coded import AsyncCodedStore, CodedStore
from ..stores import registry
from . import _codec
from ._emulator import IMAGE, EmulatorError, no_docker_engine, start_emulator, wait_ready
from ._emulator import image as emulator_image
from ._emulator import timeout as emulator_timeout
from ._endpoint import EMULATOR_KEY, CosmosEndpoint, unique

__all__ = [
    "BACKENDS",
    "EMULATOR_KEY",
    "IMAGE",
    "CosmosEndpoint",
    "OpenStore",
    "RunReplay",
    "known_backends",
    "open_store",
    "replay",
    "replay_async",
    "selected_backends",
]

BACKENDS = ("file", "memory", "cosmos-local", "cosmos-emulator")
"""The backends of this package; a backend registered by another package (the entry
point group ``durable_steps.stores``, with a ``fresh``) is one more, by its scheme."""
DEFAULT_BACKENDS = "file,memory"
STORE_FIXTURES = ("durable_store", "async_durable_store")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("durable-steps")
    group.addoption(
        "--durable-backends",
        default=None,
        metavar="LIST",
        help=f"comma-separated stores to run durable_store tests on: {', '.join(BACKENDS)} "
        f"(default: the durable_backends ini option, else {DEFAULT_BACKENDS})",
    )
    group.addoption(
        "--durable-codec",
        default=None,
        choices=_codec.CODECS,
        help="encode the values of every store made for a test with this codec (as "
        "DURABLE_CODEC names it; a random key per session). Or name backends NAME+aes "
        "(file+aes, memory+aes, cosmos-local+aes) to run them encrypted beside plain ones",
    )
    group.addoption(
        "--durable-strict",
        action="store_true",
        help="a selected backend that cannot run here fails instead of skipping",
    )
    parser.addini("durable_backends", "default for --durable-backends", default=DEFAULT_BACKENDS)


def known_backends() -> tuple[str, ...]:
    """This package's backends, then those other packages registered."""
    others = (n for n in registry.names() if n not in registry.BUILT_IN)
    return (*BACKENDS, *others)


def selected_backends(config: pytest.Config) -> tuple[str, ...]:
    """The backends this test run uses, in the order given."""
    raw = config.getoption("--durable-backends") or config.getini("durable_backends")
    names = tuple(dict.fromkeys(n.strip() for n in str(raw).split(",") if n.strip()))
    known = known_backends()
    unknown = [n for n in names if _codec.split(n)[0] not in known]
    if unknown or not names:
        raise pytest.UsageError(
            f"--durable-backends={raw!r}: {', '.join(map(repr, unknown)) or 'nothing'} is not "
            f"a backend; choose from {','.join(known)}"
        )
    return names


def pytest_configure(config: pytest.Config) -> None:
    selected_backends(config)  # a typo fails the run at once, not test by test


def pytest_report_header(config: pytest.Config) -> str:
    return f"durable-steps backends: {','.join(selected_backends(config))}"


def _parametrized(metafunc: pytest.Metafunc, name: str) -> bool:
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = names.split(",")
        if name in (n.strip() for n in names):
            return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name in STORE_FIXTURES:
        if name in metafunc.fixturenames and not _parametrized(metafunc, name):
            metafunc.parametrize(name, selected_backends(metafunc.config), indirect=True)


def _cannot_run(request: pytest.FixtureRequest, reason: str) -> NoReturn:
    if request.config.getoption("--durable-strict"):
        pytest.fail(f"{reason} (--durable-strict)", pytrace=False)
    pytest.skip(reason)


def _require_selected(request: pytest.FixtureRequest, backend: str) -> None:
    chosen = selected_backends(request.config)
    if backend not in (_codec.split(n)[0] for n in chosen):
        pytest.skip(f"{backend} is not among --durable-backends ({','.join(chosen)})")


# -- the Cosmos DB endpoints (session) ---------------------------------------------------


@pytest.fixture(scope="session")
def cosmos_local(request: pytest.FixtureRequest) -> Iterator[CosmosEndpoint]:
    """``@vercel/cosmosdb-server`` on a free loopback port, a database of this session."""
    _require_selected(request, "cosmos-local")
    try:
        proc, endpoint = start_cosmosdb_server(request.config.rootpath)
    except ServerMissing as exc:
        _cannot_run(request, f"cosmos-local: {exc}")
    except ServerError as exc:
        pytest.fail(f"cosmos-local: {exc}", pytrace=False)
    try:
        cosmos = CosmosEndpoint(endpoint, EMULATOR_KEY, database=unique("durable-tests"))
        cosmos.create()
        yield cosmos
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def cosmos_emulator(request: pytest.FixtureRequest) -> Iterator[CosmosEndpoint]:
    """The Cosmos DB emulator: DURABLE_TEST_EMULATOR_ENDPOINT if set, else the pinned
    vNext container (AZURE_COSMOS_EMULATOR_IMAGE overrides it); a database of this
    session in it."""
    _require_selected(request, "cosmos-emulator")
    seconds = emulator_timeout()
    if endpoint := os.environ.get("DURABLE_TEST_EMULATOR_ENDPOINT"):
        # A running emulator (a CI service, one on your laptop): its self-signed
        # certificate, if it serves https, is accepted.
        try:
            wait_ready(None, endpoint, seconds=seconds)
        except EmulatorError as exc:
            pytest.fail(f"cosmos-emulator at DURABLE_TEST_EMULATOR_ENDPOINT: {exc}", pytrace=False)
        cosmos = _session_database(endpoint, seconds, verify_tls=not endpoint.startswith("https"))
        try:
            yield cosmos
        finally:
            cosmos.drop_database()  # the emulator outlives this session: leave nothing
        return
    if why := no_docker_engine():
        _cannot_run(
            request,
            f"cosmos-emulator: no Docker engine answers here ({why}); "
            "set DOCKER_HOST if one listens elsewhere",
        )
    try:
        emulator = start_emulator(emulator_image(), seconds)
    except EmulatorError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield _session_database(emulator.endpoint, seconds)
    finally:
        emulator.stop()  # the database goes with the container


def _session_database(endpoint: str, seconds: float, verify_tls: bool = True) -> CosmosEndpoint:
    cosmos = CosmosEndpoint(
        endpoint, EMULATOR_KEY, verify_tls=verify_tls, database=unique("durable-tests")
    )
    cosmos.create(seconds)  # the emulator may still answer 503 for a moment after /ready
    return cosmos


# -- a fresh store per test --------------------------------------------------------------


@dataclass
class OpenStore:
    """A test's store and where it keeps its data (to look at it from the test)."""

    backend: str
    store: ds.Store | ds.AsyncStore
    path: Path | None = None  # file
    cosmos: CosmosEndpoint | None = None  # cosmos-local, cosmos-emulator
    write_raw: Callable[[ds.Store | ds.AsyncStore, str, object], None] | None = None
    """A registered backend's: stores a checkpoint as it is, for tests of damaged ones."""
    raw_bytes: Callable[[], bytes] | None = None
    """A registered backend's: everything the store holds, as bytes (``Backend.raw_bytes``,
    else the files under the directory ``fresh`` was given)."""


@contextmanager
def open_store(
    request: pytest.FixtureRequest, backend: str, *, is_async: bool = False
) -> Iterator[OpenStore]:
    """A new, empty store of ``backend`` for one test; gone (or deleted) afterwards.
    A sync store is closed here; an async one is closed by whoever opened it.
    ``NAME+aes``: that backend with its values compressed and encrypted (``_codec``)."""
    name, encrypted = _codec.split(backend)
    codec = _codec.codec_for(request.config, encrypted)
    if name == "file":
        path = request.getfixturevalue("tmp_path") / ".durable"
        store: ds.Store | ds.AsyncStore = (
            ds.AsyncFileStore(path, codec=codec) if is_async else ds.FileStore(path, codec=codec)
        )
        yield OpenStore(backend, store, path=path)
    elif name == "memory":
        store = ds.AsyncMemoryStore(codec=codec) if is_async else ds.MemoryStore(codec=codec)
        yield OpenStore(backend, store)
    elif name not in BACKENDS:
        with _registered(request, name, is_async, codec) as opened:
            yield opened
    else:
        base: CosmosEndpoint = request.getfixturevalue(name.replace("-", "_"))
        cosmos = base.fresh()
        try:
            store = cosmos.async_store(codec=codec) if is_async else cosmos.store(codec=codec)
            try:
                yield OpenStore(backend, store, cosmos=cosmos)
            finally:
                if not is_async:
                    store.close()
        finally:
            cosmos.drop()


@contextmanager
def _registered(
    request: pytest.FixtureRequest, name: str, is_async: bool, codec: ValueCodec | None
) -> Iterator[OpenStore]:
    """A store of a backend another package registered, made new by its ``fresh``."""
    if name not in registry.names():
        raise ValueError(f"{name!r} is not a backend; choose from {', '.join(known_backends())}")
    backend = registry.backend_for(f"{name}:")
    if backend.fresh is None:
        raise pytest.UsageError(
            f"the store backend {name!r} has no fresh(directory) -> URL, so it cannot make an "
            "empty store per test; give its Backend one"
        )
    directory = request.getfixturevalue("tmp_path")
    url = backend.fresh(directory)
    opening = registry.Opening(url, dict(os.environ), codec=codec)
    store: ds.Store | ds.AsyncStore = (
        registry.open_async_store(backend, opening)
        if is_async
        else registry.open_store(backend, opening)
    )
    # The backend's hooks are given its own store, under the library's codec.
    inner = store.inner if isinstance(store, CodedStore | AsyncCodedStore) else store
    write, raw = backend.write_raw, backend.raw_bytes
    try:
        yield OpenStore(
            name,
            store,
            write_raw=None if write is None else lambda _, run_id, doc: write(inner, run_id, doc),
            raw_bytes=(lambda: raw(inner)) if raw is not None else (lambda: files_under(directory)),
        )
    finally:
        if isinstance(store, ds.Store):
            store.close()


def files_under(directory: Path) -> bytes:
    """Every file under ``directory``, concatenated (a backend's raw bytes by default)."""
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def _backend_of(request: pytest.FixtureRequest) -> str:
    param = getattr(request, "param", None)
    return str(param) if param is not None else selected_backends(request.config)[0]


@pytest.fixture
def durable_store(request: pytest.FixtureRequest) -> Iterator[ds.Store]:
    """A fresh, empty store; the test runs once per backend of --durable-backends."""
    with open_store(request, _backend_of(request)) as opened:
        assert isinstance(opened.store, ds.Store)
        yield opened.store


@pytest.fixture
def async_durable_store(request: pytest.FixtureRequest) -> Iterator[ds.AsyncStore]:
    """A fresh, empty async store, not open yet: ``async with async_durable_store as s``."""
    with open_store(request, _backend_of(request), is_async=True) as opened:
        assert isinstance(opened.store, ds.AsyncStore)
        yield opened.store
