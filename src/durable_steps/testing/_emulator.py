"""cosmos-emulator: the Azure Cosmos DB emulator (Linux vNext) in a container.

- The image is a dated vNext tag (``IMAGE``) from a release that has the health
  server on port 8080 (``/ready``, from EN20251022 on). ``AZURE_COSMOS_EMULATOR_IMAGE``
  overrides it (``...:vnext-latest`` is the moving tag). It runs with
  ``PROTOCOL=http``, ``ENABLE_EXPLORER=false`` (``/ready`` would wait for the Data
  Explorer otherwise) and ``ENABLE_TELEMETRY=false``.
- It starts as a generic testcontainers ``DockerContainer``:
  ``testcontainers.community.cosmosdb`` does not work with vNext (testcontainers-python
  #1024: hard-coded HTTPS, a legacy readiness probe, no retry of the 503 an emulator
  gives while its "pgcosmos extension is still starting").
- Readiness (``wait_ready``): ``/ready`` on 8080 once it answers at all; while it gives
  no HTTP answer (an image without the health server), the gateway on 8081. Any 5xx
  means "still starting" and is retried, for a bounded time
  (``DURABLE_TEST_EMULATOR_TIMEOUT``, default 180 s), then a failure that quotes the
  last answer and the end of the container's log.
- Skip or fail (``no_docker_engine``, ``start_emulator``): no Docker engine answering
  ``/_ping`` is the one reason to skip, found in milliseconds. An engine that answers
  but cannot pull or start the image is an ``EmulatorError`` (a failure): a wrong tag
  must not read as "skipped". The same holds for testcontainers' Ryuk reaper image
  (``testcontainers/ryuk``): Ryuk is what removes the emulator (GBs of memory) when a
  test run is killed, so it stays on, and an engine that cannot pull or start it
  fails with a message naming ``TESTCONTAINERS_RYUK_DISABLED=true`` as the way to go
  without it (then ``docker rm -f`` what a killed run leaves behind).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

IMAGE = "mcr.microsoft.com/cosmosdb/linux/azure-cosmos-emulator:vnext-EN20260907"
ENV = {"PROTOCOL": "http", "ENABLE_EXPLORER": "false", "ENABLE_TELEMETRY": "false"}
GATEWAY_PORT, HEALTH_PORT = 8081, 8080


class EmulatorError(RuntimeError):
    """A Docker engine answers, but the emulator cannot be pulled, started or reached."""


def image() -> str:
    return os.environ.get("AZURE_COSMOS_EMULATOR_IMAGE") or IMAGE


def timeout() -> float:
    return float(os.environ.get("DURABLE_TEST_EMULATOR_TIMEOUT") or 180)


def docker_host() -> str:
    default = (
        "npipe:////./pipe/docker_engine"
        if sys.platform == "win32"
        else "unix:///var/run/docker.sock"
    )
    return os.environ.get("DOCKER_HOST") or default


def no_docker_engine(host: str | None = None, seconds: float = 3) -> str | None:
    """Why no Docker engine answers at ``host`` (None when one does), within ``seconds``.
    unix and tcp hosts are asked for /_ping, a Windows pipe must exist; for other
    schemes (ssh) docker-py finds out itself."""
    host = host or docker_host()
    url = urllib.parse.urlsplit(host)
    if url.scheme == "npipe":
        pipe = url.path.replace("/", "\\")
        return None if os.path.exists(pipe) else f"{host}: no such pipe"
    try:
        if url.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX)
            address: Any = url.path
        elif url.scheme == "tcp":
            sock = socket.socket()
            address = (url.hostname, url.port or 2375)
        else:
            return None
        with sock:
            sock.settimeout(seconds)
            sock.connect(address)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = sock.recv(64)
    except OSError as exc:
        return f"{host}: {exc.strerror or exc}"
    answered = reply.startswith(b"HTTP/") and b" 200 " in reply
    return None if answered else f"{host} answered {reply!r}"


# -- readiness -------------------------------------------------------------------------


def _get(url: str) -> tuple[int, str] | None:
    """(status, start of body), or None when nothing answered in HTTP."""
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:  # noqa: S310 - our own URL
            return resp.status, resp.read(200).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(200).decode(errors="replace")
    except (OSError, http.client.HTTPException, ValueError):
        return None


def wait_ready(
    health_url: str | None,
    gateway_url: str,
    *,
    seconds: float,
    pause: float = 0.5,
    exited: Callable[[], str | None] = lambda: None,
) -> str:
    """Wait until the emulator is ready; return which probe said so ("/ready" or
    "gateway"). ``exited()`` says why the emulator is gone, if it is."""
    deadline = time.monotonic() + seconds
    health_answers, last = False, "nothing answered"
    while True:
        if health_url:
            answer = _get(health_url)
            if answer is not None:
                health_answers = True
                if answer[0] == 200:
                    return "/ready"
                last = f"{health_url} answered {answer[0]} {answer[1].strip()!r}"
        if not health_answers:  # no health server (yet): ask the gateway
            answer = _get(gateway_url)
            if answer is not None and answer[0] < 500:  # 401/403 too: it is serving
                return "gateway"
            if answer is not None:
                last = f"{gateway_url} answered {answer[0]} {answer[1].strip()!r}"
        if why := exited():
            raise EmulatorError(f"the Cosmos DB emulator exited before it was ready: {why}")
        if time.monotonic() + pause > deadline:
            raise EmulatorError(
                f"the Cosmos DB emulator was not ready within {seconds:g} s (last: {last}); "
                "raise DURABLE_TEST_EMULATOR_TIMEOUT on a slow machine"
            )
        time.sleep(pause)


# -- the container ---------------------------------------------------------------------


@dataclass
class Emulator:
    container: Any  # testcontainers DockerContainer
    endpoint: str

    def stop(self) -> None:
        self.container.stop()


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]


def _ensure_image(client: Any, name: str, what: str, hint: str) -> None:
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        try:
            client.images.pull(name)
        except docker.errors.DockerException as exc:
            raise EmulatorError(
                f"cosmos-emulator: the Docker engine at {docker_host()} answers but cannot "
                f"pull {what} {name} ({_first_line(exc)}): {hint}"
            ) from exc
    except docker.errors.DockerException as exc:
        raise EmulatorError(
            f"cosmos-emulator: the Docker engine at {docker_host()} answers but cannot look "
            f"up {what} {name} ({_first_line(exc)})"
        ) from exc


def _tail(container: Any, lines: int = 30) -> str:
    try:
        out, err = container.get_logs()
    except Exception as exc:  # the log is a hint; its absence must not hide the error
        return f"(no container log: {_first_line(exc)})"
    text = (out + err).decode(errors="replace").splitlines()[-lines:]
    return "\n".join(["container log (last lines):", *text])


def _exited(container: Any) -> Callable[[], str | None]:
    def check() -> str | None:
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status in ("exited", "dead"):
            return f"status {wrapped.status}, exit code {wrapped.attrs['State'].get('ExitCode')}"
        return None

    return check


def start_emulator(name: str, seconds: float) -> Emulator:
    """Pull (if needed) and start the emulator image ``name``, wait until it is ready.
    Call only when ``no_docker_engine()`` is None; every failure is an EmulatorError."""
    import docker
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer, Reaper

    try:
        client = docker.from_env(timeout=600)
    except docker.errors.DockerException as exc:
        raise EmulatorError(
            f"cosmos-emulator: the Docker engine at {docker_host()} answers /_ping, but the "
            f"Docker client cannot use it ({_first_line(exc)})"
        ) from exc
    try:
        if not testcontainers_config.ryuk_disabled:
            _ensure_image(
                client,
                testcontainers_config.ryuk_image,
                "testcontainers' Ryuk reaper image",
                "Ryuk removes the emulator when a test run is killed; let the engine pull it "
                "(RYUK_CONTAINER_IMAGE names a mirror), or set TESTCONTAINERS_RYUK_DISABLED=true "
                "to run without it",
            )
        _ensure_image(
            client,
            name,
            "the emulator image",
            "check the tag, or set AZURE_COSMOS_EMULATOR_IMAGE to a vNext image that exists "
            "(e.g. ...azure-cosmos-emulator:vnext-latest)",
        )
    finally:
        client.close()
    if not testcontainers_config.ryuk_disabled:
        try:
            Reaper.get_instance()
        except Exception as exc:
            raise EmulatorError(
                f"cosmos-emulator: testcontainers' Ryuk reaper did not start "
                f"({_first_line(exc)}); set TESTCONTAINERS_RYUK_DISABLED=true to run without it"
            ) from exc
    container = None
    try:
        container = DockerContainer(name).with_exposed_ports(GATEWAY_PORT, HEALTH_PORT)
        for key, value in ENV.items():
            container.with_env(key, value)
        container.start()
        host = container.get_container_host_ip()
        gateway = f"http://{host}:{container.get_exposed_port(GATEWAY_PORT)}/"
        health = f"http://{host}:{container.get_exposed_port(HEALTH_PORT)}/ready"
    except Exception as exc:
        if container is not None:
            _stop_quietly(container)
        raise EmulatorError(
            f"cosmos-emulator: the Docker engine at {docker_host()} could not start {name} "
            f"({_first_line(exc)})"
        ) from exc
    try:
        wait_ready(health, gateway, seconds=seconds, exited=_exited(container))
    except EmulatorError as exc:
        log = _tail(container)
        _stop_quietly(container)
        raise EmulatorError(f"cosmos-emulator ({name}): {exc}\n{log}") from exc
    return Emulator(container, gateway)


def _stop_quietly(container: Any) -> None:
    with contextlib.suppress(Exception):  # the error that brought us here is the one to report
        container.stop()
