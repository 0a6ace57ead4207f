"""cosmos-local's server: moved to ``durable_steps.devtools.cosmos_server``, which the
command line (``durable-steps dev cosmos-server``) imports too, without pytest. These
names stay importable from here."""

from __future__ import annotations

from ..devtools.cosmos_server import (
    INSTALL,
    ServerError,
    ServerMissing,
    start_cosmosdb_server,
    stop,
)

__all__ = ["INSTALL", "ServerError", "ServerMissing", "start_cosmosdb_server", "stop"]
