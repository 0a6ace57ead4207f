"""``durable-steps ui``: the operator's console in the browser (``durable_steps.console``).

The console is an optional part (the ``[ui]`` extra: Starlette, uvicorn, Jinja2); asking
for it without the extra is a ``MissingExtraError`` with the pip command, as asking for
Cosmos DB without its extra is. The command opens the configured store as the ``runs``
commands do (never creating one), prints the console's link -- with its access token --
on stdout, and logs each request on stderr (method, path, status: never the token).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from ..seam.codec import Shown
from ..seam.errors import MissingExtraError
from ..stores.config import store_for
from .common import note

INSTALL = "pip install 'durable-steps[ui]'"


def console_server() -> Any:
    """``durable_steps.console.ConsoleServer``, or ``MissingExtraError`` without the extra."""
    try:
        from ..console import ConsoleServer
    except ImportError as exc:
        raise MissingExtraError(
            f"the console needs the [ui] extra (Starlette, uvicorn, Jinja2; "
            f"{type(exc).__name__}: {exc}): {INSTALL}",
            variable="ui",
        ) from exc
    return ConsoleServer


@click.command("ui")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on. Keep the loopback default unless you know who can "
    "reach the machine: anyone with the printed link can act on runs.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8233,
    show_default=True,
    help="The port to listen on (0: a free one, printed).",
)
@click.option("--read-only", is_flag=True, help="Hide and refuse every action: look, do not touch.")
@click.option(
    "--token",
    envvar="DURABLE_UI_TOKEN",
    help="The access token (default: a random one per start). Fix it for scripts, which "
    "send 'Authorization: Bearer TOKEN' to /api/... [env: DURABLE_UI_TOKEN]",
)
@click.option(
    "--read-only-token",
    envvar="DURABLE_UI_READ_TOKEN",
    help="A second token that reads everything and acts on nothing (each action "
    "answers 403). [env: DURABLE_UI_READ_TOKEN]",
)
def ui(
    host: str, port: int, read_only: bool, token: str | None, read_only_token: str | None
) -> None:
    """Serve the operator's console for the configured store in the browser: the runs
    (filter, sort, page, refreshed live), each run's timeline as a picture (steps,
    calls, waits, retries, attempts), its state and recorded call results unfolded on
    demand, and actions -- signal, cancel -- each confirmed first.

    It prints a link with a random access token: open it (the token becomes a cookie
    of this browser; every request needs it). It binds to 127.0.0.1, refuses requests
    from other origins, and shows no Cosmos DB key. Ctrl-C stops it. It needs the [ui]
    extra: pip install 'durable-steps[ui]'. Examples:

    \b
      durable-steps ui
      durable-steps ui --port 9000 --read-only
      DURABLE_UI_TOKEN=s3cret durable-steps ui   # then: curl -H 'Authorization: Bearer s3cret' ...
      DURABLE_STORE=cosmos COSMOS_ENDPOINT=... durable-steps ui
    """
    server_class = console_server()
    with store_for("env", create=False) as store:
        store.codec = Shown(store.codec)  # a value it has no key for shows as encrypted
        console = server_class(
            store, host=host, port=port, read_only=read_only, token=token or None,
            read_token=read_only_token or None,
        )  # fmt: skip
        _log_requests()
        click.echo(console.url)
        mode = "read-only; " if read_only else ""
        note(f"durable-steps console for {store!r} ({mode}Ctrl-C stops it): open the link above")
        if console.exposed:
            note(
                f"warning: listening on {host}, which other machines may reach; anyone who "
                "gets the link can act on runs. Prefer the default 127.0.0.1 and an SSH tunnel"
            )
        console.run()
    note("durable-steps console: stopped")


def _log_requests() -> None:
    """Each request on stderr, whether or not -v configured the library's logging."""
    log = logging.getLogger("durable_steps.console")
    log.setLevel(logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    log.addHandler(handler)
    log.propagate = False
