"""The README's examples run as written, so a broken quickstart cannot ship.

Every ```python block runs twice in a fresh directory on the default file store
(the second time it resumes from the first one's checkpoints and must print the
same). A block whose first line is ``# NAME.py`` is also a file that ```console
blocks use: each ``$ command`` line runs there, and the lines under it are the
output it must print.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers.clitools import CLEAN as ENV  # no store configuration; an absolute PYTHONPATH

README = (Path(__file__).parents[2] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
CONSOLES = re.findall(r"```console\n(.*?)```", README, re.DOTALL)
FILES = {m[1]: block for block in BLOCKS if (m := re.match(r"# (\w+\.py)\n", block))}


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=60, check=False
    )


def test_readme_has_examples_and_the_two_commands() -> None:
    """The README opens with the demo and test commands and holds the quickstarts."""
    head = README[: README.index("## Quickstart")]
    assert "scripts/demo" in head and "scripts/test" in head
    assert len(BLOCKS) >= 2 and CONSOLES


@pytest.mark.parametrize("code", BLOCKS, ids=lambda c: c.splitlines()[0][:40])
def test_readme_example_runs_and_resumes(code: str, tmp_path: Path) -> None:
    """Each example runs in a fresh directory on the default file store, and again from
    its checkpoints with the same output (one that needs a cloud service is compiled)."""
    if code.startswith("# not run here:"):
        compile(code, "README.md", "exec")
        return
    outputs = []
    for _ in range(2):
        done = _run([sys.executable, "-c", code], tmp_path)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].strip()
    if "KB-112" in code:
        assert outputs[0] == "See KB-112: reset a password\n"
    assert (tmp_path / ".durable" / "runs").is_dir()


@pytest.mark.parametrize("session", CONSOLES, ids=lambda c: c.splitlines()[0][:40])
def test_readme_console_session_runs_as_shown(session: str, tmp_path: Path) -> None:
    """Each console session runs command by command and prints what the README shows."""
    for name, code in FILES.items():
        (tmp_path / name).write_text(code)
    commands = re.findall(r"^\$ (.*)\n((?:(?!\$ ).*\n)*)", session, re.M)
    assert commands, "no `$ command` line in the session"
    for command, expected in commands:
        argv = shlex.split(command)
        if argv[0] == "python":
            argv[0] = sys.executable
        elif argv[0] == "durable-steps":
            argv[0] = str(Path(sys.executable).with_name("durable-steps"))
        done = _run(argv, tmp_path)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert done.stdout.strip() == expected.strip() or not expected.strip(), command
