"""What the console's tests share: a real console (``ConsoleServer``: uvicorn on a free
loopback port, in a thread) over a real store -- a FileStore in the test's directory or
a fresh container on cosmos-local -- and a real browser: Debian's Chromium driven by
Playwright (``scripts/browser``, run by ``scripts/test``, installs it with apt-get where it can).

Without Chromium (not installed, and ``scripts/browser`` could not: not root, not Debian)
the browser tests skip with one line saying so -- or fail with ``--durable-strict``, as
the backends that cannot run do; ``DURABLE_TEST_CHROMIUM`` names another Chromium binary.
"""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import pytest

import durable_steps as ds
from durable_steps.console import ConsoleServer


def _chromium() -> str:
    """The browser to drive: DURABLE_TEST_CHROMIUM, else Debian's chromium, else a
    Chromium or Chrome on PATH (a hosted CI runner has Google Chrome)."""
    if named := os.environ.get("DURABLE_TEST_CHROMIUM"):
        return named
    found = (shutil.which(n) for n in ("chromium", "google-chrome", "chromium-browser"))
    return next((f for f in found if f), "/usr/bin/chromium")


CHROMIUM = _chromium()
CHILD = str(Path(__file__).with_name("agent_child.py"))
STREAM_CHILD = str(Path(__file__).with_name("stream_child.py"))


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: str


@dataclass
class Site:
    """A console serving ``store``; ``env`` reaches the same store from a process."""

    server: ConsoleServer
    store: Any
    env: dict[str, str]
    backend: str
    cookies: dict[str, str] = field(default_factory=dict)

    def url(self, path: str = "/") -> str:
        return self.server.origin + path

    def get(self, path: str, *, signed_in: bool = True, **headers: str) -> Answer:
        return self.request("GET", path, signed_in=signed_in, headers=headers)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: str | None = None,
        signed_in: bool = True,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """One HTTP request to the console (with its session cookie when ``signed_in``)."""
        sent = dict(headers or {})
        if signed_in:
            sent.setdefault("Cookie", f"{self.server.secrets.cookie}={self.server.secrets.session}")
        if body is not None:
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        netloc = urlsplit(self.server.origin).netloc
        conn = http.client.HTTPConnection(netloc, timeout=60)
        try:
            conn.request(method, path, body=body, headers=sent)
            got = conn.getresponse()
            answer = Answer(
                got.status, {k.lower(): v for k, v in got.getheaders()}, got.read().decode()
            )
        finally:
            conn.close()
        return answer

    def kill_mid_call(self, run_id: str, hang_at: int, child: str = CHILD) -> None:
        """Run the support agent (or ``child``) in a child process, SIGKILLed while call
        ``hang_at`` runs (the streaming agent: after ``hang_at`` tokens)."""
        proc = subprocess.Popen(
            [sys.executable, child, run_id],
            env={**os.environ, **self.env, "HANG_AT": str(hang_at)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the call runs (or the child dies)
        proc.kill()
        _, err = proc.communicate(timeout=60)
        assert line == "ready\n", err

    def resume(self, run_id: str, child: str = CHILD) -> str:
        """Run the support agent (or ``child``) again in a child process: it resumes."""
        done = subprocess.run(
            [sys.executable, child, run_id],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


class Counting:
    """A real store whose listing counts the runs it yields (what a page cost)."""

    def __init__(self, store: Any) -> None:
        self.store, self.yielded = store, 0

    def list_runs(self, **filters: Any) -> Iterator[ds.RunInfo]:
        for info in self.store.list_runs(**filters):
            self.yielded += 1
            yield info

    def run_info(self, run_id: str) -> ds.RunInfo | None:
        return self.store.run_info(run_id)  # type: ignore[no-any-return]


def _open(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Iterator[Site]:
    if backend == "file":
        path = tmp_path / "store"
        env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)}
        with ds.FileStore(path) as store, ConsoleServer(store, port=0) as server:
            yield Site(server, store, env, backend)
        return
    cosmos = request.getfixturevalue("cosmos_local").fresh()
    try:
        with cosmos.store() as store, ConsoleServer(store, port=0) as server:
            yield Site(server, store, cosmos.env(), backend)
    finally:
        cosmos.drop()


@pytest.fixture(params=["file", "cosmos-local"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """A console over a store of the test's own, on each store."""
    yield from _open(request, tmp_path, request.param)


@pytest.fixture
def file_site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    """A console over a FileStore of the test's own."""
    yield from _open(request, tmp_path, "file")


def _cannot_run(request: pytest.FixtureRequest, reason: str) -> NoReturn:
    """Skip with the reason -- or fail under --durable-strict (CI, where all must run)."""
    if request.config.getoption("--durable-strict"):
        pytest.fail(f"{reason} (--durable-strict)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Debian's Chromium, launched once per module. Not for the session: Playwright's sync
    API keeps an event loop running in this thread while it is open, which would make
    every later test's asyncio.run() (or an agent's run_sync) refuse to start."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _cannot_run(request, "playwright is not installed: scripts/setup installs it ([dev])")
    if not Path(CHROMIUM).exists():
        _cannot_run(
            request,
            f"no Chromium at {CHROMIUM} (nor chromium, google-chrome or chromium-browser on "
            "PATH): scripts/browser installs Debian's chromium with apt-get as root or with "
            "sudo (DURABLE_TEST_CHROMIUM names another binary)",
        )
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a bound for a hung test on a busy machine
    with sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses root
        launched = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, site: Site) -> Iterator[Any]:
    """A fresh browser context, signed in to ``site`` through the printed link."""
    yield from _signed_in(browser, site)


@pytest.fixture
def file_page(browser: Any, file_site: Site) -> Iterator[Any]:
    yield from _signed_in(browser, file_site)


def _signed_in(browser: Any, site: Site) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(30_000)  # a bound for a hung test on a busy machine, not a wait
    tab.goto(site.server.url)
    try:
        yield tab
    finally:
        context.close()
