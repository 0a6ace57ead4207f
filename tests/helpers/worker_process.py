"""The worker (``durable-steps worker``) as the worker tests run it: a real process, in
the test's directory, whose stderr is kept in a file there."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .clitools import CLEAN, SCRIPT

_started: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def workers_die_with_their_test() -> Iterator[None]:
    """A test that fails before its worker exits must not leave it running (a worker
    waits for its release file forever)."""
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def worker(env: dict[str, str], cwd: Path, *args: str, **extra: str) -> subprocess.Popen[str]:
    """The worker in a process of its own; its stderr also goes to cwd/worker.err. It runs
    in ``cwd`` and imports the durable_steps under test (not whatever a relative
    PYTHONPATH or the shared editable install would give there: ``CLEAN``'s is absolute)."""
    with (cwd / "worker.err").open("w") as errors:
        proc = subprocess.Popen(
            [SCRIPT, "worker", *args],
            env={**CLEAN, **env, **extra},
            cwd=cwd,
            text=True,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    _started.append(proc)
    return proc


def stderr_of(cwd: Path) -> str:
    return (cwd / "worker.err").read_text()
