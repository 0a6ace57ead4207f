"""The file backend as the registry knows it: ``file:PATH``, or ``DURABLE_STORE=file``
with ``DURABLE_FILE_PATH`` (unset: ``.durable`` in the current directory).

A directory that holds no store: with ``create=False`` (the command line's ``runs``
commands) a ``StoreError`` saying where it looked and what for, instead of an empty
store made in the wrong directory; with ``DURABLE_CREATE_IF_MISSING=false``
(production) a ``ConfigurationError`` naming the path and the variable; else it is
created, and a WARNING on the ``durable_steps`` logger says where -- a mistyped
``DURABLE_FILE_PATH``, or an app started from another directory, would otherwise start
every run over in a new, empty store without a word. The stores themselves are
imported only when one is opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...seam.errors import ConfigurationError, StoreError
from ...seam.store import AsyncStore, Store
from ..registry import Backend, Opening, opened_by
from ..variables import CREATE_IF_MISSING, flag, log, retention


def _open(o: Opening, is_async: bool) -> Store | AsyncStore:
    from .store import FileStore, exists

    path = o.rest
    if not path:
        raise ConfigurationError(
            f"{o.url!r} names no directory: use file:PATH (e.g. file:.durable)",
            variable="DURABLE_STORE",
        )

    def make() -> Store | AsyncStore:
        kept = retention(o.env)
        if not is_async:
            return FileStore(path, max_state_bytes=o.max_state_bytes, codec=o.codec, **kept)
        from .async_store import AsyncFileStore

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
    if not flag(o.env, CREATE_IF_MISSING):
        raise ConfigurationError(
            f"there is no store at {where}, and DURABLE_CREATE_IF_MISSING=false forbids "
            f"creating one: {_why_missing(o.named_by)} (or set DURABLE_CREATE_IF_MISSING=true "
            "to start a new, empty store there)",
            variable="DURABLE_CREATE_IF_MISSING",
        )
    store = make()
    named = "DURABLE_FILE_PATH is not set: .durable in the current directory"
    # A warning, not a refusal: no run is recorded in a store not there yet, so none of its calls
    # can run again here; runs kept elsewhere (a mistaken path) are untouched there, and
    # DURABLE_CREATE_IF_MISSING=false refuses instead.
    log.warning(
        "created a new, empty file store at %s (%s): runs saved elsewhere are not in it. If "
        "yours are elsewhere, correct DURABLE_FILE_PATH or the working directory; set "
        "DURABLE_CREATE_IF_MISSING=false to refuse creating a store",
        where,
        named if o.named_by is None else f"named by {o.named_by}",
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
        "it, or unset it to use ./.durable" if named_by.startswith("DURABLE_") else "the path"
    )


def url_from_env(env: Mapping[str, str]) -> str:
    return f"file:{env.get('DURABLE_FILE_PATH') or '.durable'}"


def describe(o: Opening) -> dict[str, Any]:
    return {"path": o.rest, "create_if_missing": flag(o.env, CREATE_IF_MISSING)}


BACKEND = Backend(
    "file",
    *opened_by(_open),
    encodes_values=True,
    url_from_env=url_from_env,
    location_variable="DURABLE_FILE_PATH",
    describe=describe,
)
