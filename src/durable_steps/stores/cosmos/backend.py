"""The Cosmos DB backend as the registry knows it: ``cosmos://ACCOUNT/DATABASE/CONTAINER``
(``cosmos+https://`` or ``cosmos+http://`` for another endpoint), or
``DURABLE_STORE=cosmos`` with the ``COSMOS_*`` variables.

What a URL does not say comes from the environment: ``COSMOS_KEY`` (absent: Entra ID),
``COSMOS_VERIFY_TLS``, ``COSMOS_CREATE_IF_MISSING`` (applied only when the opening may
create the store and ``DURABLE_CREATE_IF_MISSING`` allows it; still checked when not
applied, so a typo is an error either way). This module imports no Azure code: the
stores are imported when one is opened, and without the ``[cosmos]`` extra that is a
``MissingExtraError`` (also an ``ImportError``) with the install command;
``durable_steps.CosmosStore`` is then a stand-in that raises it when used
(``cosmos_class``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ...seam.errors import ConfigurationError, DurableError, MissingExtraError, StoreError
from ...seam.store import AsyncStore, Store
from ..registry import Backend, Opening, opened_by
from ..variables import CREATE_IF_MISSING, flag, retention, shown

INSTALL = "pip install 'durable-steps[cosmos]'"
VERIFY_TLS = (
    "COSMOS_VERIFY_TLS",
    True,
    "true (default) or false (only for an emulator's self-signed certificate)",
)
CREATE = (
    "COSMOS_CREATE_IF_MISSING",
    False,
    "false (default) or true (only for emulators and tests: creates the database and the "
    "container)",
)


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
            f"COSMOS_ENDPOINT={shown(endpoint)} is not a URL; use https://ACCOUNT.documents."
            "azure.com:443/ (or http://HOST:PORT/ for an emulator)",
            variable="COSMOS_ENDPOINT",
        )
    return endpoint


def url_from_env(env: Mapping[str, str]) -> str:
    """The store URL of ``COSMOS_ENDPOINT``, ``COSMOS_DATABASE`` and ``COSMOS_CONTAINER``."""
    endpoint = _endpoint(env).rstrip("/")
    database = env.get("COSMOS_DATABASE") or "durable"
    container = env.get("COSMOS_CONTAINER") or "checkpoints"
    return f"cosmos+{endpoint}/{quote(database, safe='')}/{quote(container, safe='')}"


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


def cosmos_settings(
    env: Mapping[str, str], endpoint: str, database: str, container: str, create: bool
) -> dict[str, Any]:
    """The arguments of a Cosmos DB store at ``endpoint`` from the environment: the key
    (absent: Entra ID), TLS checks, creating what is missing."""
    may_create = flag(env, CREATE_IF_MISSING)
    return {
        "endpoint": endpoint,
        # (a key from a mounted secret often ends in a newline; keys hold no whitespace)
        "key": env.get("COSMOS_KEY", "").strip() or None,
        "database": database,
        "container": container,
        "verify_tls": flag(env, VERIFY_TLS),
        # (still checked when not applied: a typo is an error either way)
        "create_if_missing": flag(env, CREATE) and create and may_create,
    }


def _open(o: Opening, is_async: bool) -> Store | AsyncStore:
    endpoint, database, container = cosmos_location(o.url)
    args = cosmos_settings(o.env, endpoint, database, container, o.create)
    args["max_state_bytes"] = o.max_state_bytes
    args["codec"] = o.codec
    args |= retention(o.env)
    cosmos = cosmos_module()
    if is_async:
        opened: AsyncStore = cosmos.AsyncCosmosStore(**args)
        return opened
    try:
        store: Store = cosmos.CosmosStore(**args)
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
    return store


def describe(o: Opening) -> dict[str, Any]:
    endpoint, database, container = cosmos_location(o.url)
    s = cosmos_settings(o.env, endpoint, database, container, True)
    described = {k: v for k, v in s.items() if k != "key"}
    described["auth"] = "key (COSMOS_KEY)" if s["key"] else "Entra ID (DefaultAzureCredential)"
    return described


BACKEND = Backend(
    "cosmos",
    *opened_by(_open),
    encodes_values=True,
    url_from_env=url_from_env,
    describe=describe,
)


def cosmos_module() -> ModuleType:
    """``durable_steps.stores.cosmos.store``, or ``MissingExtraError`` when the extra is
    missing."""
    try:
        from . import store as cosmos
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
