"""The curl examples of docs/console.md ("The JSON API") run as written, with curl,
against a real console whose token is the one the example exports, over a FileStore
holding the runs the examples name: each answers 2xx with JSON and no error."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.console import ConsoleServer

DOC = (Path(__file__).parents[2] / "docs" / "console.md").read_text()
SECTION = DOC[DOC.index("## The JSON API") :]
BLOCK = re.search(r"```bash\n(.*?)```", SECTION, re.S)


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


def _charge(state: Any) -> None:
    raise ValueError("card declined")


def test_the_curl_examples_run_as_written(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.fail("curl is not installed; the docs' API examples need it", pytrace=False)
    assert BLOCK is not None, "docs/console.md has no ```bash block under 'The JSON API'"
    lines = BLOCK[1].strip().splitlines()
    token = re.search(r"TOKEN=(\S+)", lines[0])
    assert token is not None and lines[0].startswith("export ")
    curls = [line for line in lines if line.startswith("curl ")]
    assert len(curls) >= 10
    with ds.FileStore(tmp_path / "s") as store:
        refund = ds.Workflow("refund", [ds.Step("draft", lambda s: {}), ds.Step("ok", _approve)])
        for run_id in ("refund-42", "refund-43", "refund-44"):
            with pytest.raises(ds.RunWaiting):
                refund.run(run_id, store)
        with pytest.raises(ValueError, match="declined"):
            ds.run("charge-7", [ds.Step("charge", _charge)], store)
        with ConsoleServer(store, port=0, token=token[1]) as server:
            env = {"PATH": "/usr/bin:/bin", "TOKEN": token[1], "URL": server.origin}
            answers = []
            for line in curls:
                done = subprocess.run(
                    ["bash", "-c", line + ' -w "\\n%{http_code}"'],
                    env=env, capture_output=True, text=True, timeout=60, check=False,
                )  # fmt: skip
                body, _, code = done.stdout.rpartition("\n")
                assert done.returncode == 0 and code.startswith("2"), (line, done.stdout)
                got = json.loads(body)
                assert not (isinstance(got, dict) and "error" in got), (line, got)
                answers.append(got)
        assert [r["run_id"] for r in answers[0]["runs"]] == ["charge-7"]
        assert store.load("refund-42").signals == {"approval": {"ok": True}}
        assert store.load("charge-7").status == "running"  # resumed
        assert answers[-1]["done"] == 2
        assert {store.load(r).status for r in ("refund-43", "refund-44")} == {"cancelled"}
