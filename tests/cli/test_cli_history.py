"""``runs history`` and ``runs fork`` from a shell (issue 33), on a file store."""

from __future__ import annotations

import json
from pathlib import Path

import durable_steps as ds
from durable_steps import Step

from ..helpers.clitools import Cli


def test_runs_history_lists_the_steps_and_runs_fork_makes_a_run(tmp_path: Path) -> None:
    """The history lists each completed step; a fork starts after the step asked, with
    the update; ``runs show`` says where it came from; the source is untouched."""
    path = tmp_path / "store"
    steps = [Step(f"s{i}", lambda s, i=i: {"n": i}) for i in range(3)]
    with ds.FileStore(path) as store:
        ds.run("src", steps, store)
        etag = store.load("src").etag
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)})
    listed = json.loads(cli("runs", "history", "src", "--json").stdout)
    assert [(s["step"], s["name"], s["attempts"]) for s in listed] == [
        (0, "s0", 1), (1, "s1", 1), (2, "s2", 1)
    ]  # fmt: skip
    assert "s1" in cli("runs", "history", "src").stdout
    made = cli("runs", "fork", "src", "new", "--at-step", "1", "--update", '{"x": 1}', "--json")
    assert json.loads(made.stdout)["forked_from"]["step"] == 1
    assert "src after step 1" in cli("runs", "show", "new").stdout
    refused = cli("runs", "fork", "src", "other", "--at-step", "9")
    assert refused.returncode != 0 and "kept steps are 0 to 2" in refused.stderr
    with ds.FileStore(path) as store:
        assert store.load("src").etag == etag and store.load("other") is None
        assert ds.run("new", steps, store) == {"n": 2, "x": 1}


def test_runs_history_shows_each_step_s_calls(tmp_path: Path) -> None:
    """Under a completed step: its calls by name or key, time, result size and the
    attempt; never their results (also not in --json)."""
    path = tmp_path / "store"

    def agent(state: object) -> dict[str, int]:
        ds.call("llm", lambda: "hidden-result-text")
        ds.call("lookup", lambda: [1, 2], key="tool-3")
        return {"n": 1}

    with ds.FileStore(path) as store:
        ds.run("calls", [Step("agent", agent)], store)
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)})
    shown = cli("runs", "history", "calls").stdout
    lines = [line.strip() for line in shown.splitlines()]
    assert lines[1].startswith("llm#0  ") and "20 B" in lines[1] and "attempt 1" in lines[1]
    assert lines[2].startswith("lookup[tool-3]  ") and "5 B" in lines[2]
    raw = cli("runs", "history", "calls", "--json").stdout
    assert [c["name"] for c in json.loads(raw)[0]["calls"]] == ["llm", "lookup"]
    assert "hidden-result-text" not in shown + raw
