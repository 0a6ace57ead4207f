"""``durable-steps dev ...``: aids for developing an application, never for production.

``dev cosmos-server`` runs the local Cosmos DB protocol server in the foreground --
the same server, through the same wrapper, as the pytest plugin's ``cosmos-local``
backend (``devtools.cosmos_server``) -- and prints the line that points an
application (and this command line) at it. It needs no pytest and no ``[testing]``
extra: Node.js and the npm package only.
"""

from __future__ import annotations

import os
import shlex
import signal
import threading

import click

from ..devtools.cosmos_server import (
    ServerError,
    cosmos_env,
    last_output,
    start_cosmosdb_server,
    stop,
)
from .common import note


@click.group()
def dev() -> None:
    """Aids for developing an application (not for production)."""


@dev.command("cosmos-server")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The loopback port to listen on (0: a free one, printed).",
)
def cosmos_server(port: int) -> None:
    """Run a local Cosmos DB (the npm server @vercel/cosmosdb-server, on 127.0.0.1)
    until Ctrl-C or SIGTERM, and print the line to export to use it.

    It speaks the Cosmos DB protocol to the real azure-cosmos SDK, so an application
    runs on it unchanged, with the emulator's well-known key. Its data lives in
    memory: it is gone when the server stops. The same server backs the pytest
    plugin's cosmos-local backend.

    It needs Node.js 20+ and the npm package @vercel/cosmosdb-server@1.0.1,
    installed in the current directory or one above it, or on NODE_PATH:

    \b
      npm install @vercel/cosmosdb-server@1.0.1
      durable-steps dev cosmos-server --port 8081
      # in another shell, the line it prints:
      export DURABLE_STORE=cosmos COSMOS_ENDPOINT=http://127.0.0.1:8081/ ...
      durable-steps demo
    """
    stopping = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stopping.set())
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        try:
            proc, endpoint = start_cosmosdb_server(os.getcwd(), port=port)
        except ServerError as exc:
            raise click.ClickException(str(exc)) from exc
        try:
            env = cosmos_env(endpoint)
            click.echo("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
            note(
                f"cosmos-server: @vercel/cosmosdb-server on {endpoint} (loopback only; its "
                "data lives in memory and is gone when it stops). Export the line above in "
                "the shell of your application; Ctrl-C stops the server."
            )
            while not stopping.wait(0.2):
                # (Ctrl-C in a terminal signals the server too: it may end first)
                if proc.poll() is not None and not stopping.wait(1):
                    said = last_output(proc)
                    raise click.ClickException(
                        f"the server ended by itself (exit status {proc.returncode})"
                        + (f": {said.splitlines()[-1]}" if said else "")
                    )
        finally:
            stop(proc)
        note("cosmos-server: stopped")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
