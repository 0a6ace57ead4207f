"""The one place that reads the environment: the configuration table (docs/stores.md,
"Configuration") turned into a store URL of the registry (``registry``), and the
built-in backends opened from one.

``store_from_env()`` reads ``DURABLE_STORE`` -- ``file`` (``DURABLE_FILE_PATH``),
``memory``, ``cosmos`` (``COSMOS_*``), or a store URL itself -- and opens that store;
``store_for(name)`` opens one named on a command line or in code. A bad value is a
``ConfigurationError`` naming the variable and the accepted values; a message never
repeats a value that may hold a key (a connection string pasted into
``COSMOS_ENDPOINT``, a key put in the wrong variable). The Cosmos DB store is imported
only when asked for; without the ``[cosmos]`` extra, asking for it is a
``MissingExtraError`` (also an ``ImportError``) with the install command, and
``durable_steps.CosmosStore`` is a stand-in that raises it when used.

``create=False`` opens only a store that exists, for tools that read or change
existing runs (the command line's ``runs`` commands): a file store whose directory is
not there is a ``StoreError`` that says where it looked and what it looked for, instead
of an empty store made in the wrong directory, and ``COSMOS_CREATE_IF_MISSING`` is not
applied. Either way a store that is not there is a ``StoreError`` with ``status_code``
404.

With ``create=True`` (applications, the worker) a missing file store is created, and a
WARNING on the ``durable_steps`` logger says where: a mistyped ``DURABLE_FILE_PATH``,
or an app started from another directory, would otherwise start every run over in a
new, empty store without a word. ``DURABLE_CREATE_IF_MISSING=false`` (production)
refuses instead: a ``ConfigurationError`` naming the path and the variable, and
``COSMOS_CREATE_IF_MISSING`` is not applied.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

from ..seam.codec import from_env as codec_from_env
from ..seam.errors import ConfigurationError, DurableError, MissingExtraError, StoreError
from ..seam.rules import MAX_STATE_BYTES
from ..seam.store import AsyncStore, Store
from . import registry
from .registry import Opening

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


def url_from_env(env: Mapping[str, str]) -> str:
    """The store URL the environment describes (``DURABLE_STORE`` and the variables of
    its backend)."""
    value = env.get("DURABLE_STORE", "file").strip() or "file"
    kind = value.lower()
    if kind == "file":
        return f"file:{env.get('DURABLE_FILE_PATH') or '.durable'}"
    if kind == "memory":
        return "memory:"
    if kind == "cosmos":
        endpoint = _endpoint(env).rstrip("/")
        database = env.get("COSMOS_DATABASE") or "durable"
        container = env.get("COSMOS_CONTAINER") or "checkpoints"
        return f"cosmos+{endpoint}/{quote(database, safe='')}/{quote(container, safe='')}"
    if ":" in value and registry.scheme_of(value) in registry.names():
        return value
    raise ConfigurationError(
        f"DURABLE_STORE={_shown(value)} is not a backend; use one of file, cosmos, memory "
        f"(unset means file), or a store URL ({', '.join(f'{s}:...' for s in registry.names())})",
        variable="DURABLE_STORE",
    )


def cosmos_settings(
    env: Mapping[str, str], endpoint: str, database: str, container: str, create: bool
) -> dict[str, Any]:
    """The arguments of a Cosmos DB store at ``endpoint`` from the environment: the key
    (absent: Entra ID), TLS checks, creating what is missing."""
    may_create = _flag(env, "DURABLE_CREATE_IF_MISSING")
    return {
        "endpoint": endpoint,
        # (a key from a mounted secret often ends in a newline; keys hold no whitespace)
        "key": env.get("COSMOS_KEY", "").strip() or None,
        "database": database,
        "container": container,
        "verify_tls": _flag(env, "COSMOS_VERIFY_TLS"),
        # (still checked when not applied: a typo is an error either way)
        "create_if_missing": _flag(env, "COSMOS_CREATE_IF_MISSING") and create and may_create,
    }


# -- history and retention (issue 33) ------------------------------------------------


def retention(env: Mapping[str, str]) -> dict[str, Any]:
    """``DURABLE_HISTORY`` (steps or none; unset: the store's default),
    ``DURABLE_HISTORY_KEEP_LAST`` (N) and ``DURABLE_FINISHED_TTL`` (seconds after a run
    ended when it is deleted) as store arguments; only those that are set."""
    found: dict[str, Any] = {}
    history = env.get("DURABLE_HISTORY", "").strip().lower()
    if history:
        if history not in ("steps", "none"):
            raise ConfigurationError(
                f"DURABLE_HISTORY={_shown(env['DURABLE_HISTORY'])} is not a history setting; "
                "use steps (every completed step is kept) or none (only the latest checkpoint)",
                variable="DURABLE_HISTORY",
            )
        found["history"] = history
    for name, key, what in (
        ("DURABLE_HISTORY_KEEP_LAST", "keep_last", "a number of completed steps"),
        ("DURABLE_FINISHED_TTL", "finished_ttl", "a number of seconds"),
    ):
        value = env.get(name, "").strip().replace("_", "")
        if not value:
            continue
        if not value.isdigit() or int(value) < 1:
            raise ConfigurationError(
                f"{name}={_shown(env[name])} is not {what}; use a whole number from 1",
                variable=name,
            )
        found[key] = int(value)
    return found


def _opening(
    url: str, env: Mapping[str, str], create: bool, named_by: str | None = None
) -> Opening:
    _flag(env, "DURABLE_CREATE_IF_MISSING")  # a typo is an error whatever the backend
    return Opening(url, env, create, _max_state_bytes(env), named_by, codec_from_env(env))


def store_from_env(env: Mapping[str, str] | None = None, *, create: bool = True) -> Store:
    """The store the environment describes (see the configuration table, docs/stores.md).
    ``create=False``: only a store that exists (see the top of this module)."""
    env = os.environ if env is None else env
    url = url_from_env(env)
    return _open(_opening(url, env, create, _named_by(env, url)))


def async_store_from_env(
    env: Mapping[str, str] | None = None, *, create: bool = True
) -> AsyncStore:
    """store_from_env() for asyncio: the same variables, the same errors."""
    env = os.environ if env is None else env
    url = url_from_env(env)
    return _open_async(_opening(url, env, create, _named_by(env, url)))


def store_for(name: str, env: Mapping[str, str] | None = None, *, create: bool = True) -> Store:
    """A store named by one string: a store URL (``file:PATH``, ``memory:``,
    ``cosmos://ACCOUNT/DATABASE/CONTAINER``, a registered backend's), or, as the command
    line names them, ``env`` (as configured), ``cosmos`` (the COSMOS_* variables, whatever
    DURABLE_STORE says), ``cosmos:CONTAINER`` (another container of that account and
    database), ``memory``. ``create=False``: only a store that exists."""
    env = dict(os.environ if env is None else env)
    if name == "env":
        return store_from_env(env, create=create)
    url = url_for(name, env)
    return _open(_opening(url, env, create, name))


def async_store_for(
    name: str, env: Mapping[str, str] | None = None, *, create: bool = True
) -> AsyncStore:
    """``store_for`` for asyncio."""
    env = dict(os.environ if env is None else env)
    if name == "env":
        return async_store_from_env(env, create=create)
    return _open_async(_opening(url_for(name, env), env, create, name))


def url_for(name: str, env: Mapping[str, str]) -> str:
    """The store URL of a name as ``store_for`` takes it (``ConfigurationError`` if none)."""
    if name in ("cosmos", "memory"):
        return url_from_env({**env, "DURABLE_STORE": name})
    is_url = name.startswith(("cosmos://", "cosmos+"))
    if name.startswith("cosmos:") and not is_url and len(name) > len("cosmos:"):
        container = {"DURABLE_STORE": "cosmos", "COSMOS_CONTAINER": name.removeprefix("cosmos:")}
        return url_from_env({**env, **container})
    if ":" in name and registry.scheme_of(name) in registry.names() and name != "cosmos:":
        return name
    raise ConfigurationError(
        f"{name!r} is not a store: use env (the configured store), file:PATH, memory, cosmos "
        "(configured by the COSMOS_* variables), cosmos:CONTAINER (another container of that "
        f"database), or a store URL ({', '.join(f'{s}:...' for s in registry.names())})",
        variable="STORE",
    )


def check_spec(name: str) -> None:
    """``ConfigurationError`` unless ``name`` names a store as ``store_for`` takes it."""
    if name != "env":
        url_for(name, {"COSMOS_ENDPOINT": "https://x.documents.azure.com:443/"})


def _open(o: Opening) -> Store:
    return registry.open_store(registry.backend_for(o.url), o)


def _open_async(o: Opening) -> AsyncStore:
    return registry.open_async_store(registry.backend_for(o.url), o)


def describe(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The configuration store_from_env() would use, without the key (for doctor)."""
    env = os.environ if env is None else env
    url = url_from_env(env)
    described: dict[str, Any] = {"backend": registry.scheme_of(url)}
    if described["backend"] == "file":
        described["path"] = url.split(":", 1)[1]
        described["create_if_missing"] = _flag(env, "DURABLE_CREATE_IF_MISSING")
    elif described["backend"] == "cosmos":
        endpoint, database, container = registry.cosmos_location(url)
        s = cosmos_settings(env, endpoint, database, container, True)
        described |= {k: v for k, v in s.items() if k != "key"}
        described["auth"] = "key (COSMOS_KEY)" if s["key"] else "Entra ID (DefaultAzureCredential)"
    elif described["backend"] != "memory":
        described["url"] = url
    described["max_state_bytes"] = _max_state_bytes(env) or MAX_STATE_BYTES
    if env.get("DURABLE_CODEC", "").strip():  # (checked: a missing key is named here)
        described["codec"] = repr(codec_from_env(env))
    return described


# -- the built-in backends, opened -------------------------------------------------------


def open_file(o: Opening, is_async: bool) -> Any:
    """A (sync or async) file store. A directory that holds no store: with ``create=False``
    a StoreError saying where it looked and what for; with
    ``DURABLE_CREATE_IF_MISSING=false`` a ConfigurationError; else it is created, and a
    warning says where."""
    from .file.store import FileStore, exists

    path = o.rest
    if not path:
        raise ConfigurationError(
            f"{o.url!r} names no directory: use file:PATH (e.g. file:.durable)",
            variable="DURABLE_STORE",
        )

    def make() -> Any:
        kept = retention(o.env)
        if not is_async:
            return FileStore(path, max_state_bytes=o.max_state_bytes, codec=o.codec, **kept)
        from .file.async_store import AsyncFileStore

        return AsyncFileStore(path, max_state_bytes=o.max_state_bytes, codec=o.codec, **kept)

    if exists(path):
        return make()
    where = Path(path).absolute()
    if not o.create:
        raise StoreError(
            f"there is no store at {where}: {_why_missing(o.named_by)} (a run creates the "
            "store; this command does not)",
            status_code=404,  # as Cosmos DB answers for a database or container not there
        )
    if not _flag(o.env, "DURABLE_CREATE_IF_MISSING"):
        raise ConfigurationError(
            f"there is no store at {where}, and DURABLE_CREATE_IF_MISSING=false forbids "
            f"creating one: {_why_missing(o.named_by)} (or set DURABLE_CREATE_IF_MISSING=true "
            "to start a new, empty store there)",
            variable="DURABLE_CREATE_IF_MISSING",
        )
    store = make()
    named = "DURABLE_FILE_PATH is not set: .durable in the current directory"
    log.warning(
        "created a new, empty file store at %s (%s): runs saved elsewhere are not in it. If "
        "yours are elsewhere, correct DURABLE_FILE_PATH or the working directory; set "
        "DURABLE_CREATE_IF_MISSING=false to refuse creating a store",
        where,
        named if o.named_by is None else f"named by {o.named_by}",
    )
    return store


def _named_by(env: Mapping[str, str], url: str) -> str | None:
    """What named the file store's directory, as it was set (None: nothing, the default)."""
    if url.startswith("file:") and env.get("DURABLE_FILE_PATH"):
        return f"DURABLE_FILE_PATH={env['DURABLE_FILE_PATH']}"
    if env.get("DURABLE_STORE", "").strip().lower() not in ("", "file", "memory", "cosmos"):
        return f"DURABLE_STORE={env['DURABLE_STORE'].strip()}"
    return None


def _why_missing(named_by: str | None) -> str:
    """Why a file store was looked for where it is not, and what to do."""
    if named_by is None:
        return (
            "DURABLE_FILE_PATH is not set, so it looked for .durable in the current directory; "
            "run this from the directory that holds .durable, or set DURABLE_FILE_PATH to it"
        )
    return f"{named_by} names no store (no runs/ directory there); correct " + (
        "it, or unset it to use ./.durable" if named_by.startswith("DURABLE_") else "the path"
    )


def open_memory(o: Opening, is_async: bool) -> Any:
    from .memory import AsyncMemoryStore, MemoryStore

    kept = retention(o.env)
    if is_async:
        return AsyncMemoryStore(max_state_bytes=o.max_state_bytes, codec=o.codec, **kept)
    return MemoryStore(max_state_bytes=o.max_state_bytes, codec=o.codec, **kept)


def open_cosmos(o: Opening, is_async: bool) -> Any:
    endpoint, database, container = registry.cosmos_location(o.url)
    args = cosmos_settings(o.env, endpoint, database, container, o.create)
    args["max_state_bytes"] = o.max_state_bytes
    args["codec"] = o.codec
    args |= retention(o.env)
    cosmos = cosmos_module()
    if is_async:
        return cosmos.AsyncCosmosStore(**args)
    try:
        return cosmos.CosmosStore(**args)
    except StoreError as exc:
        if o.create or exc.status_code != 404:
            raise
        raise StoreError(
            f"there is no store at {endpoint}, database {database!r}, container "
            f"{container!r}: Cosmos DB answered 404 (the database or the container does not "
            "exist), and this command does not create it (COSMOS_CREATE_IF_MISSING applies to "
            "runs, the demo, doctor and the worker): provision it (infra/), or check "
            "COSMOS_DATABASE and COSMOS_CONTAINER",
            status_code=404,
        ) from exc


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
