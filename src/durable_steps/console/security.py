"""Who may use the console: the guard in front of every request (an ASGI middleware).

The console can cancel runs and read what models answered, so it is safe by default:

- It binds to 127.0.0.1 (``--host`` changes that, with a warning). On a loopback address
  a request must name the console's own host and port (``Host``): a page of another
  site that makes its name resolve to 127.0.0.1 (DNS rebinding) is refused.
- A random access token is made at start and printed in the console's link
  (``/?token=...``). A request with the token gets a session cookie (HttpOnly,
  SameSite=Strict, this port's own name; its value is derived from the token, so a
  restart ends every session) and is redirected to the same address without the
  token, so that it does not stay in the address bar. Every other request needs the
  cookie: static files, fragments, all of it. Without it: 401.
- A request whose ``Origin`` (or, lacking one, ``Referer``) is another origin is
  refused, whatever it asks; a POST must carry one of them. Actions are POSTs whose
  form carries the CSRF token of the page (``csrf``; checked by the action's handler
  with ``csrf_ok``).
- Every answer says not to cache it, not to be framed, not to sniff types, and to send
  no referrer elsewhere; scripts and styles load only from the console itself (CSP).
- Scripts (the JSON API, ``api``) send ``Authorization: Bearer TOKEN`` instead: no
  cookie, no redirect, and no Origin needed for a POST (a browser never adds that
  header by itself to a request another site makes, so it needs no CSRF token). The
  token can be fixed (``--token``, ``DURABLE_UI_TOKEN``) so that scripts keep it
  across restarts.
- A second, read-only token (``--read-only-token``, ``DURABLE_UI_READ_TOKEN``) signs
  in the same ways but into a read-only session: every page and read, no action (each
  answers 403). The guard says which in ``scope["state"]["read_only"]``.
- Each request is logged (``durable_steps.console``) as method, path and status: never
  a query string (the token), a cookie or a form.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

log = logging.getLogger("durable_steps.console")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]  # fmt: skip
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Secrets:
    """The access token and what is derived from it."""

    def __init__(self, token: str, port: int, read_token: str | None = None) -> None:
        if read_token is not None and hmac.compare_digest(read_token.encode(), token.encode()):
            raise ValueError("the read-only token must differ from the access token")
        self.token, self.read_token = token, read_token
        self.cookie = f"durable_console_{port}"
        self.session = self._derive(token, b"session")
        self.read_session = None if read_token is None else self._derive(read_token, b"read")
        self.csrf = self._derive(token, b"csrf")

    @staticmethod
    def _derive(key: str, what: bytes) -> str:
        return hmac.new(key.encode(), what, hashlib.sha256).hexdigest()

    def who(self, token: str | None) -> bool | None:
        """What a token gives: False a full session, True a read-only one, None nothing."""
        if token is None:
            return None
        if hmac.compare_digest(token.encode(), self.token.encode()):
            return False
        if self.read_token is not None and hmac.compare_digest(
            token.encode(), self.read_token.encode()
        ):
            return True
        return None

    def session_of(self, cookie: str) -> bool | None:
        """What a session cookie's value gives (as ``who``)."""
        if hmac.compare_digest(cookie.encode(), self.session.encode()):
            return False
        if self.read_session is not None and hmac.compare_digest(
            cookie.encode(), self.read_session.encode()
        ):
            return True
        return None

    def csrf_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.csrf.encode())


def allowed_hosts(host: str, port: int) -> frozenset[str] | None:
    """The ``Host`` values a console bound to ``host`` answers (None: any, when it was
    bound to a non-loopback address on purpose)."""
    if host not in LOOPBACK:
        return None
    names = {"localhost", "127.0.0.1"} if host != "::1" else {"localhost", "[::1]"}
    return frozenset(f"{n}:{port}" for n in names) | (frozenset(names) if port == 80 else set())


class Guard:
    """The ASGI middleware that applies the rules at the top of this module."""

    def __init__(self, app: App, secrets: Secrets, hosts: frozenset[str] | None) -> None:
        self.app, self.secrets, self.hosts = app, secrets, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets
        t0, status = time.perf_counter(), [0]

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        try:
            refusal = self._refusal(scope)
            api = str(scope.get("path", "")).startswith("/api/")
            if refusal is not None and api and refusal[0] >= 400:  # scripts read JSON
                refusal = (refusal[0], refusal[1], [(b"content-type", b"application/json")])
            if refusal is None:
                await self.app(scope, receive, guarded)
            else:
                await _answer(guarded, *refusal)
        finally:
            log.info(
                "%s %s %s (%.0f ms)",
                scope.get("method"),
                scope.get("path"),
                status[0],
                (time.perf_counter() - t0) * 1000,
            )

    def _refusal(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        """Why the request is refused, or None when it may go on (see the top)."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        state = scope.setdefault("state", {})
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            why = self._foreign(headers, "GET")  # the host and any Origin still count
            given = self.secrets.who(auth[7:].strip())
            if why is None and given is None:
                why = "Refused: the bearer token is not this console's token."
            state["read_only"], state["bearer"] = given, True
            return None if why is None else (403 if given is not None else 401, why, [])
        why = self._foreign(headers, scope["method"])
        if why is not None:
            return 403, why, []
        cookies = SimpleCookie()
        cookies.load(headers.get("cookie", ""))
        held = cookies.get(self.secrets.cookie)
        if held is not None and (session := self.secrets.session_of(held.value)) is not None:
            state["read_only"], state["bearer"] = session, False
            return None
        return self._sign_in(scope)

    def _sign_in(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]]:
        """The console's link (``?token=``): a session cookie and a redirect without it."""
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = self.secrets.who(next((v for k, v in query if k == "token"), None))
        if given is None:
            return (
                401,
                (
                    "This console needs its access token: open the link that 'durable-steps ui' "
                    "printed when it started (it ends in ?token=...); a script sends the header "
                    "'Authorization: Bearer TOKEN'."
                ),
                [],
            )
        if scope["method"] != "GET":
            return 403, "Refused: open the console's link first.", []
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        location = scope.get("path", "/") + (f"?{rest}" if rest else "")
        value = self.secrets.read_session if given else self.secrets.session
        cookie = f"{self.secrets.cookie}={value}; HttpOnly; SameSite=Strict; Path=/"
        return (
            303,
            "Signed in.",
            [
                (b"location", location.encode("latin-1", "replace")),
                (b"set-cookie", cookie.encode()),
            ],
        )

    def _foreign(self, headers: dict[str, str], method: str) -> str | None:
        """Why a request comes from elsewhere than the console's own pages, if it does."""
        host = headers.get("host", "")
        if self.hosts is not None and host not in self.hosts:
            return (
                f"Refused: this console answers to {' or '.join(sorted(self.hosts))} only "
                "(a request naming another host, as a DNS rebinding attack makes, is refused)."
            )
        own, origin, referer = f"http://{host}", headers.get("origin"), headers.get("referer")
        if (origin is not None and origin != own) or (
            origin is None and referer is not None and _origin_of(referer) != own
        ):
            return "Refused: a request from another origin."
        if method not in ("GET", "HEAD") and origin is None and referer is None:
            return "Refused: an action must come from the console's own pages."
        return None


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def _answer(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
    if (b"content-type", b"application/json") in headers:
        body = json.dumps({"error": text, "status": status}).encode()
    else:
        headers = [(b"content-type", b"text/html; charset=utf-8"), *headers]
        body = (
            "<!doctype html><meta charset=utf-8><title>durable-steps console</title>"
            f"<p>{text.replace('&', '&amp;').replace('<', '&lt;')}</p>"
        ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
