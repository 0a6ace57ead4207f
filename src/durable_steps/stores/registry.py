"""One registry of backends: a store is named by one string everywhere.

    file:PATH                              FileStore (``file:.durable``)
    memory:                                MemoryStore (a new, empty one)
    cosmos://ACCOUNT/DATABASE/CONTAINER    CosmosStore at https://ACCOUNT.documents.azure.com
    cosmos+https://HOST:PORT/DB/CONTAINER  CosmosStore at another endpoint (an emulator)
    cosmos+http://HOST:PORT/DB/CONTAINER   the same over HTTP (the local protocol server)

The registry owns the backends. A backend is a ``Backend``, exported by its own module:
its scheme, how it opens a blocking and an async store from an ``Opening`` (the URL,
the environment, whether it may create the store), and, if it has any, the variables
``DURABLE_STORE=SCHEME`` reads for it (``url_from_env``: ``DURABLE_FILE_PATH``,
``COSMOS_*``) and what ``doctor`` shows of it (``describe``). The built-in ones are
listed here as ``"module:attr"`` strings, imported when first asked for, exactly as
the entry point group ``durable_steps.stores`` lists a package's
(``sqlite = "durable_sqlite:BACKEND"``); ``store_for``, ``store_from_env``, the command
line and the pytest plugin (``--durable-backends=sqlite``, with the backend's
``fresh``) all find both here. So the Cosmos DB stores are imported only when asked
for (``import durable_steps`` imports no Azure code), and the registry imports no
backend: each backend imports the registry for ``Backend`` and ``Opening``, never the
other way round. ``stores.config`` only turns the environment into an opening.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from ..seam.codec import Codec
from ..seam.coded import ROOM, AsyncCodedStore, CodedStore
from ..seam.errors import ConfigurationError
from ..seam.rules import state_limit
from ..seam.store import AsyncStore, Store

GROUP = "durable_steps.stores"


@dataclass(frozen=True)
class Opening:
    """What a backend is asked to open."""

    url: str
    """As given: ``SCHEME:REST``."""
    env: Mapping[str, str]
    """The environment, for what the URL does not say (keys, flags)."""
    create: bool = True
    """False: only a store that exists (``StoreError`` with ``status_code`` 404 else)."""
    max_state_bytes: int | None = None
    named_by: str | None = None
    codec: Codec | None = None
    """State values and call results encoded at rest (``DURABLE_CODEC``; None: plain)."""
    """What named the store (a variable, a command-line argument), for messages."""

    @property
    def scheme(self) -> str:
        return scheme_of(self.url)

    @property
    def rest(self) -> str:
        """What follows ``SCHEME:``."""
        return self.url.split(":", 1)[1]


@dataclass(frozen=True)
class Backend:
    """A kind of store, as the registry knows it."""

    scheme: str
    open: Callable[[Opening], Store]
    open_async: Callable[[Opening], AsyncStore]
    fresh: Callable[[Path], str] | None = None
    """For tests: the URL of a new, empty store in a directory of the test's own
    (``--durable-backends`` can then run the contract suite on it)."""
    write_raw: Callable[[Store | AsyncStore, str, object], None] | None = None
    """For tests: store ``doc`` (a JSON value, or bytes) as run ``run_id``'s checkpoint
    as it is, bypassing every check -- how the contract suite tests damaged ones. It is
    given the store ``open``/``open_async`` made (a ``ThreadedStore``: its ``.sync``)."""
    raw_bytes: Callable[[Store | AsyncStore], bytes] | None = None
    """For tests: everything the store holds, as bytes -- how the contract suite checks
    that a secret never reaches the backend (None: the files under ``fresh``'s
    directory are read)."""
    encodes_values: bool = False
    """True: the backend's stores take ``Opening.codec`` and call ``seam.encoded`` at their
    own edges (``Store.encodes_values``, the built-in ones). False, the default: they
    are given only encoded values (``seam.coded``) and never see the codec."""
    url_from_env: Callable[[Mapping[str, str]], str] | None = None
    """The store URL ``DURABLE_STORE=SCHEME`` means, from the backend's own variables
    (None: the backend is named by a URL only)."""
    location_variable: str | None = None
    """The variable that names where the store is, if one does (``DURABLE_FILE_PATH``):
    messages about a store not found say it named the place."""
    describe: Callable[[Opening], dict[str, Any]] | None = None
    """What ``doctor`` shows of the configuration beside the backend's name (never a
    key)."""


def opened_by(
    open_: Callable[[Opening, bool], Store | AsyncStore],
) -> tuple[Callable[[Opening], Store], Callable[[Opening], AsyncStore]]:
    """``Backend``'s ``open`` and ``open_async`` from one function that opens either kind
    (its second argument: async), for a backend whose two differ only in the class."""

    def open_store(o: Opening) -> Store:
        store = open_(o, False)
        assert isinstance(store, Store)
        return store

    def open_async_store(o: Opening) -> AsyncStore:
        store = open_(o, True)
        assert isinstance(store, AsyncStore)
        return store

    return open_store, open_async_store


def scheme_of(url: str) -> str:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    return scheme.split("+", 1)[0]


# -- the built-in backends, imported when first asked for ---------------------------------


BUILT_IN: dict[str, str] = {
    "file": "durable_steps.stores.file.backend:BACKEND",
    "memory": "durable_steps.stores.memory:BACKEND",
    "cosmos": "durable_steps.stores.cosmos.backend:BACKEND",
}
"""Each built-in scheme and where its ``Backend`` is, as an entry point names it."""


def names() -> list[str]:
    """The schemes of every backend: the built-in ones, then the entry points' (none of
    them imported)."""
    extra = [e.name for e in importlib.metadata.entry_points(group=GROUP)]
    return [*BUILT_IN, *(n for n in dict.fromkeys(extra) if n not in BUILT_IN)]


def backend_for(url: str) -> Backend:
    """The backend of a store URL (an entry point's imported now); ``ConfigurationError``
    naming the known schemes."""
    scheme = scheme_of(url)
    if scheme in BUILT_IN:
        return _built_in(scheme)
    for entry in importlib.metadata.entry_points(group=GROUP, name=scheme):
        return _load(entry)
    raise ConfigurationError(
        f"{url!r} names no store backend: use {', '.join(f'{s}:' for s in names())} (a "
        f"package adds one through the entry point group {GROUP})",
        variable="DURABLE_STORE",
    )


def _built_in(scheme: str) -> Backend:
    module, _, attr = BUILT_IN[scheme].partition(":")
    backend = getattr(importlib.import_module(module), attr)
    if not isinstance(backend, Backend) or backend.scheme != scheme:
        raise TypeError(f"{BUILT_IN[scheme]} is not the Backend of scheme {scheme!r}")
    return backend


def _load(entry: importlib.metadata.EntryPoint) -> Backend:
    try:
        backend = entry.load()
    except Exception as exc:
        raise ConfigurationError(
            f"the store backend {entry.name!r} ({entry.value}, entry point group {GROUP}) "
            f"failed to load: {type(exc).__name__}: {exc}",
            variable="DURABLE_STORE",
        ) from exc
    if not isinstance(backend, Backend) or backend.scheme != entry.name:
        raise ConfigurationError(
            f"the entry point {entry.name!r} ({entry.value}) of group {GROUP} is not a "
            f"durable_steps Backend of scheme {entry.name!r}",
            variable="DURABLE_STORE",
        )
    return backend


def open_store(backend: Backend, o: Opening) -> Store:
    """A blocking store of ``backend``, the codec applied by the library (``seam.coded``):
    a backend that does not encode values itself is given only encoded ones."""
    if backend.encodes_values:
        return _takes_codec(backend, backend.open(o), o)
    return CodedStore(backend.open(_underneath(o)), o.codec, o.max_state_bytes)


def open_async_store(backend: Backend, o: Opening) -> AsyncStore:
    """``open_store`` for asyncio."""
    if backend.encodes_values:
        return _takes_codec(backend, backend.open_async(o), o)
    return AsyncCodedStore(backend.open_async(_underneath(o)), o.codec, o.max_state_bytes)


def _underneath(o: Opening) -> Opening:
    """What a backend that never sees the codec is opened with: no codec, and room for
    the encoded values (the plain limit is checked above it)."""
    return replace(o, codec=None, max_state_bytes=ROOM * state_limit(o.max_state_bytes))


S = TypeVar("S", Store, AsyncStore)


def _takes_codec(backend: Backend, store: S, o: Opening) -> S:
    """``store`` if it encodes with the codec it was given, else ``ConfigurationError``
    (closed first): a store that says it encodes values must not store them plain."""
    if store.encodes_values and store.codec is o.codec:
        return store
    if isinstance(store, Store):
        store.close()
    raise ConfigurationError(
        f"the store backend {backend.scheme!r} declares that its stores encode values "
        f"themselves (Backend(encodes_values=True)), but its {store.kind} "
        + (
            "does not (encodes_values is False)"
            if not store.encodes_values
            else "did not take the codec it was given (its codec is not Opening.codec)"
        )
        + ": values would be stored without the configured codec. Give the store "
        "Opening.codec, or drop encodes_values and let durable-steps encode for it",
        variable="DURABLE_CODEC",
    )
