"""One registry of backends: a store is named by one string everywhere.

    file:PATH                              FileStore (``file:.durable``)
    memory:                                MemoryStore (a new, empty one)
    cosmos://ACCOUNT/DATABASE/CONTAINER    CosmosStore at https://ACCOUNT.documents.azure.com
    cosmos+https://HOST:PORT/DB/CONTAINER  CosmosStore at another endpoint (an emulator)
    cosmos+http://HOST:PORT/DB/CONTAINER   the same over HTTP (the local protocol server)

What a URL does not say -- a Cosmos DB key (absent: Entra ID), TLS checks, creating a
database, the state size limit, the codec -- comes from the environment, read by
``stores.config`` alone, which also maps the variables (``DURABLE_STORE=file`` and
``DURABLE_FILE_PATH``, ``DURABLE_STORE=cosmos`` and ``COSMOS_*``) onto such a URL;
``DURABLE_STORE`` may be a URL too.

A backend is a ``Backend``: its scheme and how it opens a blocking and an async store
from an ``Opening`` (the URL, the environment, whether it may create the store). The
built-in ones are here; a package adds one through the entry point group
``durable_steps.stores`` (``sqlite = "durable_sqlite:BACKEND"``), and ``store_for``,
``store_from_env``, the command line and the pytest plugin (``--durable-backends=sqlite``,
with the backend's ``fresh``) all find it there. The Cosmos DB stores are imported only
when asked for: ``import durable_steps`` imports no Azure code.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

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
    """True: the backend's stores take ``Opening.codec`` and encode values themselves
    (``Store.encodes_values``, the built-in ones). False, the default: they are given
    only encoded values (``seam.coded``) and never see the codec."""


def scheme_of(url: str) -> str:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    return scheme.split("+", 1)[0]


# -- the built-in backends (opened by ``config``, which reads what URLs do not say) --------


def _built_in(scheme: str) -> Backend:
    def open_(o: Opening) -> Store:
        from . import config

        store: Store = getattr(config, f"open_{scheme}")(o, False)
        return store

    def open_async(o: Opening) -> AsyncStore:
        from . import config

        store: AsyncStore = getattr(config, f"open_{scheme}")(o, True)
        return store

    return Backend(scheme, open_, open_async, encodes_values=True)


def cosmos_location(url: str) -> tuple[str, str, str]:
    """``(endpoint, database, container)`` of a ``cosmos://`` URL."""
    parts = urlsplit(url)
    names_ = [unquote(p) for p in parts.path.split("/") if p]
    if not parts.netloc or len(names_) != 2:
        raise ConfigurationError(
            f"{url!r} is not a Cosmos DB store: use cosmos://ACCOUNT/DATABASE/CONTAINER, or "
            "cosmos+https://HOST:PORT/DATABASE/CONTAINER (cosmos+http:// for a local server)",
            variable="DURABLE_STORE",
        )
    scheme = parts.scheme.lower()
    if scheme == "cosmos":
        endpoint = f"https://{parts.netloc}.documents.azure.com:443/"
    elif scheme in ("cosmos+https", "cosmos+http"):
        endpoint = f"{scheme.removeprefix('cosmos+')}://{parts.netloc}/"
    else:
        raise ConfigurationError(
            f"{url!r}: {parts.scheme!r} is not a Cosmos DB scheme (cosmos, cosmos+https, "
            "cosmos+http)",
            variable="DURABLE_STORE",
        )
    return endpoint, names_[0], names_[1]


BUILT_IN = {scheme: _built_in(scheme) for scheme in ("file", "memory", "cosmos")}


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
        return BUILT_IN[scheme]
    for entry in importlib.metadata.entry_points(group=GROUP, name=scheme):
        return _load(entry)
    raise ConfigurationError(
        f"{url!r} names no store backend: use {', '.join(f'{s}:' for s in names())} (a "
        f"package adds one through the entry point group {GROUP})",
        variable="DURABLE_STORE",
    )


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
