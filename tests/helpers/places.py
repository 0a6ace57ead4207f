"""A store configured by environment, and the child processes (``child.py``) that work
on it: what the process tests start, kill and look at."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durable_steps as ds

CHILD = str(Path(__file__).with_name("child.py"))


@dataclass
class Place:
    """A store configured by environment, as a child process would see it."""

    env: dict[str, str]
    effects: Path

    def spawn(self, *args: str, **extra_env: str) -> subprocess.Popen[str]:
        env = {**os.environ, **self.env, "SIDE_EFFECTS": str(self.effects), **extra_env}
        return subprocess.Popen(
            [sys.executable, CHILD, *args],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run(self, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        proc = self.spawn(*args, **extra_env)
        out, err = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def store(self) -> Any:
        return ds.store_from_env(self.env)

    def effects_log(self) -> list[str]:
        return self.effects.read_text().split() if self.effects.exists() else []
