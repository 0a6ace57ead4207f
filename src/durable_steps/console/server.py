"""Serving the console: a uvicorn server on a socket bound before it starts.

The socket is bound first, so that the port is known (``--port 0`` picks a free one, as
the tests do) and a port in use fails at once with a clear error, before anything is
printed. The access token is made here (``secrets.token_urlsafe``) unless one is given
(``token``: ``--token``, ``DURABLE_UI_TOKEN``); ``read_token`` is a second token that
signs in read-only (``security``). ``url`` is the link that carries the access token.
``run`` serves in the foreground until Ctrl-C or SIGTERM (the command line); ``start``
serves in a thread until ``stop`` (tests, the screenshots script).

uvicorn's own access log is off: it would print each request's query string, which
carries the token on the first. The guard logs requests without it (``security``).
"""

from __future__ import annotations

import errno
import secrets as random
import socket
import threading
import time

import uvicorn

from durable_steps import ConfigurationError, Store

from .app import create_app
from .security import LOOPBACK, Secrets, allowed_hosts


class ConsoleServer:
    """The console over ``store`` on ``host:port`` (port 0: a free one)."""

    def __init__(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 8233,
        read_only: bool = False,
        token: str | None = None,
        read_token: str | None = None,
    ) -> None:
        self.host = host
        self.sock = _bind(host, port)
        self.port: int = self.sock.getsockname()[1]
        try:
            self.secrets = Secrets(token or random.token_urlsafe(32), self.port, read_token)
        except ValueError as exc:
            self.sock.close()
            raise ConfigurationError(str(exc), variable="--read-only-token") from None
        app = create_app(
            store, self.secrets, read_only=read_only, hosts=allowed_hosts(host, self.port)
        )
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        if self.host in ("0.0.0.0", "::"):  # noqa: S104 (a comparison, not a bind)
            name = "127.0.0.1"  # bound to every address: loopback is one of them
        return f"http://{name}:{self.port}"

    @property
    def url(self) -> str:
        """The link to open: it carries the access token."""
        return f"{self.origin}/?token={self.secrets.token}"

    @property
    def exposed(self) -> bool:
        """Bound to an address other machines may reach."""
        return self.host not in LOOPBACK

    def run(self) -> None:
        """Serve until Ctrl-C or SIGTERM."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.sock.close()

    def start(self, timeout: float = 30) -> ConsoleServer:
        """Serve in a thread; returns once the server accepts requests."""
        self._thread = threading.Thread(target=self.run, name="durable-steps-console", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the console's server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)

    def __enter__(self) -> ConsoleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = (
            f"port {port} is in use; pass another with --port (or --port 0 for a free one)"
            if exc.errno == errno.EADDRINUSE
            else f"{exc.strerror or exc}; check --host"
        )
        raise ConfigurationError(
            f"the console cannot listen on {host}:{port}: {why}", variable="--port"
        ) from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
