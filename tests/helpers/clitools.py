"""The console script as the CLI tests run it: a real process on a real store (a file
store in the test's directory, or a fresh container on the local Cosmos DB server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import durable_steps as ds

SCRIPT = str(Path(sys.executable).with_name("durable-steps"))
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS_", "DURABLE_"))}
"""The test's environment without any store configuration of the developer's (its
PYTHONPATH made absolute by conftest, so that a command run elsewhere imports the same
code)."""


@dataclass
class Cli:
    env: dict[str, str]
    cwd: Path | None = None
    argv: list[str] = field(default_factory=lambda: [SCRIPT])

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        return {**CLEAN, **self.env, **extra}

    def __call__(
        self, *args: str, input: str | None = None, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.argv, *args],
            env=self._env(extra),
            cwd=self.cwd,
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def json(self, *args: str) -> Any:
        done = self(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """The command with pipes, for a test that acts while it waits for an answer."""
        return subprocess.Popen(
            [*self.argv, *args],
            env=self._env({}),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def store(self) -> Any:
        return ds.store_from_env(self.env)


class Unreachable:
    """A real file store that fails like a backend whose connection is lost: its saves
    after ``saves`` of them, its listing after ``listed`` runs (None: never)."""

    def __init__(self, path: Path, *, saves: int | None = None, listed: int | None = None) -> None:
        self.store, self.saves, self.listed = ds.FileStore(path), saves, listed

    def __enter__(self) -> Unreachable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return repr(self.store)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def save(self, cp: ds.Checkpoint) -> ds.Checkpoint:
        if self.saves == 0:
            raise ds.StoreError("cannot reach the store", status_code=None)
        if self.saves is not None:
            self.saves -= 1
        return self.store.save(cp)

    def list_runs(self, **filters: Any) -> Iterator[ds.RunInfo]:
        for n, info in enumerate(self.store.list_runs(**filters)):
            if n == self.listed:
                raise ds.StoreError("the connection dropped", status_code=None)
            yield info


def wait_for_prompt(proc: subprocess.Popen[str]) -> str:
    """What the command wrote on stderr up to its question (``[y/N]: ``)."""
    assert proc.stderr is not None
    seen = ""
    while not seen.endswith("[y/N]: "):
        char = proc.stderr.read(1)
        assert char, f"the command ended without asking: {seen}"
        seen += char
    return seen


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
