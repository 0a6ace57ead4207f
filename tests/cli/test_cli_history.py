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
