"""``durable-steps demo`` as a real process on the file store and cosmos-local: a run
killed mid-step and resumed, told well, with a last line that works from a clone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..helpers.clitools import CLEAN, Cli


def test_demo_crashes_then_resumes_only_the_rest(cli: Cli, tmp_path: Path) -> None:
    """The demo's first attempt is killed in the agent step while its fourth call runs;
    the second skips retrieve, replays the agent's three recorded calls without making
    them, makes only the fourth and fifth, and runs write."""
    extra = ["--dir", str(tmp_path / "demo")] if cli.env["DURABLE_STORE"] == "file" else []
    done = cli("demo", "--step-seconds", "0.2", "--json", *extra)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [(e["event"], e.get("step"), e.get("index")) for e in events]
    killed = kinds.index(("killed", "agent", None))
    first, second = kinds[:killed], kinds[killed + 1 :]
    assert first == [
        ("start", "retrieve", None),
        ("done", "retrieve", None),
        ("start", "agent", None),
        *(("call", "agent", i) for i in range(4)),
    ]
    assert events[killed]["checkpointed"] == ["retrieve"]
    assert events[killed]["calls"] == ["0 llm", "1 crm", "2 llm"]
    assert second == [
        ("skip", "retrieve", None),
        *(("replay", "agent", i) for i in range(3)),
        ("start", "agent", None),
        ("call", "agent", 3),
        ("call", "agent", 4),
        ("done", "agent", None),
        ("start", "write", None),
        ("done", "write", None),
        ("finished", None, None),
    ]
    retry = [e for e in events if e["event"] == "start" and e["step"] == "agent"]
    assert [e["attempt"] for e in retry] == [1, 2]
    assert retry[0]["key"] == retry[1]["key"]


def test_demo_can_kill_a_plain_step_too(cli: Cli, tmp_path: Path) -> None:
    """--crash-at write: the agent's calls were dropped with its completion; the resumed
    attempt skips retrieve and agent and runs write again."""
    extra = ["--dir", str(tmp_path / "demo")] if cli.env["DURABLE_STORE"] == "file" else []
    done = cli("demo", "--step-seconds", "0.1", "--crash-at", "write", "--json", *extra)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    after = events[[e["event"] for e in events].index("killed") + 1 :]
    assert [(e["event"], e.get("step")) for e in after] == [
        ("skip", "retrieve"),
        ("skip", "agent"),
        ("start", "write"),
        ("done", "write"),
        ("finished", None),
    ]


def test_demo_reads_well_and_its_last_line_works_from_a_clone(tmp_path: Path) -> None:
    """The human output tells the story (the kill, what was skipped, the time saved), and
    its last line is a command that works where scripts/demo ran it: from a clone whose
    .venv/bin is not on PATH."""
    clone = tmp_path / "clone"
    (clone / ".venv").parent.mkdir()
    (clone / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)
    python = clone / ".venv" / "bin" / Path(sys.executable).name
    path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    demo = Cli({"PATH": path}, cwd=clone, argv=[str(python), "-m", "durable_steps"])
    done = demo("demo", "--step-seconds", "0.1", "--crash-at", "write", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for text in (
        "killed (SIGKILL)",
        "skipped: checkpointed",
        "finished work",
        "idempotency_key",
    ):
        assert text in done.stdout, text
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("Inspect the checkpoint: DURABLE_FILE_PATH=")
    command = last.removeprefix("Inspect the checkpoint: ")
    assert " .venv/bin/durable-steps runs show demo-" in command
    shown = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=clone,
        env={**CLEAN, "PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "status    completed" in shown.stdout
    assert Cli({})("demo", "--crash-at", "nope").returncode == 2
