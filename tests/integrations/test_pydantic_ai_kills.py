"""A streamed Pydantic AI agent whose model asks for several tools at once, in a real
process SIGKILLed at every point of its run -- after each model request, tool call and
streamed token, and after the agent finished but before its step completed -- then
resumed by a fresh process: on the file store and on cosmos-local, for ``run_stream``,
``run_stream_sync`` and ``iter`` with ``node.stream()``, with 1, 2 and 3 parallel tool
calls. From the side effects the tools and the fake model log: no recorded model request
or tool call ran again (``send_email`` once, when it was recorded), the resumed run
never diverged, and the run stream with its ``StreamReset`` markers applied holds each
tool call once and exactly the final text. (The agent: tests/helpers/pai_stream_child.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers import pai_stream_child
from ..runner.test_stream_kills import superseded

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and SIGKILL (POSIX)"),
]

CHILD = pai_stream_child.__file__
FINAL = "".join(pai_stream_child.ANSWER)


def full_run(tools: int) -> list[str]:
    """The side effects of a run that is never killed, in order (the lookups in any)."""
    return [
        "model 1",
        *(f"lookup {c}" for c in "abc"[:tools]),
        "model 3",
        "email ann",
        "model 5",
        *(f"token {j}" for j in range(len(pai_stream_child.ANSWER))),
        "end",
    ]


def child(env: dict[str, str], effects: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, CHILD, *args],
        env={**os.environ, **env, "SIDE_EFFECTS": str(effects)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def kept(calls: Any) -> Counter[str]:
    """The side effects of the calls a checkpoint has recorded: what must not run again
    (a recorded model request includes the tokens it streamed)."""
    out: Counter[str] = Counter()
    for r in calls:
        if "result" not in r:
            continue
        assert "key" in r, f"an unkeyed record: {r['name']}"
        _, _, kind, what = r["key"].split("/")
        if kind == "model":
            out[f"model {what}"] += 1
            if what == "5":
                out.update(f"token {j}" for j in range(len(pai_stream_child.ANSWER)))
        elif r["name"] == "tool.lookup":
            (city,) = [c for c in "abc" if f"{c}: 20C" in json.dumps(r["result"])]
            out[f"lookup {city}"] += 1
        else:
            out["email ann"] += 1
    return out


def wanted(mode: str, tools: int, k: int) -> bool:
    """Where a run of ``mode`` with ``tools`` parallel tools is killed: ``run_stream_sync``
    (which the kill matrix does not drive) after every side effect with two tools, and at
    a lookup, mid-answer and after the agent finished with one and three; ``run_stream``
    and ``iter``, whose kills before each call the kill matrix makes
    (tests/integrations/test_kill_matrix.py), only where it does not kill them: after
    each streamed token and after the agent finished."""
    last = len(full_run(tools)) - 1
    if mode == "run_stream_sync":
        return tools == 2 or k in (1, last - 2, last)
    return tools == 2 and full_run(tools)[k].startswith(("token", "end"))


@pytest.mark.parametrize("mode", ["run_stream", "run_stream_sync", "iter"])
def test_killed_anywhere_no_recorded_call_runs_again_and_the_stream_reads_right(
    env: dict[str, str], tmp_path: Path, run_id: str, mode: str
) -> None:
    runs = {  # (tools, killed after side effect k): the run's id
        (tools, k): f"{run_id}-{tools}-{k}"
        for tools in (1, 2, 3)
        for k in range(len(full_run(tools)))
        if wanted(mode, tools, k)
    }
    child(env, tmp_path, "kill", mode, *(f"{r}:{t}:{k}" for (t, k), r in runs.items()))
    before: dict[str, tuple[Counter[str], int]] = {}
    with ds.store_from_env(env) as store:
        for (tools, k), r in runs.items():
            cp = store.load(r)
            assert cp is not None and cp.status == "running", (tools, k, cp and cp.status)
            lines = (tmp_path / f"{r}.log").read_text().splitlines()
            assert len(lines) == k + 1, f"killed after side effect {k}: {lines}"
            before[r] = (kept(cp.calls), len(lines))
    resumed = child(env, tmp_path, "resume", mode, *(f"{r}:{t}" for (t, _), r in runs.items()))
    outputs = json.loads(resumed)
    with ds.store_from_env(env) as store:
        for (tools, k), r in runs.items():
            want = full_run(tools)
            where = f"{tools} tools, killed after {want[k]!r} ({k})"
            assert outputs[r] == FINAL, where
            recorded, n = before[r]
            lines = (tmp_path / f"{r}.log").read_text().splitlines()
            first, again = Counter(lines[:n]), Counter(lines[n:])
            assert recorded <= first, where
            assert again == Counter(want) - recorded, where
            if k == len(want) - 1:  # after the agent finished: nothing but the step again
                assert again == Counter(["end"]), (where, lines)
            info = store.run_info(r)
            assert info is not None and info.status == "completed", where
            entries = list(ds.read_stream(store, r, "model", follow=False))
            chunks = superseded(entries)  # the reset markers applied
            calls = [c["tool_call"]["id"] for c in chunks if "tool_call" in c]
            assert sorted(calls) == sorted([f"c{j}" for j in range(tools)] + ["e0"]), where
            assert "".join(c.get("text", "") for c in chunks) == FINAL, (where, entries)
