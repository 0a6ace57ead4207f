"""A loopback HTTP proxy for tests: it sees every request the Cosmos SDK sends, counts
the bytes both ways, and can break the exchange the way a network does.

Put it between the SDK and the local server (``Proxy(upstream).endpoint``). Each
request is parsed (head and ``Content-Length`` body), forwarded on a fresh upstream
connection, and its answer relayed whole; ``exchanges`` records method, path,
headers, status and the bytes of each direction. Faults, each for requests matching
a method (and optionally a path fragment):

- ``drop_answer(...)``: forward the request, wait for the server's whole answer, then
  close the client's connection without relaying it. The write landed; the client
  saw only a dropped connection (the case a read-back must settle).
- ``drop_request(...)``: close the client's connection without forwarding: the
  write never reached the server.
- ``answer(...)``: answer with a given status and JSON body without forwarding, as a
  server that refuses an operation would (e.g. the vNext emulator's 400 for PATCH).
- ``arm(n, action)``: break the n-th request from now whatever its method (the n-th
  request of a save): ``lose`` it, ``drop`` its answer, forward it and answer
  ``after`` with a status (a 429/503/500 about a write that landed), or ``hold`` it
  unanswered, before forwarding it or (``hold-after``) once the server has it, until
  ``heal()`` (a test kills the client meanwhile).
- ``delay(method, path, times)``: hold matching requests, unanswered, until
  ``release()``, then forward them -- a request the network delays: the client
  gives up on it (its timeout), and it reaches the server later all the same. The
  server's answer to it is recorded (``Exchange.status``), never relayed.

Threads, not asyncio, so that sync tests and an event loop in another thread can use
it alike; each client connection gets its own thread.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from durable_steps.testing import CosmosEndpoint


@dataclass
class Exchange:
    method: str
    """The HTTP method; a query (a POST with ``x-ms-documentdb-isquery``) reads ``QUERY``."""
    path: str
    headers: dict[str, str]
    sent: int
    """Bytes of the request (head and body) as the client sent them."""
    body: bytes = b""
    status: int | None = None
    received: int = 0
    """Bytes of the answer (head and body) as the server sent them."""
    answer_headers: dict[str, str] = field(default_factory=dict)
    answer_body: bytes = b""
    fault: str | None = None


@dataclass
class _Rule:
    method: str  # "*": any
    path: str
    action: str
    times: int | None  # None: every matching request
    status: int = 0
    body: Any = None
    then: Callable[[], object] | None = None
    skip: int = 0
    """Matching requests to let through before this rule applies."""
    happened: threading.Event = field(default_factory=threading.Event)


class Proxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_url = upstream
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.exchanges: list[Exchange] = []
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._delayed = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}/"

    def drop_answer(
        self,
        method: str,
        path: str = "",
        times: int | None = 1,
        then: Callable[[], object] | None = None,
    ) -> None:
        """Forward matching requests, then drop the connection instead of the answer
        (after calling ``then``, if given: something that happens meanwhile)."""
        with self._lock:
            self._rules.append(_Rule(method, path, "drop", times, then=then))

    def drop_request(self, method: str, path: str = "", times: int | None = 1) -> None:
        """Close the connection on matching requests without forwarding them."""
        with self._lock:
            self._rules.append(_Rule(method, path, "lose", times))

    def answer(
        self, method: str, status: int, body: Any, path: str = "", times: int | None = None
    ) -> None:
        """Answer matching requests with ``status`` and ``body`` without forwarding them."""
        with self._lock:
            self._rules.append(_Rule(method, path, "answer", times, status, body))

    def arm(
        self, n: int, action: str, *, status: int = 0, path: str = "/docs", method: str = "*"
    ) -> threading.Event:
        """Break the n-th request (0-based) from now whose path contains ``path``, of
        ``method`` (any by default), with ``action``: ``lose``, ``drop``, ``after``
        (forward it, then answer ``status``), ``hold`` or ``hold-after``. The Event is
        set once it happened."""
        assert action in ("lose", "drop", "after", "hold", "hold-after"), action
        body = {"code": "Injected", "message": f"{status} injected by the test proxy"}
        rule = _Rule(method, path, action, 1, status, body, skip=n)
        with self._lock:
            self._release.clear()
            self._rules.append(rule)
        return rule.happened

    def delay(self, method: str, path: str = "", times: int | None = 1) -> None:
        """Hold matching requests until ``release()``, then forward them (see the top)."""
        with self._lock:
            self._delayed.clear()
            self._rules.append(_Rule(method, path, "delay", times))

    def release(self) -> None:
        """Forward the requests ``delay`` holds (and any that come after)."""
        self._delayed.set()

    def clear(self) -> None:
        """Forget the exchanges recorded so far."""
        with self._lock:
            self.exchanges.clear()

    def heal(self) -> None:
        """Drop every fault not yet used up, and end the requests held: forward
        everything from now on."""
        with self._lock:
            self._rules.clear()
            self._release.set()
            self._delayed.set()

    def store_calls(self) -> list[Exchange]:
        """The exchanges about databases, containers and items: without the account
        reads (``GET /``) that the SDK's background health check sends when it likes."""
        with self._lock:
            return [e for e in self.exchanges if e.path.startswith("/dbs")]

    def of(self, method: str, path: str = "") -> list[Exchange]:
        """The recorded exchanges of ``method`` whose path contains ``path``."""
        with self._lock:
            return [e for e in self.exchanges if e.method == method and path in e.path]

    def close(self) -> None:
        self._closed = True
        self._server.close()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the work ------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        reader = client.makefile("rb")
        try:
            while True:
                request = _read_message(reader, is_request=True)
                if request is None:
                    return
                head, body, keep = request
                exchange = _exchange(head, body)
                rule = self._rule_for(exchange)
                with self._lock:
                    self.exchanges.append(exchange)
                if rule is not None and rule.action in ("lose", "hold", "answer"):
                    self._instead(client, exchange, rule)
                    return  # the server never sees the request
                if rule is not None and rule.action == "delay":
                    self._delay(exchange, head + body)
                    return  # the client gave up on it long ago
                ahead, abody, akeep = self._forward(head + body)
                exchange.status = int(ahead.split(b" ", 2)[1])
                exchange.received = len(ahead) + len(abody)
                exchange.answer_headers = _headers(ahead)
                exchange.answer_body = abody
                if rule is not None:
                    self._after(client, exchange, rule)
                    return  # the request landed upstream; the client never hears of it
                client.sendall(ahead + abody)
                if not (keep and akeep):
                    return
        except OSError:
            return
        finally:
            reader.close()
            client.close()

    def _instead(self, client: socket.socket, exchange: Exchange, rule: _Rule) -> None:
        """A fault instead of forwarding: lose the request, hold it, or answer it."""
        if rule.action == "answer":
            exchange.status, exchange.fault = rule.status, "answered"
            _answer(client, rule.status, "Refused", rule.body)
            return
        exchange.fault = "lost" if rule.action == "lose" else "held"
        rule.happened.set()
        if rule.action == "hold":
            self._release.wait(60)

    def _delay(self, exchange: Exchange, raw: bytes) -> None:
        exchange.fault = "delayed"
        self._delayed.wait(60)
        ahead, abody, _ = self._forward(raw)
        exchange.answer_headers, exchange.answer_body = _headers(ahead), abody
        exchange.status = int(ahead.split(b" ", 2)[1])  # last: what a test waits for

    def _after(self, client: socket.socket, exchange: Exchange, rule: _Rule) -> None:
        """A fault once the server answered: drop or hold its answer, or answer another."""
        if rule.action == "after":
            exchange.fault = f"answered {rule.status} after forwarding"
            rule.happened.set()  # before the client can see the answer
            _answer(client, rule.status, "Injected", rule.body)
            return
        exchange.fault = "dropped" if rule.action == "drop" else "held"
        if rule.then is not None:
            rule.then()
        rule.happened.set()
        if rule.action == "hold-after":
            self._release.wait(60)

    def _rule_for(self, exchange: Exchange) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.method in (exchange.method, "*") and rule.path in exchange.path:
                    if rule.skip:
                        rule.skip -= 1
                        continue
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times == 0:
                            self._rules.remove(rule)
                    return rule
        return None

    def _forward(self, raw: bytes) -> tuple[bytes, bytes, bool]:
        with socket.create_connection(self.upstream) as up:
            up.sendall(raw)
            reader = up.makefile("rb")
            try:
                answer = _read_message(reader, is_request=False)
            finally:
                reader.close()
        if answer is None:
            raise OSError("the server closed the connection without answering")
        return answer


def _answer(client: socket.socket, status: int, reason: str, body: Any) -> None:
    payload = json.dumps(body).encode()
    client.sendall(
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nx-ms-retry-after-ms: 1\r\n"
        "connection: close\r\n\r\n".encode()
        + payload
    )


def _read_message(reader: Any, *, is_request: bool) -> tuple[bytes, bytes, bool] | None:
    """One HTTP/1.1 message: its head, its body (Content-Length, chunked, or until the
    connection closes for an answer) and whether the connection stays open."""
    lines = []
    while True:
        line = reader.readline(65536)
        if not line:
            return None
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
    head = b"".join(lines)
    headers = _headers(head)
    keep = headers.get("connection", "keep-alive").lower() != "close"
    status = b"" if is_request else head.split(b" ", 2)[1]
    if status in (b"204", b"304") or status.startswith(b"1"):
        body = b""  # no body, whatever the headers say (RFC 9112 6.3); the server keeps
        # the connection open, so reading to its end would wait for ever
    elif "content-length" in headers:
        body = reader.read(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = _read_chunked(reader)
    elif is_request:
        body = b""
    else:
        body, keep = reader.read(), False
    return head, body, keep


def _read_chunked(reader: Any) -> bytes:
    parts = []
    while True:
        size_line = reader.readline()
        parts.append(size_line)
        size = int(size_line.split(b";")[0].strip(), 16)
        chunk = reader.read(size + 2)
        parts.append(chunk)
        if size == 0:
            return b"".join(parts)


def _headers(head: bytes) -> dict[str, str]:
    out = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            out[name.strip().lower()] = value.strip()
    return out


def _exchange(head: bytes, body: bytes) -> Exchange:
    method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    headers = _headers(head)
    if method == "POST" and headers.get("x-ms-documentdb-isquery", "").lower() == "true":
        method = "QUERY"
    return Exchange(method, path, headers, len(head) + len(body), body)


@contextmanager
def in_front_of(
    cosmos: CosmosEndpoint, *, fresh: bool = True
) -> Iterator[tuple[CosmosEndpoint, Proxy]]:
    """A fresh container on ``cosmos`` (an http endpoint; ``fresh=False``: its own
    container, left as it is), reached through a new Proxy: the endpoint to open stores
    on, and the proxy. A fresh container is deleted after."""
    target = cosmos.fresh() if fresh else cosmos
    try:
        with Proxy(target.endpoint) as proxy:
            yield replace(target, endpoint=proxy.endpoint), proxy
    finally:
        if fresh:
            target.drop()
