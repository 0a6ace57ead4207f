"""Test servers started as real processes on loopback (shared by tests and benchmarks).

The implementation is durable_steps.devtools.cosmos_server (the plugin's and the
command line's), so users, the suite and the benchmarks start the server the same
way; this module gives the tests a short import and resolves the npm package from
this repository's node_modules.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from durable_steps.devtools.cosmos_server import EMULATOR_KEY, ServerError, ServerMissing, stop
from durable_steps.devtools.cosmos_server import start_cosmosdb_server as _start

__all__ = ["EMULATOR_KEY", "ROOT", "ServerError", "ServerMissing", "start_cosmosdb_server", "stop"]

ROOT = Path(__file__).resolve().parents[2]


def start_cosmosdb_server() -> tuple[subprocess.Popen[str], str]:
    """@vercel/cosmosdb-server (installed by `npm ci`) over HTTP on a free loopback
    port; returns the process and its endpoint once it says it is ready."""
    return _start(ROOT)
