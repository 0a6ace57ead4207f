"""The emulator backend's own logic, on what exists here: readiness against loopback HTTP
servers that play a starting emulator, and skip-vs-fail against no engine and against a
fake Docker engine on a unix socket (the real docker-py and testcontainers talk to it).
The container itself cannot run here (no Docker engine); hosted CI runs it."""

from __future__ import annotations

import json
import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from durable_steps.testing import _emulator as emu

# -- loopback servers that play an emulator's health server and gateway ----------------


@dataclass
class Script:
    """Answers (status, body) in turn; the last one forever. Counts the requests."""

    answers: list[tuple[int, str]]
    paths: list[str] = field(default_factory=list)

    def next(self, path: str) -> tuple[int, str]:
        self.paths.append(path)
        return self.answers[min(len(self.paths), len(self.answers)) - 1]


@pytest.fixture
def serve() -> Iterator[Callable[[Script], str]]:
    servers: list[ThreadingHTTPServer] = []

    def start(script: Script) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = script.next(self.path)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hangs_up() -> Iterator[str]:
    """A port that accepts and closes at once, as Docker's port mapping does when
    nothing listens inside the container (an image without the health server)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    stop = threading.Event()

    def loop() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                srv.accept()[0].close()
            except OSError:
                continue

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    srv.close()


STARTING = (503, '{"message": "pgcosmos extension is still starting"}')


def test_ready_endpoint_is_polled_through_503_until_200(serve: Callable[[Script], str]) -> None:
    """/ready answering 503 three times, then 200: ready, and the gateway is never asked."""
    health = Script([STARTING, STARTING, STARTING, (200, "ready")])
    gateway = Script([(200, "{}")])
    said = emu.wait_ready(serve(health) + "/ready", serve(gateway) + "/", seconds=60, pause=0.01)
    assert said == "/ready"
    assert health.paths == ["/ready"] * 4
    assert gateway.paths == []


def test_gateway_decides_when_the_health_port_never_answers(
    serve: Callable[[Script], str], hangs_up: str
) -> None:
    """No HTTP answer on 8080 (an older image): the gateway's first non-5xx answer is ready."""
    gateway = Script([STARTING, (500, "starting"), (200, '{"id": "localhost"}')])
    said = emu.wait_ready(hangs_up + "/ready", serve(gateway) + "/", seconds=60, pause=0.01)
    assert said == "gateway"
    assert len(gateway.paths) == 3


def test_once_ready_answers_the_gateway_is_not_trusted(serve: Callable[[Script], str]) -> None:
    """While /ready answers 503, a gateway that already answers 200 does not make it ready."""
    health = Script([STARTING, STARTING, (200, "ready")])
    gateway = Script([(200, "{}")])
    said = emu.wait_ready(serve(health) + "/ready", serve(gateway) + "/", seconds=60, pause=0.01)
    assert (said, len(health.paths), gateway.paths) == ("/ready", 3, [])


def test_never_ready_fails_after_the_bound_quoting_the_last_answer(
    serve: Callable[[Script], str],
) -> None:
    """An emulator stuck in 503: EmulatorError after the bound, saying what it answered."""
    health = Script([STARTING])
    with pytest.raises(emu.EmulatorError, match="not ready within 1 s") as err:
        emu.wait_ready(serve(health) + "/ready", "http://127.0.0.1:9/", seconds=1, pause=0.05)
    assert "503" in str(err.value) and "pgcosmos extension is still starting" in str(err.value)
    assert "DURABLE_TEST_EMULATOR_TIMEOUT" in str(err.value)
    assert len(health.paths) >= 2


def test_an_emulator_that_exits_fails_at_once_not_after_the_bound(hangs_up: str) -> None:
    """The container exiting while we wait is reported as such, without waiting out the bound."""
    calls: list[int] = []

    def exited() -> str | None:
        calls.append(1)
        return "status exited, exit code 137" if len(calls) >= 2 else None

    with pytest.raises(emu.EmulatorError, match="exited before it was ready: status exited"):
        emu.wait_ready(hangs_up + "/ready", hangs_up + "/", seconds=600, pause=0.01, exited=exited)
    assert len(calls) == 2


# -- skip vs fail -------------------------------------------------------------------------


def test_no_engine_is_found_without_docker_py_and_names_the_socket(tmp_path: Path) -> None:
    """A missing socket is reported at once (one connect, no client library, no retry)."""
    why = emu.no_docker_engine(f"unix://{tmp_path}/docker.sock")
    assert why is not None
    assert f"unix://{tmp_path}/docker.sock" in why and "No such file" in why
    assert emu.no_docker_engine("npipe:////./pipe/no_engine") == (
        "npipe:////./pipe/no_engine: no such pipe"
    )


def test_an_engine_that_never_answers_is_given_up_after_the_bound(tmp_path: Path) -> None:
    """A socket that accepts but never answers /_ping counts as no engine, after the bound."""
    path = str(tmp_path / "mute.sock")
    with socket.socket(socket.AF_UNIX) as mute:
        mute.bind(path)
        mute.listen(1)
        why = emu.no_docker_engine(f"unix://{path}", seconds=0.2)
    assert why is not None and "timed out" in why


API = "1.45"


class FakeEngine:
    """A Docker engine API on a unix socket: /_ping and /version answer; images listed
    in ``present`` exist; every pull fails as a registry without the tag does; every
    container create fails. CallRecords the requests it got."""

    def __init__(self, present: tuple[str, ...] = ()) -> None:
        self.present = set(present)
        self.requests: list[str] = []
        self.bodies: dict[str, bytes] = {}  # the last body of each path
        self.dir = tempfile.mkdtemp(prefix="engine-")  # short: unix socket paths are limited
        self.host = f"unix://{self.dir}/docker.sock"
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self, status: int, body: Any) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def route(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                engine.requests.append(f"{self.command} {self.path}")
                engine.bodies[self.path.split("?")[0].removeprefix(f"/v{API}")] = body
                self.answer(*engine.reply(self.path.split("?")[0].removeprefix(f"/v{API}")))

            do_GET = do_POST = do_DELETE = route

            def log_message(self, *args: Any) -> None:
                pass

        self.server = socketserver.ThreadingUnixStreamServer(f"{self.dir}/docker.sock", Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(self, path: str) -> tuple[int, Any]:
        fixed: dict[str, tuple[int, Any]] = {
            "/_ping": (200, "OK"),
            "/version": (200, {"ApiVersion": API, "Version": "27.0.0", "Os": "linux"}),
            "/images/create": (404, {"message": "manifest unknown: manifest unknown"}),
            "/containers/create": (500, {"message": "no space left on device"}),
        }
        if path.startswith("/images/") and path.endswith("/json"):
            name = path.removeprefix("/images/").removesuffix("/json")
            if name in self.present:
                return 200, {"Id": "sha256:" + "0" * 64, "RepoTags": [name]}
            return 404, {"message": f"No such image: {name}"}
        return fixed.get(path, (404, {"message": f"page not found: {path}"}))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeEngine]]:
    from testcontainers.core.config import testcontainers_config

    made: list[FakeEngine] = []

    def make(*present: str, ryuk: bool = False) -> FakeEngine:
        fake = FakeEngine(present)
        made.append(fake)
        monkeypatch.setenv("DOCKER_HOST", fake.host)
        monkeypatch.setattr(testcontainers_config, "ryuk_disabled", not ryuk)
        return fake

    yield make
    for fake in made:
        fake.close()


WRONG_TAG = "mcr.microsoft.com/cosmosdb/linux/azure-cosmos-emulator:vnext-EN19990101"


def test_fake_engine_answers_the_probe(engine: Callable[..., FakeEngine]) -> None:
    """The fake engine counts as an engine: the probe finds it, so nothing is skipped."""
    fake = engine()
    assert emu.no_docker_engine() is None
    assert fake.requests == ["GET /_ping"]


def test_an_image_that_cannot_be_pulled_is_a_failure_naming_it(
    engine: Callable[..., FakeEngine],
) -> None:
    """Engine up, tag unknown: EmulatorError with the image, the engine's reason, the override."""
    fake = engine()
    with pytest.raises(emu.EmulatorError) as err:
        emu.start_emulator(WRONG_TAG, seconds=5)
    message = str(err.value)
    assert f"cannot pull the emulator image {WRONG_TAG}" in message
    assert "manifest unknown" in message and "AZURE_COSMOS_EMULATOR_IMAGE" in message
    assert any("/images/create?" in r and "vnext-EN19990101" in r for r in fake.requests)
    assert not any("/containers/create" in r for r in fake.requests)


def test_a_ryuk_image_that_cannot_be_pulled_is_a_failure_naming_ryuk(
    engine: Callable[..., FakeEngine],
) -> None:
    """With Ryuk on and its image unavailable: a failure that says how to go without it."""
    from testcontainers.core.config import testcontainers_config

    engine(emu.IMAGE, ryuk=True)
    with pytest.raises(emu.EmulatorError) as err:
        emu.start_emulator(emu.IMAGE, seconds=5)
    message = str(err.value)
    assert f"Ryuk reaper image {testcontainers_config.ryuk_image}" in message
    assert "TESTCONTAINERS_RYUK_DISABLED=true" in message


def test_an_image_that_cannot_start_is_a_failure_with_the_engines_reason(
    engine: Callable[..., FakeEngine],
) -> None:
    """Image present, container create refused: EmulatorError 'could not start', not a skip.
    The create asked for the pinned image over http, without the Data Explorer and
    telemetry, with the gateway and health ports published."""
    fake = engine(emu.IMAGE)
    with pytest.raises(emu.EmulatorError, match=r"could not start .*no space left on device"):
        emu.start_emulator(emu.IMAGE, seconds=5)
    create = [r for r in fake.requests if "/containers/create" in r]
    assert len(create) == 1
    asked = json.loads(fake.bodies["/containers/create"])
    assert asked["Image"] == emu.IMAGE
    assert {"PROTOCOL=http", "ENABLE_EXPLORER=false", "ENABLE_TELEMETRY=false"} <= set(asked["Env"])
    assert {"8081/tcp", "8080/tcp"} <= set(asked["ExposedPorts"])


USES_EMULATOR = """
def test_uses_the_emulator(cosmos_emulator):
    assert cosmos_emulator.endpoint
"""


def test_pytest_reports_no_engine_as_one_skip_line(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through pytest: no engine is a skip whose one line names the socket."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    monkeypatch.delenv("DURABLE_TEST_EMULATOR_ENDPOINT", raising=False)
    pytester.makepyfile(USES_EMULATOR)
    result = pytester.runpytest_subprocess("--durable-backends=cosmos-emulator", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*cosmos-emulator: no Docker engine answers here (unix://*"])
    strict = pytester.runpytest_subprocess("--durable-backends=cosmos-emulator", "--durable-strict")
    strict.assert_outcomes(errors=1)
    strict.stdout.fnmatch_lines(["*no Docker engine answers here*(--durable-strict)*"])


def test_pytest_reports_a_wrong_tag_as_an_error_not_a_skip(
    pytester: pytest.Pytester, engine: Callable[..., FakeEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through pytest, against the fake engine: a wrong tag errors the test with the reason."""
    engine()
    monkeypatch.setenv("AZURE_COSMOS_EMULATOR_IMAGE", WRONG_TAG)
    monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
    monkeypatch.delenv("DURABLE_TEST_EMULATOR_ENDPOINT", raising=False)
    pytester.makepyfile(USES_EMULATOR)
    result = pytester.runpytest_subprocess("--durable-backends=cosmos-emulator")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*cannot pull the emulator image {WRONG_TAG}*manifest unknown*"])
