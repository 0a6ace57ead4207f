"""The kill matrix: every integration and mode SIGKILLed before each of its side effects
(and Pydantic AI's streams in the middle of the answer), then resumed by another
process, on the file store and on CosmosStore (cosmos-local). Each case proves, from the
side-effect log its tools and fake models write, that no call the store had recorded
ran again and every other one did, that the output is an uninterrupted run's, and that
the run stream with its reset markers applied is the final text.

The cases are processes forked from one child per backend that imported the frameworks
once (``kill_matrix``): a kill costs a fork, not an interpreter start."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..conftest import Cosmos
from . import kill_matrix as matrix

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX fork and SIGKILL"),
]

ROOT = Path(__file__).parents[2]
PAI_MODES = ("run", "run_stream", "iter")
STREAMED = ("run_stream", "iter")


@dataclass
class Matrix:
    """The child of one backend, and where its runs log their side effects."""

    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[str]

    def batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(items) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the matrix child died: {self.proc.poll()}"
        return json.loads(line)  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=["file", "cosmos-local"])
def child(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Matrix]:
    log = tmp_path_factory.mktemp("effects")
    cosmos: Cosmos | None = None
    if request.param == "file":
        env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(log / "store")}
    else:
        cosmos = request.getfixturevalue("cosmos_local").fresh()
        env = cosmos.env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.kill_matrix"],
        cwd=ROOT,
        env={**os.environ, **env, "SIDE_EFFECTS": str(log)},
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline() or "null") == "ready"
        yield Matrix(env, log, proc)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.stdout is not None:
            proc.stdout.close()
        if cosmos is not None:
            cosmos.drop()


@dataclass
class Kill:
    case: str
    run_id: str
    at: int | None
    when: str = "before"
    kept: Counter[str] = field(default_factory=Counter)
    """The side effects of the calls the store had recorded when it was killed."""
    before: int = 0
    """How many side effects had happened when it was killed."""

    @property
    def where(self) -> str:
        return f"{self.case} killed {'mid-stream' if self.when == 'stream' else f'at {self.at}'}"


def kills_of(case: str, run_id: str) -> list[Kill]:
    """A run of ``case`` killed before each of its side effects (and mid-stream, for a
    streamed Pydantic AI mode)."""
    slug = case.replace(":", "-")
    found = [Kill(case, f"{run_id}-{slug}-{k}", k) for k in range(len(matrix.expected(case)))]
    if case.startswith("pai:") and case.split(":")[1] in STREAMED:
        found.append(Kill(case, f"{run_id}-{slug}-mid", None, "stream"))
    return found


def ran(child: Matrix, run_id: str) -> list[str]:
    log = child.log / f"{run_id}.log"
    return log.read_text().split() if log.exists() else []


def streamed_text(store: ds.Store, run_id: str) -> str:
    """The run stream's text with its reset markers applied: the chunks an interrupted
    attempt wrote, from the marker's ``since``, replaced by what came after it."""
    kept: list[tuple[int, Any]] = []
    for offset, chunk in ds.read_stream(store, run_id, "model", follow=False):
        if isinstance(chunk, ds.StreamReset):
            kept = [(o, c) for o, c in kept if o < chunk.since]
        else:
            kept.append((offset, chunk))
    return "".join(c["text"] for _, c in kept if "text" in c)


def kill_and_resume(child: Matrix, cases: list[str], run_id: str) -> list[str]:
    """Every kill of ``cases``, then every run resumed by other processes: the failures,
    one line each (all of them, so that one look tells which cases fail and how)."""
    kills = [k for case in cases for k in kills_of(case, run_id)]
    first = child.batch(
        [{"case": k.case, "run_id": k.run_id, "at": k.at, "when": k.when} for k in kills]
    )
    failures = []
    with ds.store_from_env(child.env) as store:
        for k, got in zip(kills, first, strict=True):
            if not got["killed"]:
                failures.append(f"{k.where}: not killed ({got['error'] or got['out']})")
                continue
            if k.case.startswith("af:"):
                k.kept = asyncio.run(matrix.af_kept(store, k.run_id))
            else:
                cp = store.load(k.run_id)
                k.kept = matrix.kept(k.case, cp.calls) if cp is not None else Counter()
            k.before = len(ran(child, k.run_id))
        resumed = child.batch([{"case": k.case, "run_id": k.run_id} for k in kills])
        for k, got in zip(kills, resumed, strict=True):
            failures += check(child, store, k, got)
    return failures


def check(child: Matrix, store: ds.Store, k: Kill, got: dict[str, Any]) -> list[str]:
    if got["out"] is None:
        return [f"{k.where}: the resume failed: {(got['error'] or '').strip().splitlines()[-1:]}"]
    lines = ran(child, k.run_id)
    first, again = Counter(lines[: k.before]), Counter(lines[k.before :])
    wrong = []
    if not k.kept <= first:
        wrong.append(f"recorded {dict(k.kept)} but ran {dict(first)}")
    should = Counter(matrix.expected(k.case)) - k.kept
    if again != should:
        twice = dict((again - should) & k.kept)
        wrong.append(
            f"the resume ran {dict(again)}, should have run {dict(should)}"
            + (f" (recorded, ran again: {twice})" if twice else "")
        )
    if got["out"]["output"] != matrix.output(k.case):
        wrong.append(f"output {got['out']['output']!r}")
    if k.case.startswith("pai:") and k.case.split(":")[1] in STREAMED:
        text = streamed_text(store, k.run_id)
        if text != matrix.FINAL:
            wrong.append(f"the stream, resets applied, says {text!r}")
    return [f"{k.where}: {w}" for w in wrong]


@pytest.mark.parametrize("mode", PAI_MODES)
def test_pydantic_ai_killed_at_each_call_and_mid_stream(
    child: Matrix, run_id: str, mode: str
) -> None:
    """Pydantic AI ``run``, ``run_stream`` and ``iter`` with 1, 2 and 3 parallel tools,
    killed before each model request and tool call (and mid-answer when streamed): no
    recorded call ran again, the output is whole, the stream's text is the answer."""
    failures = kill_and_resume(child, [f"pai:{mode}:{n}" for n in (1, 2, 3)], run_id)
    assert not failures, "\n".join(failures)


def test_openai_agents_agent_framework_and_gathered_subagents_killed_at_each_call(
    child: Matrix, run_id: str
) -> None:
    """OpenAI Agents with parallel tool calls, and with a handoff and guardrails; an Agent
    Framework fan-out of three executors; three gathered sub-agents of plain call_async:
    killed before each call (each executor), resumed, no recorded call (no checkpointed
    superstep) ran again and every other one did."""
    cases = ["openai:tools", "openai:handoff", "af:fanout", "gather:3"]
    failures = kill_and_resume(child, cases, run_id)
    assert not failures, "\n".join(failures)
