"""The demo: an agent-style run killed mid-step, then resumed from its checkpoints.

The parent (``durable-steps demo``) starts the workflow in a child process
(``durable-steps _demo-worker``), kills it partway through one step
(``Popen.kill``: SIGKILL on POSIX, TerminateProcess on Windows), then
starts a new child that resumes. Children report what they do as JSON lines on
stdout; the parent turns those into the story on the terminal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..runner.drivers import run
from ..runner.step import Step, current_step
from ..stores.config import store_from_env

STEPS = ("retrieve", "call_tool", "summarise", "write")
WHAT = {
    "retrieve": "search the knowledge base for the ticket",
    "call_tool": "look the customer up in the CRM",
    "summarise": "ask the LLM for a summary (the expensive step)",
    "write": "post the answer to the ticket",
}


def _emit(event: str, **data: Any) -> None:
    print(json.dumps({"event": event, **data}), flush=True)


def _work(name: str, seconds: float, result: Callable[[Mapping[str, Any]], Any]) -> Step:
    def fn(state: Mapping[str, Any]) -> dict[str, Any]:
        ctx = current_step()
        _emit("start", step=name, attempt=ctx.attempt, key=ctx.idempotency_key)
        t0 = time.monotonic()
        time.sleep(seconds)  # the model, the search index, the API: a visible moment
        took = time.monotonic() - t0
        _emit("done", step=name, seconds=took)
        return {name: result(state), f"seconds_{name}": took}

    return Step(name, fn)


def workflow(seconds: float) -> list[Step]:
    return [
        _work("retrieve", seconds, lambda s: ["KB-112: reset a password", "KB-87: 2FA devices"]),
        _work("call_tool", seconds, lambda s: {"customer": "ACME", "plan": "enterprise"}),
        _work(
            "summarise",
            seconds * 1.5,
            lambda s: f"{s['call_tool']['customer']} cannot log in; see {s['retrieve'][0]}",
        ),
        _work("write", seconds, lambda s: f"posted: {s['summarise']}"),
    ]


def worker(run_id: str, seconds: float) -> None:
    """One attempt, in its own process: report what is skipped, then run the rest."""
    with store_from_env() as store:
        cp = store.load(run_id)
        for name in cp.steps if cp else ():
            _emit("skip", step=name, seconds=cp.state.get(f"seconds_{name}", 0.0) if cp else 0)
        state = run(run_id, workflow(seconds), store)
        _emit("finished", answer=state["write"])


@dataclass
class Attempt:
    rows: dict[str, tuple[str, float]] = field(default_factory=dict)
    killed: str | None = None
    returncode: int | None = None


def attempt(
    run_id: str,
    seconds: float,
    env: Mapping[str, str],
    kill_in: str | None,
    on_event: Callable[[dict[str, Any]], None],
) -> Attempt:
    """Run one attempt in a child process; kill it partway through ``kill_in``."""
    cmd = [
        sys.executable,
        "-m",
        "durable_steps",
        "_demo-worker",
        run_id,
        "--step-seconds",
        str(seconds),
    ]
    proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
    result = Attempt()
    for event in _events(proc):
        on_event(event)
        step = event.get("step", "")
        if event["event"] in ("skip", "done"):
            result.rows[step] = (event["event"], event["seconds"])
        if event["event"] == "start" and step == kill_in:
            time.sleep(seconds * 0.6)
            proc.kill()  # SIGKILL on POSIX; signal.SIGKILL does not exist on Windows
            result.killed = step
            result.rows[step] = ("killed", seconds * 0.6)
    result.returncode = proc.wait()
    return result


def _events(proc: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            if line.startswith("{"):
                yield json.loads(line)
