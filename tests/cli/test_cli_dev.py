"""`durable-steps dev cosmos-server` as a real process: it starts the local Cosmos DB
server, prints the line to export, serves an application and the command line, and
stops (the server with it) on SIGTERM or Ctrl-C. It needs no pytest.

The tests that start it take the ``cosmos_local`` fixture for its rule only: where the
server cannot run (no Node.js, no npm package) they skip, or fail under --durable-strict,
as every cosmos-local test does."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import durable_steps as ds
from durable_steps.devtools.cosmos_server import EMULATOR_KEY
from durable_steps.testing import CosmosEndpoint

from ..helpers.clitools import CLEAN, SCRIPT, Cli
from ..helpers.servers import ROOT

NO_PYTEST = (
    "import sys\nsys.modules['pytest'] = None\nfrom durable_steps.cli.main import main\nmain()\n"
)
"""The command line with pytest made unimportable (as where the [testing] extra is not)."""
ENV = {k: v for k, v in CLEAN.items() if k != "NODE_PATH"}
"""The environment without NODE_PATH: the package is found from the directory only."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _start(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """The command in a process group of its own (as a terminal's job), and its exports."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    words = shlex.split(line)
    assert words[0] == "export", (line, proc.stderr and proc.stderr.read())
    return proc, dict(w.split("=", 1) for w in words[1:])


@pytest.mark.parametrize(
    ("how", "stop_with"),
    [("script", signal.SIGTERM), ("without-pytest", signal.SIGTERM), ("script", signal.SIGINT)],
    ids=["SIGTERM", "SIGTERM-without-pytest", "Ctrl-C"],
)
def test_the_server_serves_an_application_and_stops_on_a_signal(
    cosmos_local: CosmosEndpoint, how: str, stop_with: signal.Signals
) -> None:
    """Started from a directory that has the npm package, it prints one export line (the
    emulator's key, the endpoint on the port asked for, create-if-missing); a workflow
    runs on it through store_from_env, the command line lists the run; SIGTERM (or
    Ctrl-C, which reaches the server too) stops it and the server: exit 0, the port
    closed."""
    port = _free_port()
    command = ["dev", "cosmos-server", "--port", str(port)]
    argv = [SCRIPT, *command] if how == "script" else [sys.executable, "-c", NO_PYTEST, *command]
    proc, env = _start(argv, ROOT)
    try:
        assert env == {
            "DURABLE_STORE": "cosmos",
            "COSMOS_ENDPOINT": f"http://127.0.0.1:{port}/",
            "COSMOS_KEY": EMULATOR_KEY,
            "COSMOS_CREATE_IF_MISSING": "true",
        }
        flow = ds.Workflow("greet", [ds.Step("hello", lambda s: {"greeting": "hi"})])
        with ds.store_from_env(env) as store:
            assert flow.run("order-7", store) == {"greeting": "hi"}
        listed = Cli(env).json("runs", "list")
        assert [(r["run_id"], r["status"]) for r in listed] == [("order-7", "completed")]
        assert _answers(port)
    finally:
        if stop_with == signal.SIGINT:
            os.killpg(proc.pid, stop_with)  # Ctrl-C: the terminal signals the whole job
        else:
            proc.send_signal(stop_with)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == ""  # (the export line was read above)
    assert "Ctrl-C stops the server" in err and err.rstrip().endswith("cosmos-server: stopped")
    assert not _answers(port)


def test_a_free_port_by_default(cosmos_local: CosmosEndpoint) -> None:
    """Without --port it takes a free loopback port and says which."""
    proc, env = _start([SCRIPT, "dev", "cosmos-server"], ROOT)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", env["COSMOS_ENDPOINT"])
        with ds.store_from_env(env) as store:
            assert store.load("nothing") is None
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_without_the_npm_package_it_says_what_to_install(tmp_path: Path) -> None:
    """Where Node.js cannot find the package (no node_modules here or above, no
    NODE_PATH): exit 1, one line with the npm command."""
    done = Cli({"NODE_PATH": ""}, cwd=tmp_path)("dev", "cosmos-server")  # (CLEAN may set it)
    assert (done.returncode, done.stdout) == (1, "")
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1, line
    if "Node.js (node) is not on PATH" not in line:
        assert f"@vercel/cosmosdb-server cannot be found from {tmp_path}" in line
    assert "npm install @vercel/cosmosdb-server@1.0.1" in line and "Node.js 20+" in line


def test_a_port_in_use_is_one_line(cosmos_local: CosmosEndpoint) -> None:
    """A port another process listens on: exit 1, one line naming it."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = Cli(ENV, cwd=ROOT)("dev", "cosmos-server", "--port", str(port))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: EADDRINUSE; choose another port"
    )


def test_its_help_says_what_it_needs() -> None:
    """--help names Node.js 20+, the npm command and where the package may be."""
    done = Cli(ENV)("dev", "cosmos-server", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for needed in (
        "Node.js 20+",
        "npm install @vercel/cosmosdb-server@1.0.1",
        "current directory or one above it, or on NODE_PATH",
        "export DURABLE_STORE=cosmos",
    ):
        assert needed in text


def test_the_wrapper_module_imports_without_pytest() -> None:
    """The server's starter lives outside durable_steps.testing (which imports pytest)."""
    code = (
        "import sys; sys.modules['pytest'] = None\n"
        "import durable_steps.devtools.cosmos_server, durable_steps.cli.dev\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=ENV, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
