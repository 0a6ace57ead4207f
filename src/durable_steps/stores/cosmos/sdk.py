"""The Azure SDK as the Cosmos DB stores meet it: the imports (a missing extra is a
``MissingExtraError``), the client's options, the checks of a key and an endpoint made
before any request, and the translation of every Azure exception into ours.

Translation happens where an exception enters (``translate`` for reads, listings and
the store's construction; ``write_error``, ``not_landed_yet``, ``conflict`` and
``unknown_outcome`` for saves, whose outcome may need reading back: see ``programs``).
Messages name what happened, the real cause (the first line of the SDK's error, never
only its type) and what to do next; they never echo a key.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

from ...seam.errors import (
    ConfigurationError,
    ConflictError,
    DurableError,
    MissingExtraError,
    StoreError,
    why_lost,
)
from ...seam.errors import conflict as nothing_written

INSTALL = "pip install 'durable-steps[cosmos]'"
try:
    from azure.core import MatchConditions
    from azure.core.exceptions import AzureError, ClientAuthenticationError
    from azure.cosmos import CosmosClient, PartitionKey
    from azure.cosmos import __version__ as SDK_VERSION
    from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
    from azure.cosmos.exceptions import CosmosHttpResponseError
    from azure.identity import DefaultAzureCredential
    from azure.identity.aio import DefaultAzureCredential as AsyncDefaultAzureCredential
except ImportError as exc:
    raise MissingExtraError(
        f"the Cosmos DB backend needs azure-cosmos and azure-identity: {INSTALL} "
        f"(missing: {exc.name or exc})",
        variable="DURABLE_STORE",
    ) from exc

__all__ = [
    "AsyncCosmosClient",
    "AsyncDefaultAzureCredential",
    "AzureError",
    "CosmosClient",
    "CosmosHttpResponseError",
    "DefaultAzureCredential",
    "MatchConditions",
    "PartitionKey",
]

COMPACT_WRITES = tuple(int(p) for p in re.findall(r"\d+", SDK_VERSION)[:2]) >= (4, 17)
"""azure-cosmos 4.17 can send item bodies as UTF-8 instead of escaping every non-ASCII
character as ``\\uXXXX`` (up to 6 bytes for 2-4): used wherever the SDK has it."""
CONTAINER_GONE = 1003
"""The sub-status of a 404 whose container (the "owner resource") does not exist."""
MAY_HAVE_LANDED = frozenset({408, 409, 412, 500, 502, 503, 504})
"""Answers to a write that do not prove it did not land: a timeout or a server error,
or a 409/412 that may be the SDK's own retry meeting the write it sent first."""


def is_local(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    return endpoint.startswith("http://") or host in ("localhost", "127.0.0.1", "::1")


def client_options(endpoint: str, verify_tls: bool, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "connection_verify": verify_tls,
        # An emulator advertises its own (https, unmapped-port) address; following
        # it breaks plain-HTTP and remapped-port emulators. Real accounts keep
        # discovery for multi-region failover.
        "enable_endpoint_discovery": not is_local(endpoint),
        # Fail in seconds, not minutes, when nothing answers: a refused connection
        # fails at once, a silent endpoint within ~30 s (the SDK tries 4 times).
        # Point reads and writes answer in milliseconds, so 5 s is generous.
        "connection_timeout": 5,
        "read_timeout": 5,
        "retry_connect": 1,
        "retry_read": 1,
        **({"enable_compact_utf8_item_writes": True} if COMPACT_WRITES else {}),
        **options,
    }


def escapes_non_ascii(client: Any) -> bool:
    """Whether this client sends item bodies with non-ASCII escaped (what the 2 MB
    check must then measure)."""
    connection = getattr(client, "client_connection", None)
    return not getattr(connection, "_enable_compact_utf8_item_writes", False)


def checked_key(endpoint: str, key: str | None) -> str | None:
    """The account key to use (None: Entra ID), refusing before any request a key
    the SDK could not decode and a token that would travel over plain http."""
    if key:
        key = key.strip()
        try:
            valid = bool(key) and len(base64.b64decode(key, validate=True)) > 0
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise ConfigurationError(
                "COSMOS_KEY is not an account key: it is not base64. Copy the primary or "
                "secondary key from the account's Keys page (or the emulator's documented "
                "key), or unset COSMOS_KEY to use Entra ID",
                variable="COSMOS_KEY",
            )
        return key
    if endpoint.lower().startswith("http://"):
        raise ConfigurationError(
            f"COSMOS_ENDPOINT={endpoint!r} is plain http, and Entra ID tokens are sent only "
            "over https: use the account's https:// endpoint, or set COSMOS_KEY (emulators "
            "take their documented key)",
            variable="COSMOS_ENDPOINT",
        )
    return None


def status_of(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None) if isinstance(exc, CosmosHttpResponseError) else None


def container_gone(exc: BaseException) -> bool:
    return status_of(exc) == 404 and getattr(exc, "sub_status", None) == CONTAINER_GONE


def missing_item(exc: BaseException) -> bool:
    """A 404 about the item itself; 404/1003 (the container is gone) is not: it must
    never read as "no checkpoint", which would start the run over."""
    return status_of(exc) == 404 and getattr(exc, "sub_status", None) in (None, 0)


def may_have_landed(exc: AzureError) -> bool:
    """Whether a write that raised ``exc`` may have landed all the same (a credential
    that yields no token fails before anything is sent)."""
    if isinstance(exc, ClientAuthenticationError):
        return False
    status = status_of(exc)
    return status is None or status in MAY_HAVE_LANDED


def cause(exc: BaseException) -> str:
    """The first line of an SDK error: what actually went wrong, in a few words."""
    text = getattr(exc, "message", None) or str(exc)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    first = lines[0] if lines else "no message"
    status = status_of(exc)
    return f"{type(exc).__name__}: {f'{status} ' if status else ''}{first[:200]}"


_HINTS = {
    401: "check COSMOS_KEY, or unset it to use Entra ID",
    403: "grant your identity the 'Cosmos DB Built-in Data Contributor' role on the "
    "account (infra/ does), or check the firewall / public network access",
    404: "the database or container does not exist: provision it (infra/), check "
    "COSMOS_DATABASE and COSMOS_CONTAINER, or set COSMOS_CREATE_IF_MISSING=true (emulators only)",
    408: "the request timed out; retry",
    413: "the item is too large for Cosmos DB",
    429: "the account is throttling (request rate too large): raise its throughput or "
    "slow down, then retry",
}


def translate(exc: AzureError, where: str) -> DurableError:
    """The most specific error of ours for an exception of the Azure SDKs."""
    if isinstance(exc, CosmosHttpResponseError):
        status = exc.status_code
        if container_gone(exc):
            return StoreError(
                f"Cosmos DB at {where}: the container does not exist (404, sub-status 1003: "
                "deleted, or COSMOS_DATABASE / COSMOS_CONTAINER name another one); provision "
                "it again (infra/) and check the names",
                status_code=status,
            )
        hint = _HINTS.get(status or 0, "see the status code; retry if the service is unavailable")
        message = str(exc.message).splitlines()[0] if exc.message else "no message"
        return StoreError(
            f"Cosmos DB at {where} answered {status} ({message[:200]}): {hint}", status_code=status
        )
    if isinstance(exc, ClientAuthenticationError):
        return StoreError(
            f"no Entra ID credential for Cosmos DB at {where} ({cause(exc)}): "
            "run 'az login', use a managed identity, or set COSMOS_KEY",
            status_code=None,
        )
    return StoreError(
        f"cannot reach Cosmos DB at {where} ({cause(exc)}): check COSMOS_ENDPOINT, "
        "the network and the account's firewall",
        status_code=None,
    )


def conflict(run_id: str, expected: str | None, missing: bool, *, checked: bool) -> ConflictError:
    """A save that lost to another writer. Never "nothing was written": behind a 409 or
    412 may be the SDK's own retry of a write that landed and was then overwritten."""
    how = " (checked by reading it back: the stored checkpoint is not this save's)"
    return ConflictError(
        f"run {run_id!r} was not saved: {why_lost(expected, missing)}"
        f"{how if checked else ''}. Reload it and "
        "retry, or run one worker per run id",
        run_id=run_id,
    )


def write_error(exc: AzureError, where: str, run_id: str, expected: str | None) -> DurableError:
    """The error of a write whose answer proves it did not land."""
    if expected is not None and missing_item(exc):
        return conflict(run_id, expected, missing=True, checked=False)
    return translate(exc, where)


def not_landed_yet(exc: AzureError, where: str, run_id: str, *, again: bool) -> StoreError:
    """A save not confirmed (``again``: nor when it was sent again), whose run, read
    back, is still the version it replaces: it has not landed -- yet. A request on its
    way may still land; what it cannot do is overwrite a newer save."""
    resent = ", nor when it was sent again" if again else ""
    return StoreError(
        f"run {run_id!r}: Cosmos DB at {where} did not confirm the save ({cause(exc)}){resent}; "
        "reading the run back shows it has not landed yet (the stored checkpoint is still "
        "the one it replaces), but a request still on its way may still land -- never "
        "over a newer save, since each is conditional on the version it replaces. Load "
        "the run before retrying: it may hold this save by then",
        status_code=status_of(exc),
    )


def unknown_outcome(exc: AzureError, again: AzureError, where: str, run_id: str) -> StoreError:
    return StoreError(
        f"run {run_id!r}: Cosmos DB at {where} did not confirm the save ({cause(exc)}), and "
        f"reading the run back to check failed too ({cause(again)}): the save's outcome is "
        "unknown. Load the run again before retrying (it may hold this save); check "
        "COSMOS_ENDPOINT, the network and the account's firewall",
        status_code=status_of(exc),
    )


def segment_failed(exc: AzureError, where: str, run_id: str) -> DurableError:
    """A segment of a save was not written: the head, which commits it, was not either."""
    if container_gone(exc):
        return translate(exc, where)
    hint = _HINTS.get(status_of(exc) or 0, "")
    return StoreError(
        f"run {run_id!r} was not saved: writing its data to Cosmos DB at {where} failed "
        f"({cause(exc)}). Nothing was saved: the run's head, which commits a save, was not "
        "written, so the run is still at the checkpoint this save meant to replace (a part "
        "that landed is removed by a later save or 'durable-steps runs prune'). "
        f"{hint + '; ' if hint else ''}retry the save",
        status_code=status_of(exc),
    )


def lost_create(run_id: str) -> ConflictError:
    """A save that creates a run (``etag=None``) whose run exists: found by reading its
    head before any of its data was written."""
    return nothing_written(run_id, None, False)


def too_slow(run_id: str, where: str, limit: float) -> StoreError:
    """A save whose data took longer to write than a save may take before its head."""
    return StoreError(
        f"run {run_id!r} was not saved: writing its data to Cosmos DB at {where} took over "
        f"{limit:.0f} s, longer than a save may take before it commits (after that, "
        "'durable-steps runs prune' may take its data for a failed save's). Nothing was "
        "saved: the run is still at the checkpoint this save meant to replace; retry the "
        "save",
        status_code=None,
    )
