"""The README's Python examples run as written, so a broken quickstart cannot ship."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def test_readme_has_examples_and_the_two_commands() -> None:
    """The README opens with the demo and test commands and holds the quickstarts."""
    head = README[: README.index("## Quickstart")]
    assert "scripts/demo" in head and "scripts/test" in head
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=lambda c: c.splitlines()[0][:40])
def test_readme_example_runs_and_resumes(code: str, tmp_path: Path) -> None:
    """Each example runs in a fresh directory on the default file store, and again from
    its checkpoint with the same output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DURABLE_", "COSMOS_"))}
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == "See KB-112: reset a password\n"
    assert (tmp_path / ".durable" / "runs").is_dir()
