"""The one place that reads the environment and knows every backend."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError
from ._file import FileStore
from ._memory import MemoryStore

if TYPE_CHECKING:
    from ._aio import AsyncFileStore, AsyncMemoryStore
    from ._cosmos import AsyncCosmosStore, CosmosStore

BACKENDS = ("file", "cosmos", "memory")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _settings(env: Mapping[str, str] | None) -> dict[str, Any]:
    env = os.environ if env is None else env
    backend = env.get("DURABLE_STORE", "file").strip().lower() or "file"
    if backend not in BACKENDS:
        raise ConfigurationError(
            f"DURABLE_STORE={env['DURABLE_STORE']!r} is not a backend; use one of "
            f"{', '.join(BACKENDS)} (unset means file)",
            variable="DURABLE_STORE",
        )
    if backend != "cosmos":
        return {"backend": backend, "path": env.get("DURABLE_FILE_PATH") or ".durable"}
    endpoint = env.get("COSMOS_ENDPOINT", "").strip()
    if not endpoint:
        raise ConfigurationError(
            "DURABLE_STORE=cosmos needs COSMOS_ENDPOINT, the account endpoint, e.g. "
            "https://ACCOUNT.documents.azure.com:443/ (http://127.0.0.1:8081/ for an emulator)",
            variable="COSMOS_ENDPOINT",
        )
    if not endpoint.startswith(("https://", "http://")):
        raise ConfigurationError(
            f"COSMOS_ENDPOINT={endpoint!r} is not a URL; use https://ACCOUNT.documents.azure."
            "com:443/ (or http://HOST:PORT/ for an emulator)",
            variable="COSMOS_ENDPOINT",
        )
    verify = env.get("COSMOS_VERIFY_TLS", "true").strip().lower()
    if verify not in _TRUE + _FALSE:
        raise ConfigurationError(
            f"COSMOS_VERIFY_TLS={env['COSMOS_VERIFY_TLS']!r} is not a boolean; use true "
            "(default) or false (only for an emulator's self-signed certificate)",
            variable="COSMOS_VERIFY_TLS",
        )
    return {
        "backend": "cosmos",
        "endpoint": endpoint,
        "key": env.get("COSMOS_KEY") or None,
        "database": env.get("COSMOS_DATABASE") or "durable",
        "container": env.get("COSMOS_CONTAINER") or "checkpoints",
        "verify_tls": verify in _TRUE,
    }


def describe(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The configuration store_from_env() would use, without the key (for doctor)."""
    s = _settings(env)
    if s["backend"] == "cosmos":
        s["auth"] = "key (COSMOS_KEY)" if s.pop("key") else "Entra ID (DefaultAzureCredential)"
    return s


def store_from_env(env: Mapping[str, str] | None = None) -> FileStore | MemoryStore | CosmosStore:
    """The store the environment describes (see the configuration table in the README)."""
    s = _settings(env)
    if s["backend"] == "file":
        return FileStore(s["path"])
    if s["backend"] == "memory":
        return MemoryStore()
    from ._cosmos import CosmosStore

    return CosmosStore(**{k: v for k, v in s.items() if k != "backend"})


def async_store_from_env(
    env: Mapping[str, str] | None = None,
) -> AsyncFileStore | AsyncMemoryStore | AsyncCosmosStore:
    """store_from_env() for asyncio: the same variables, the same errors."""
    from ._aio import AsyncFileStore, AsyncMemoryStore

    s = _settings(env)
    if s["backend"] == "file":
        return AsyncFileStore(s["path"])
    if s["backend"] == "memory":
        return AsyncMemoryStore()
    from ._cosmos import AsyncCosmosStore

    return AsyncCosmosStore(**{k: v for k, v in s.items() if k != "backend"})


def store_for(
    spec: str, env: Mapping[str, str] | None = None
) -> FileStore | MemoryStore | CosmosStore:
    """A store named on a command line: ``env`` (as configured), ``file:PATH``, ``cosmos``
    (the COSMOS_* variables, whatever DURABLE_STORE says) or ``memory``."""
    env = dict(os.environ if env is None else env)
    if spec == "env":
        return store_from_env(env)
    if spec.startswith("file:") and len(spec) > len("file:"):
        return store_from_env({**env, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": spec[5:]})
    if spec in ("cosmos", "memory"):
        return store_from_env({**env, "DURABLE_STORE": spec})
    raise ConfigurationError(
        f"{spec!r} is not a store: use env (the configured store), file:PATH, cosmos "
        "(configured by the COSMOS_* variables) or memory",
        variable="STORE",
    )
