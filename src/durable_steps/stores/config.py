"""Which store the environment names: the configuration table (docs/stores.md,
"Configuration") turned into an opening -- a store URL of the registry and the options
every backend takes (``Opening``) -- and the store opened by its backend. How a
backend opens a store, and the variables only it reads, are the backend's own
(``registry``; ``file/backend.py``, ``cosmos/backend.py``, ``memory.py``).

``store_from_env()`` reads ``DURABLE_STORE`` -- ``file`` (``DURABLE_FILE_PATH``),
``memory``, ``cosmos`` (``COSMOS_*``), or a store URL itself -- and opens that store;
``store_for(name)`` opens one named on a command line or in code. A bad value is a
``ConfigurationError`` naming the variable and the accepted values; a message never
repeats a value that may hold a key (a connection string pasted into
``COSMOS_ENDPOINT``, a key put in the wrong variable: ``variables.shown``).

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

import os
from collections.abc import Mapping
from typing import Any

from ..seam.codec import from_env as codec_from_env
from ..seam.errors import ConfigurationError
from ..seam.rules import MAX_STATE_BYTES
from ..seam.store import AsyncStore, Store
from . import registry
from .registry import Backend, Opening
from .variables import CREATE_IF_MISSING, flag, max_state_bytes, shown


def url_from_env(env: Mapping[str, str]) -> str:
    """The store URL the environment describes: ``DURABLE_STORE`` -- a backend's name,
    read with its own variables (``file`` and ``DURABLE_FILE_PATH``, ``cosmos`` and
    ``COSMOS_*``), or a store URL."""
    value = env.get("DURABLE_STORE", "file").strip() or "file"
    schemes = registry.names()
    if ":" not in value and value.lower() in schemes:
        backend = registry.backend_for(value.lower() + ":")
        if backend.url_from_env is not None:
            return backend.url_from_env(env)
    if ":" in value and registry.scheme_of(value) in schemes:
        return value
    raise ConfigurationError(
        f"DURABLE_STORE={shown(value)} is not a backend; use one of file, cosmos, memory "
        f"(unset means file), or a store URL ({', '.join(f'{s}:...' for s in schemes)})",
        variable="DURABLE_STORE",
    )


def _opening(
    url: str, env: Mapping[str, str], create: bool, named_by: str | None = None
) -> Opening:
    flag(env, CREATE_IF_MISSING)  # a typo is an error whatever the backend
    return Opening(url, env, create, max_state_bytes(env), named_by, codec_from_env(env))


def _from_env(env: Mapping[str, str], create: bool) -> tuple[Backend, Opening]:
    url = url_from_env(env)
    backend = registry.backend_for(url)
    return backend, _opening(url, env, create, _named_by(env, backend))


def store_from_env(env: Mapping[str, str] | None = None, *, create: bool = True) -> Store:
    """The store the environment describes (see the configuration table, docs/stores.md).
    ``create=False``: only a store that exists (see the top of this module)."""
    backend, opening = _from_env(os.environ if env is None else env, create)
    return registry.open_store(backend, opening)


def async_store_from_env(
    env: Mapping[str, str] | None = None, *, create: bool = True
) -> AsyncStore:
    """store_from_env() for asyncio: the same variables, the same errors."""
    backend, opening = _from_env(os.environ if env is None else env, create)
    return registry.open_async_store(backend, opening)


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
    return registry.open_store(registry.backend_for(url), _opening(url, env, create, name))


def async_store_for(
    name: str, env: Mapping[str, str] | None = None, *, create: bool = True
) -> AsyncStore:
    """``store_for`` for asyncio."""
    env = dict(os.environ if env is None else env)
    if name == "env":
        return async_store_from_env(env, create=create)
    url = url_for(name, env)
    return registry.open_async_store(registry.backend_for(url), _opening(url, env, create, name))


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


def describe(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The configuration store_from_env() would use, without the key (for doctor)."""
    env = os.environ if env is None else env
    url = url_from_env(env)
    backend = registry.backend_for(url)
    described: dict[str, Any] = {"backend": backend.scheme}
    opening = Opening(url, env, True, max_state_bytes(env))
    if backend.describe is not None:
        described |= backend.describe(opening)
    else:
        described["url"] = url
    described["max_state_bytes"] = opening.max_state_bytes or MAX_STATE_BYTES
    if env.get("DURABLE_CODEC", "").strip():  # (checked: a missing key is named here)
        described["codec"] = repr(codec_from_env(env))
    return described


def _named_by(env: Mapping[str, str], backend: Backend) -> str | None:
    """What named the store's place, as it was set (None: nothing, the default)."""
    variable = backend.location_variable
    if variable is not None and env.get(variable):
        return f"{variable}={env[variable]}"
    if env.get("DURABLE_STORE", "").strip().lower() not in ("", "file", "memory", "cosmos"):
        return f"DURABLE_STORE={env['DURABLE_STORE'].strip()}"
    return None
