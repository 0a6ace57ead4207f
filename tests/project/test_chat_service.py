"""examples/chat_service end to end, with real processes: uvicorn serves the app, a
``durable-steps worker`` runs the agent on a file store, an HTTP client reads the SSE
stream; the worker is SIGKILLed mid-answer, another one starts, and the client that
reconnects with its last event id gets the rest -- each offset once, in order, the
interrupted model call's chunks marked by a ``reset`` event, the full answer."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..helpers.clitools import CLEAN, SCRIPT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL"),
]

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat_service"
KILL_AFTER = 5
"""Tokens the client receives before the worker is killed (the answer has ~40)."""
WAIT = 60.0


def example_agent() -> Any:
    spec = importlib.util.spec_from_file_location("chat_service_agent", EXAMPLE / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sse(response: httpx.Response) -> Iterator[tuple[str, int | None, Any]]:
    """``(event, id, data)`` of a Server-Sent Events response, as a browser parses it."""
    event, ident, data = "message", None, []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield event, ident, json.loads("\n".join(data))
            event, ident, data = "message", None, []
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "id":
            ident = int(value)
        elif field == "data":
            data.append(value)


class Processes:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.env = {
            **CLEAN,
            "DURABLE_STORE": "file",
            "DURABLE_FILE_PATH": str(tmp_path / "store"),
        }
        self.started: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str], log: str, **extra: str) -> subprocess.Popen[str]:
        with (self.tmp_path / log).open("w") as out:
            proc = subprocess.Popen(
                argv,
                cwd=EXAMPLE,
                env={**self.env, **extra},
                text=True,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append(proc)
        return proc

    def worker(self, n: int, delay: str) -> subprocess.Popen[str]:
        argv = [SCRIPT, "worker", "agent:CHAT", "--interval", "0.1"]
        return self.start(argv, f"worker-{n}.log", CHAT_TOKEN_DELAY=delay)

    def server(self) -> str:
        argv = [sys.executable, "-m", "uvicorn", "app:app", "--port", "0"]
        proc = self.start(argv, "uvicorn.log")
        log = self.tmp_path / "uvicorn.log"
        while proc.poll() is None:  # uvicorn says where it listens once it is ready
            if m := re.search(r"Uvicorn running on (http://\S+)", log.read_text()):
                return m[1]
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
        raise AssertionError(f"uvicorn exited: {log.read_text()}")

    def stop(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    yield procs
    procs.stop()


def test_a_page_reading_a_chat_continues_at_its_offset_after_the_worker_dies(
    processes: Processes,
) -> None:
    """Killed after the client got KILL_AFTER tokens, the worker's run is resumed by
    another (started while the first held it, so it takes it over once the first is
    gone); the client reconnects with Last-Event-ID and receives every offset after
    it; across both connections the offsets are 0, 1, 2, ... each once; a ``reset``
    event marks the killed model call's chunks; with it applied, the text shown is the
    model's whole answer, and the ``end`` event says the run completed with it."""
    question = "Why durable?"
    expected = example_agent().answer_to(question)
    first = processes.worker(1, delay="0.1")  # starting while uvicorn starts
    url = processes.server()
    with httpx.Client(base_url=url, timeout=WAIT) as client:
        started = client.post("/chats", json={"question": question})
        assert started.status_code == 201, started.text
        stream = started.json()["stream"]
        got: list[tuple[str, int | None, Any]] = []
        with client.stream("GET", stream) as response:
            for entry in sse(response):
                got.append(entry)
                tokens = sum(e == "token" for e, _, _ in got)
                if tokens == 1:  # the run is the first worker's: the second one waits
                    processes.worker(2, delay="0.005")
                if tokens == KILL_AFTER:
                    break
        first.send_signal(signal.SIGKILL)  # mid-answer: its model call is in flight
        assert first.wait(timeout=WAIT) == -signal.SIGKILL
        last = got[-1][1]
        with client.stream("GET", stream, headers={"Last-Event-ID": str(last)}) as response:
            got += list(sse(response))
        assert client.get("/chats/chat-none/stream").status_code == 404
        for body in (b"{not json", b"\xff\xfe"):  # the client's mistake: 400 saying what to send
            bad = client.post("/chats", content=body, headers={"content-type": "application/json"})
            assert (bad.status_code, bad.json()) == (400, {"error": 'send {"question": "..."}'})
        assert "new EventSource(chat.stream)" in client.get("/").text

    ids = [i for _, i, _ in got if i is not None]
    assert ids == list(range(len(ids)))  # each offset once, in order, no gap
    resets = [data["since"] for event, _, data in got if event == "reset"]
    assert resets == [0]  # the killed call wrote from offset 0; what follows replaces it
    shown: dict[int, str] = {}
    for event, ident, data in got:
        if event == "reset":
            shown = {o: t for o, t in shown.items() if o < data["since"]}
        elif event == "token":
            assert ident is not None
            shown[ident] = data["text"]
    assert "".join(shown.values()).strip() == expected
    assert got[-1] == ("end", None, {"status": "completed", "answer": expected})
    assert sum(e == "token" for e, _, _ in got) >= len(expected.split()) + KILL_AFTER
