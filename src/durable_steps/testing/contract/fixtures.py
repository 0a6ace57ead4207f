"""The fixtures of the contract suite: one ``backend`` per store of
``--durable-backends``, blocking and async (the async store behind ``SyncFacade``, so
one test body runs on both), with the two ways in that only a suite may use --
``write_raw`` (a document stored as it is, bypassing every check: damaged checkpoints)
and ``raw_bytes`` (everything the store holds, as bytes: a secret must never be there).

Built on the plugin's ``open_store`` (``durable_steps.testing``), so a backend another
package registers is reached as the built-in ones are; its ``Backend.write_raw`` and
``Backend.raw_bytes`` are its hooks (``docs/stores.md``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

import durable_steps as ds

from ...seam.rules import RunFilter
from ...seam.store import ORPHAN_AGE
from .. import CosmosEndpoint, OpenStore, files_under, open_store, selected_backends

T = TypeVar("T")


def contract_backends(config: pytest.Config) -> list[str]:
    """What ``backend`` runs on: each backend of ``--durable-backends``, then the async
    store of each."""
    chosen = selected_backends(config)
    return [*chosen, *(f"{name}-async" for name in chosen)]


def parametrize_backend(metafunc: pytest.Metafunc) -> None:
    """The suite's modules' ``pytest_generate_tests``: ``backend`` over
    ``contract_backends`` (a project that imports the tests parametrizes it itself)."""
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", contract_backends(metafunc.config), indirect=True)


def nested(levels: int) -> Any:
    """A value that is ``levels`` lists deep."""
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def first(run_id: str, state: dict[str, Any] | None = None) -> ds.Checkpoint:
    return ds.Checkpoint(run_id=run_id, step=0, state=state or {"n": 0}, steps=("a",))


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


@pytest.fixture
def run_id() -> str:
    """A fresh run id per test, so shared servers need no cleanup."""
    return f"test-{uuid.uuid4()}"


class SyncFacade(ds.Store):
    """A sync Store over an AsyncStore: every call is awaited on the loop thread."""

    def __init__(self, store: ds.AsyncStore, loop: asyncio.AbstractEventLoop) -> None:
        self.aio, self._loop = store, loop
        self.kind = store.kind  # type: ignore[misc] # the async store's
        self.max_state_bytes = store.max_state_bytes

    @property  # the async store's, held once
    def codec(self) -> Any:
        return self.aio.codec

    @codec.setter
    def codec(self, codec: Any) -> None:
        self.aio.codec = codec

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

    def delete_items(self, run_id: str, kind: str, keys: Sequence[str]) -> None:
        self._wait(self.aio.delete_items(run_id, kind, keys))

    def listing(self, filters: RunFilter) -> Iterator[ds.RunInfo]:
        return iter(self._wait(_collect(self.aio.listing(filters))))

    def run_info(self, run_id: str) -> ds.RunInfo | None:
        return self._wait(self.aio.run_info(run_id))

    def takeable(self, workflows: Sequence[str], *, at: float) -> Iterator[ds.RunInfo]:
        return iter(self._wait(_collect(self.aio.takeable(workflows, at=at))))

    def prune_orphans(self, older_than: float = ORPHAN_AGE) -> int:
        return self._wait(self.aio.prune_orphans(older_than))

    def run_history(self, run_id: str) -> list[ds.StepRecord] | None:
        return self._wait(self.aio.run_history(run_id))

    def load_at(self, run_id: str, step: int) -> ds.Checkpoint | None:
        return self._wait(self.aio.load_at(run_id, step))

    def delete_expired(self, now: float | None = None) -> int:
        return self._wait(self.aio.delete_expired(now))

    def close(self) -> None:
        self._wait(self.aio.close())


async def _collect(it: AsyncIterator[ds.RunInfo]) -> list[ds.RunInfo]:
    return [i async for i in it]


def _unknown() -> bytes:
    pytest.fail("this Backend was made without raw_bytes: give it one", pytrace=False)


@dataclass
class Backend:
    """One store of the suite, and the ways into what it holds."""

    name: str
    store: Any
    write_raw: Callable[[str, Any], None]
    """Store a raw document (a JSON value, or bytes) as ``run_id``'s checkpoint."""
    raw_bytes: Callable[[], bytes] = _unknown
    """Everything the store holds, as bytes (its files, its rows, its items)."""
    path: Path | None = None
    """A file store's directory (to list what is left of a run)."""
    cosmos: CosmosEndpoint | None = None
    """A Cosmos DB store's container (to list what is left of a run)."""


def _raw(doc: Any) -> bytes:
    return doc if isinstance(doc, bytes) else json.dumps(doc).encode()


def _file_hooks(path: Path) -> tuple[Callable[[str, Any], None], Callable[[], bytes]]:
    # Raw documents as the file of their run in the layout of durable-steps 0.1 (one
    # whole JSON document, not a log): FileStore keeps reading that layout.
    def write(run_id: str, doc: Any) -> None:
        ds.FileStore(path).file_for(run_id).write_bytes(_raw(doc))

    return write, lambda: files_under(path)


def _memory_hooks(store: ds.MemoryStore) -> tuple[Callable[[str, Any], None], Callable[[], bytes]]:
    def write(run_id: str, doc: Any) -> None:
        store._runs[run_id] = _raw(doc)

    return write, lambda: repr(vars(store)).encode()


def cosmos_hooks(cosmos: CosmosEndpoint) -> tuple[Callable[[str, Any], None], Callable[[], bytes]]:
    """``write_raw`` and ``raw_bytes`` of a Cosmos DB container."""

    def write(run_id: str, doc: Any) -> None:
        if isinstance(doc, bytes):
            doc = {"garbage": doc.decode(errors="replace")}
        # ``run``: the partition key of the layout the store creates (/run); a container
        # of the earlier layout (/id) keeps it as one more field.
        body = {**(doc if isinstance(doc, dict) else {"value": doc}), "id": run_id, "run": run_id}
        cosmos.raw_container().upsert_item(body)

    def raw() -> bytes:
        items = cosmos.raw_container().query_items(
            "SELECT * FROM c", enable_cross_partition_query=True
        )
        return json.dumps(list(items)).encode()

    return write, raw


def hooks_of(opened: OpenStore) -> tuple[Callable[[str, Any], None], Callable[[], bytes]]:
    """``write_raw`` and ``raw_bytes`` of a store the plugin opened."""
    if opened.path is not None:
        return _file_hooks(opened.path)
    if opened.cosmos is not None:
        return cosmos_hooks(opened.cosmos)
    if opened.raw_bytes is not None:  # a backend another package registered
        return _registered_writer(opened), opened.raw_bytes
    store = opened.store
    memory = store.sync if isinstance(store, ds.AsyncMemoryStore) else store
    assert isinstance(memory, ds.MemoryStore)
    return _memory_hooks(memory)


def _registered_writer(opened: OpenStore) -> Callable[[str, Any], None]:
    hook = opened.write_raw

    def write(run_id: str, doc: Any) -> None:
        if hook is None:
            pytest.fail(
                f"the store backend {opened.backend!r} has no write_raw(store, run_id, doc), "
                "so the suite cannot store a damaged checkpoint to test what loading one "
                "does: give its Backend one (docs/stores.md)",
                pytrace=False,
            )
        hook(opened.store, run_id, doc)

    return write


@contextmanager
def open_backend(
    request: pytest.FixtureRequest, name: str, loop: asyncio.AbstractEventLoop
) -> Iterator[Backend]:
    """A fresh store of backend ``name`` (``NAME-async``: its async store, behind a
    facade), with its hooks."""
    base, is_async = name.removesuffix("-async"), name.endswith("-async")
    with open_store(request, base, is_async=is_async) as opened:
        write, raw = hooks_of(opened)
        store = opened.store
        facade = SyncFacade(store, loop) if isinstance(store, ds.AsyncStore) else store
        yield Backend(name, facade, write, raw, opened.path, opened.cosmos)
        if is_async:
            facade.close()


@pytest.fixture
def backend(request: pytest.FixtureRequest, loop: asyncio.AbstractEventLoop) -> Iterator[Backend]:
    """A fresh store of one backend (see ``open_backend``)."""
    with open_backend(request, request.param, loop) as opened:
        yield opened
