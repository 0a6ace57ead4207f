"""The README's and the docs' examples run as written, and their links resolve, so a
broken quickstart or a dead link cannot ship.

Every ```python block of README.md and docs/*.md runs twice in a fresh directory on
the default file store (the second time it resumes from the first one's checkpoints
and must print the same). A block whose first line is ``# NAME.py`` is a file instead,
which ```console blocks use: each ``$ command`` line runs where those files are (a
leading ``VAR=value`` sets a variable for it), and the lines under it are the output it
must print -- ending with ``[exit N]`` when it must exit with N (else 0).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers.clitools import CLEAN as ENV  # no store configuration; an absolute PYTHONPATH

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXTS = {page: page.read_text() for page in PAGES}
BLOCKS = [b for text in TEXTS.values() for b in re.findall(r"```python\n(.*?)```", text, re.S)]
CONSOLES = [c for text in TEXTS.values() for c in re.findall(r"```console\n(.*?)```", text, re.S)]
FILES = {m[1]: block for block in BLOCKS if (m := re.match(r"# (\w+\.py)\n", block))}
EXAMPLES = [block for block in BLOCKS if not re.match(r"# \w+\.py\n", block)]


def _run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env={**ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_readme_has_examples_and_the_two_commands() -> None:
    """The README opens with the demo and test commands and holds the quickstart, a
    crash-and-resume shown as a console session."""
    head = README[: README.index("## Quickstart")]
    assert "scripts/demo" in head and "scripts/test" in head
    quickstart = README[
        README.index("## Quickstart") : README.index("## ", README.index("## Quickstart") + 3)
    ]
    assert "```console" in quickstart and "CRASH=1" in quickstart
    assert len(EXAMPLES) >= 5 and len(CONSOLES) >= 2 and FILES


@pytest.mark.parametrize("code", EXAMPLES, ids=lambda c: c.splitlines()[0][:40])
def test_example_runs_and_resumes(code: str, tmp_path: Path) -> None:
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
def test_console_session_runs_as_shown(session: str, tmp_path: Path) -> None:
    """Each console session runs command by command and prints what the page shows (and
    exits as it shows)."""
    for name, code in FILES.items():
        (tmp_path / name).write_text(code)
    commands = re.findall(r"^\$ (.*)\n((?:(?!\$ ).*\n)*)", session, re.M)
    assert commands, "no `$ command` line in the session"
    for command, expected in commands:
        words = shlex.split(command)
        env = {}
        while "=" in words[0]:
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if words[0] == "python":
            words[0] = sys.executable
        elif words[0] == "durable-steps":
            words[0] = str(Path(sys.executable).with_name("durable-steps"))
        code, shown = 0, expected
        if exit_line := re.search(r"^\[exit (-?\d+)\]\n?\Z", expected, re.M):
            code, shown = int(exit_line[1]), expected[: exit_line.start()]
        done = _run(words, tmp_path, env)
        assert done.returncode == code, f"{command}: {done.stderr}"
        assert done.stdout.strip() == shown.strip() or not shown.strip(), command


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


LINKS = [
    (page, target)
    for page, text in TEXTS.items()
    for target in re.findall(r"\]\(([^)\s]+)\)", text)
    if not re.match(r"[a-z]+:", target)
]


@pytest.mark.parametrize(("page", "target"), LINKS, ids=[f"{p.name}->{t}" for p, t in LINKS])
def test_every_link_resolves(page: Path, target: str) -> None:
    """A link to a page or file of the repository names one that exists, and an
    anchor names a heading there."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    assert file.exists(), f"{page.name}: {target} names no file"
    assert ROOT in file.parents or file == ROOT, f"{page.name}: {target} leaves the repo"
    if anchor:
        assert file.suffix == ".md", f"{page.name}: {target}: an anchor in a non-page"
        assert anchor in anchors(file.read_text()), f"{page.name}: {target}: no such heading"


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name
    assert os.path.exists(ROOT / "docs" / "README.md")
