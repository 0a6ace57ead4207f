"""The one place that reads the environment and knows every backend.

``store_from_env()`` turns the variables of the configuration table (docs/stores.md,
"Configuration") into a store. A bad value is a ``ConfigurationError`` naming the
variable and the accepted values; a message never repeats a value that may hold
a key (a connection string pasted into ``COSMOS_ENDPOINT``, a key put in the
wrong variable). The Cosmos DB store is imported only when asked for; without
the ``[cosmos]`` extra, asking for it is a ``MissingExtraError`` (also an
``ImportError``) with the install command, and ``durable_steps.CosmosStore`` is
a stand-in that raises it when used.

``create=False`` opens only a store that exists, for tools that read or change
existing runs (the command line's ``runs`` commands): a file store whose directory
is not there is a ``StoreError`` that says where it looked and what it looked for,
instead of an empty store made in the wrong directory, and ``COSMOS_CREATE_IF_MISSING``
is not applied. Either way a store that is not there is a ``StoreError`` with
``status_code`` 404.

With ``create=True`` (applications, the worker) a missing file store is created, and
a WARNING on the ``durable_steps`` logger says where: a mistyped ``DURABLE_FILE_PATH``,
or an app started from another directory, would otherwise start every run over in a
new, empty store without a word. ``DURABLE_CREATE_IF_MISSING=false`` (production)
refuses instead: a ``ConfigurationError`` naming the path and the variable, and
``COSMOS_CREATE_IF_MISSING`` is not applied.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..seam.errors import ConfigurationError, DurableError, MissingExtraError, StoreError
from ..seam.rules import MAX_STATE_BYTES
from .file.store import FileStore, exists
from .memory import AsyncMemoryStore, MemoryStore

if TYPE_CHECKING:
    from .cosmos.store import AsyncCosmosStore, CosmosStore
    from .file.async_store import AsyncFileStore

BACKENDS = ("file", "cosmos", "memory")
INSTALL = "pip install 'durable-steps[cosmos]'"
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
_FLAGS = {
    "COSMOS_VERIFY_TLS": (True, "true (default) or false (only for an emulator's self-signed "
                          "certificate)"),
    "COSMOS_CREATE_IF_MISSING": (False, "false (default) or true (only for emulators and "
                                 "tests: creates the database and the container)"),
    "DURABLE_CREATE_IF_MISSING": (True, "true (default: a missing store is created, with a "
                                  "warning) or false (a missing store is an error)"),
}  # fmt: skip
log = logging.getLogger("durable_steps")
_KEYLIKE = re.compile(r"[A-Za-z0-9+/]{32,}={0,2}")


def _shown(value: str) -> str:
    """``value`` quoted for a message, unless it may hold a secret."""
    if "accountkey" in value.lower() or _KEYLIKE.search(value) or len(value) > 100:
        return "(a value not repeated here: it may hold a key)"
    return repr(value)


def _flag(env: Mapping[str, str], name: str) -> bool:
    default, accepted = _FLAGS[name]
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value not in _TRUE + _FALSE:
        raise ConfigurationError(
            f"{name}={_shown(env[name])} is not a boolean; use {accepted} "
            f"(also accepted: {'/'.join(_TRUE)} and {'/'.join(_FALSE)})",
            variable=name,
        )
    return value in _TRUE


def _endpoint(env: Mapping[str, str]) -> str:
    endpoint = env.get("COSMOS_ENDPOINT", "").strip()
    if not endpoint:
        raise ConfigurationError(
            "DURABLE_STORE=cosmos needs COSMOS_ENDPOINT, the account endpoint, e.g. "
            "https://ACCOUNT.documents.azure.com:443/ (http://127.0.0.1:8081/ for an emulator)",
            variable="COSMOS_ENDPOINT",
        )
    if "accountendpoint=" in endpoint.lower():
        raise ConfigurationError(
            "COSMOS_ENDPOINT holds a connection string (not repeated here: it has the key); "
            "set COSMOS_ENDPOINT to its AccountEndpoint part and COSMOS_KEY to its AccountKey "
            "part, or leave COSMOS_KEY unset for Entra ID",
            variable="COSMOS_ENDPOINT",
        )
    if not endpoint.startswith(("https://", "http://")):
        raise ConfigurationError(
            f"COSMOS_ENDPOINT={_shown(endpoint)} is not a URL; use https://ACCOUNT.documents."
            "azure.com:443/ (or http://HOST:PORT/ for an emulator)",
            variable="COSMOS_ENDPOINT",
        )
    return endpoint


def _max_state_bytes(env: Mapping[str, str]) -> int | None:
    """``DURABLE_MAX_STATE_BYTES``: a positive number of bytes (None: the default)."""
    value = env.get("DURABLE_MAX_STATE_BYTES", "").strip().replace("_", "")
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ConfigurationError(
            f"DURABLE_MAX_STATE_BYTES={_shown(env['DURABLE_MAX_STATE_BYTES'])} is not a size; "
            f"use a positive whole number of bytes, e.g. 134217728 (unset means "
            f"{MAX_STATE_BYTES}, 64 MiB), the same limit in every store",
            variable="DURABLE_MAX_STATE_BYTES",
        )
    return int(value)


def _settings(env: Mapping[str, str] | None, create: bool = True) -> dict[str, Any]:
    env = os.environ if env is None else env
    backend = env.get("DURABLE_STORE", "file").strip().lower() or "file"
    if backend not in BACKENDS:
        raise ConfigurationError(
            f"DURABLE_STORE={_shown(env['DURABLE_STORE'])} is not a backend; use one of "
            f"{', '.join(BACKENDS)} (unset means file)",
            variable="DURABLE_STORE",
        )
    limit = _max_state_bytes(env)
    # (checked whatever the backend: a typo is an error either way)
    may_create = _flag(env, "DURABLE_CREATE_IF_MISSING")
    if backend != "cosmos":
        path = env.get("DURABLE_FILE_PATH") or ".durable"
        return {
            "backend": backend,
            "path": path,
            "max_state_bytes": limit,
            "create_if_missing": may_create,
        }
    return {
        "backend": "cosmos",
        "endpoint": _endpoint(env),
        # (a key from a mounted secret often ends in a newline; keys hold no whitespace)
        "key": env.get("COSMOS_KEY", "").strip() or None,
        "database": env.get("COSMOS_DATABASE") or "durable",
        "container": env.get("COSMOS_CONTAINER") or "checkpoints",
        "verify_tls": _flag(env, "COSMOS_VERIFY_TLS"),
        # (still checked when not applied: a typo is an error either way)
        "create_if_missing": _flag(env, "COSMOS_CREATE_IF_MISSING") and create and may_create,
        "max_state_bytes": limit,
    }


def describe(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The configuration store_from_env() would use, without the key (for doctor)."""
    s = _settings(env)
    if s["backend"] == "cosmos":
        s["auth"] = "key (COSMOS_KEY)" if s.pop("key") else "Entra ID (DefaultAzureCredential)"
    s["max_state_bytes"] = s["max_state_bytes"] or MAX_STATE_BYTES
    return s


def cosmos_module() -> ModuleType:
    """``durable_steps.stores.cosmos.store``, or ``MissingExtraError`` when the extra is
    missing."""
    try:
        from .cosmos import store as cosmos
    except (ImportError, DurableError) as exc:
        cause = exc.__cause__ or exc
        raise MissingExtraError(
            f"the Cosmos DB store needs the [cosmos] extra (azure-cosmos, azure-identity; "
            f"{type(cause).__name__}: {cause}): {INSTALL}",
            variable="DURABLE_STORE",
        ) from exc
    return cosmos


def cosmos_class(name: str) -> Any:
    """``CosmosStore`` or ``AsyncCosmosStore``; without the extra, a stand-in whose use
    raises ``MissingExtraError``, so that ``from durable_steps import *`` and
    ``hasattr`` work without it (an exception cannot be both the ``ImportError``
    that names the extra and the ``AttributeError`` that ``hasattr`` expects)."""
    try:
        return getattr(cosmos_module(), name)
    except MissingExtraError as missing:
        error = missing

    def unavailable(cls: type, *args: Any, **kwargs: Any) -> Any:
        raise MissingExtraError(f"{name}: {error}", variable="DURABLE_STORE") from error

    doc = f"Not available: {error}"
    # (its module is the one it is imported from, as the real class's public name is)
    return type(name, (), {"__new__": unavailable, "__doc__": doc, "__module__": "durable_steps"})


def store_from_env(
    env: Mapping[str, str] | None = None, *, create: bool = True
) -> FileStore | MemoryStore | CosmosStore:
    """The store the environment describes (see the configuration table, docs/stores.md).
    ``create=False``: only a store that exists (see the top of this module)."""
    s = _settings(env, create)
    if s["backend"] == "file":
        return _file_store(FileStore, s, create, _named_by(env))
    if s["backend"] == "memory":
        return MemoryStore(max_state_bytes=s["max_state_bytes"])
    try:
        store: CosmosStore = cosmos_module().CosmosStore(**_cosmos_args(s))
    except StoreError as exc:
        if create or exc.status_code != 404:
            raise
        raise StoreError(
            f"there is no store at {s['endpoint']}, database {s['database']!r}, container "
            f"{s['container']!r}: Cosmos DB answered 404 (the database or the container does "
            "not exist), and this command does not create it "
            "(COSMOS_CREATE_IF_MISSING applies to runs, the demo, doctor and the worker): "
            "provision it (infra/), or check COSMOS_DATABASE and COSMOS_CONTAINER",
            status_code=404,
        ) from exc
    return store


def async_store_from_env(
    env: Mapping[str, str] | None = None, *, create: bool = True
) -> AsyncFileStore | AsyncMemoryStore | AsyncCosmosStore:
    """store_from_env() for asyncio: the same variables, the same errors."""
    from .file.async_store import AsyncFileStore

    s = _settings(env, create)
    if s["backend"] == "file":
        return _file_store(AsyncFileStore, s, create, _named_by(env))
    if s["backend"] == "memory":
        return AsyncMemoryStore(max_state_bytes=s["max_state_bytes"])
    store: AsyncCosmosStore = cosmos_module().AsyncCosmosStore(**_cosmos_args(s))
    return store


def _cosmos_args(s: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in s.items() if k != "backend"}


def _named_by(env: Mapping[str, str] | None) -> str | None:
    """The variable that named the file store's directory, as it was set (None: unset)."""
    value = (os.environ if env is None else env).get("DURABLE_FILE_PATH")
    return f"DURABLE_FILE_PATH={value}" if value else None


S = TypeVar("S")


def _file_store(cls: Callable[..., S], s: dict[str, Any], create: bool, named_by: str | None) -> S:
    """A (sync or async) file store. A directory that holds no store: with
    ``create=False`` a StoreError saying where it looked and what for; with
    ``DURABLE_CREATE_IF_MISSING=false`` a ConfigurationError; else it is created, and a
    warning says where."""
    if exists(s["path"]):
        return cls(s["path"], max_state_bytes=s["max_state_bytes"])
    where = Path(s["path"]).absolute()
    if not create:
        raise StoreError(
            f"there is no store at {where}: {_why_missing(named_by)} (a run creates the "
            "store; this command does not)",
            status_code=404,  # as Cosmos DB answers for a database or container not there
        )
    if not s["create_if_missing"]:
        raise ConfigurationError(
            f"there is no store at {where}, and DURABLE_CREATE_IF_MISSING=false forbids "
            f"creating one: {_why_missing(named_by)} (or set DURABLE_CREATE_IF_MISSING=true "
            "to start a new, empty store there)",
            variable="DURABLE_CREATE_IF_MISSING",
        )
    store = cls(s["path"], max_state_bytes=s["max_state_bytes"])
    named = "DURABLE_FILE_PATH is not set: .durable in the current directory"
    log.warning(
        "created a new, empty file store at %s (%s): runs saved elsewhere are not in it. If "
        "yours are elsewhere, correct DURABLE_FILE_PATH or the working directory; set "
        "DURABLE_CREATE_IF_MISSING=false to refuse creating a store",
        where,
        named if named_by is None else f"named by {named_by}",
    )
    return store


def _why_missing(named_by: str | None) -> str:
    """Why a file store was looked for where it is not, and what to do."""
    if named_by is None:
        return (
            "DURABLE_FILE_PATH is not set, so it looked for .durable in the current directory; "
            "run this from the directory that holds .durable, or set DURABLE_FILE_PATH to it"
        )
    return f"{named_by} names no store (no runs/ directory there); correct " + (
        "the path" if named_by.startswith("file:") else "it, or unset it to use ./.durable"
    )


def store_for(
    spec: str, env: Mapping[str, str] | None = None, *, create: bool = True
) -> FileStore | MemoryStore | CosmosStore:
    """A store named on a command line: ``env`` (as configured), ``file:PATH``, ``cosmos``
    (the COSMOS_* variables, whatever DURABLE_STORE says), ``cosmos:CONTAINER`` (another
    container of that account and database) or ``memory``. ``create=False``: only a
    store that exists (for the commands that read or change existing runs)."""
    env = dict(os.environ if env is None else env)
    if spec == "env":
        return store_from_env(env, create=create)
    if spec.startswith("file:") and len(spec) > len("file:"):
        s = _settings({**env, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": spec[5:]}, create)
        return _file_store(FileStore, s, create, spec)
    check_spec(spec)
    if spec.startswith("cosmos:"):
        container = spec.removeprefix("cosmos:")
        cosmos = {"DURABLE_STORE": "cosmos", "COSMOS_CONTAINER": container}
        return store_from_env({**env, **cosmos}, create=create)
    return store_from_env({**env, "DURABLE_STORE": spec}, create=create)


def check_spec(spec: str) -> None:
    """``ConfigurationError`` unless ``spec`` names a store as ``store_for`` takes it."""
    if spec not in ("env", "cosmos", "memory") and not any(
        spec.startswith(prefix) and len(spec) > len(prefix) for prefix in ("file:", "cosmos:")
    ):
        raise ConfigurationError(
            f"{spec!r} is not a store: use env (the configured store), file:PATH, cosmos "
            "(configured by the COSMOS_* variables), cosmos:CONTAINER (another container of "
            "that database) or memory",
            variable="STORE",
        )
