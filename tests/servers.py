"""Test servers started as real processes on loopback (shared by tests and benchmarks)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Microsoft publishes this key for every emulator; it opens nothing real.
EMULATOR_KEY = (
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
)


class ServerError(RuntimeError):
    pass


def start_cosmosdb_server() -> tuple[subprocess.Popen[str], str]:
    """@vercel/cosmosdb-server (installed by `npm ci`, patched) over HTTP on a free
    loopback port; returns the process and its endpoint once it says it is ready."""
    cli = ROOT / "node_modules/@vercel/cosmosdb-server/lib/cli.js"
    if not cli.exists() or shutil.which("node") is None:
        raise ServerError(f"{cli} or node is missing: run scripts/setup (npm ci) first")
    proc = subprocess.Popen(
        ["node", str(cli), "-p", "0", "--host", "127.0.0.1", "--no-ssl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "Ready to accept HTTP connections at 127.0.0.1:PORT"
    match = re.search(r"Ready to accept HTTP connections at ([\d.]+):(\d+)", line)
    if not match:
        stop(proc)
        raise ServerError(f"cosmosdb-server did not start: {line!r}")
    return proc, f"http://{match[1]}:{match[2]}/"


def stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()
    if proc.stdout:
        proc.stdout.close()
