"""The demo: an agent-style run killed mid-step, then resumed from its checkpoints.

The workflow: ``retrieve`` (search the knowledge base), ``agent`` (a loop in which a
model asks for tools until it answers: each model request and tool call is a durable
``call``), ``write`` (post the answer). The parent (``durable-steps demo``) starts it
in a child process (``durable-steps _demo-worker``), kills that process partway
(``Popen.kill``: SIGKILL on POSIX, TerminateProcess on Windows) -- in the agent step
while its fourth call runs, unless told otherwise -- then starts a new child that
resumes: finished steps are skipped, the agent's recorded calls return their
results without being made again, and only the rest runs. Children report what they
do as JSON lines on stdout; the parent turns those into the story on the terminal.
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
from ..runner.journal import call
from ..runner.step import Step, current_step
from ..stores.config import store_from_env

STEPS = ("retrieve", "agent", "write")
WHAT = {
    "retrieve": "search the knowledge base for the ticket",
    "agent": "the model works the ticket, calling tools",
    "write": "post the answer to the ticket",
}
SCRIPT = (  # what the model asks for, round by round, then its answer
    ("llm", "ask the model"),
    ("crm", "look the customer up in the CRM"),
    ("llm", "ask the model again"),
    ("orders", "fetch the customer's last order"),
    ("llm", "ask the model for the answer"),
)
KILL_AT_CALL = 3
"""The agent is killed while this call (0-based) runs: three calls are recorded."""


def _emit(event: str, **data: Any) -> None:
    print(json.dumps({"event": event, **data}), flush=True)


def _work(name: str, seconds: float, result: Callable[[Mapping[str, Any]], Any]) -> Step:
    def fn(state: Mapping[str, Any]) -> dict[str, Any]:
        ctx = current_step()
        _emit("start", step=name, attempt=ctx.attempt, key=ctx.idempotency_key)
        t0 = time.monotonic()
        time.sleep(seconds)  # the search index, the API: a visible moment
        took = time.monotonic() - t0
        _emit("done", step=name, seconds=took)
        return {name: result(state), f"seconds_{name}": took}

    return Step(name, fn)


def _agent(seconds: float) -> Step:
    """The model loop: each model request and tool call through ``call``."""

    def tool(kind: str, what: str, messages: list[Any]) -> dict[str, Any]:
        index, _ = current_step().call or (-1, "")
        _emit("call", step="agent", index=index, name=kind, what=what)
        time.sleep(seconds)  # the model thinking, the tool's round trip
        if kind != "llm":
            return {"role": "tool", "name": kind, "content": f"{kind} says: ok"}
        if index == len(SCRIPT) - 1:
            return {"role": "assistant", "content": "ACME cannot log in: reset their 2FA device"}
        return {"role": "assistant", "tool": SCRIPT[index + 1][0]}

    def fn(state: Mapping[str, Any]) -> dict[str, Any]:
        ctx = current_step()
        _emit("start", step="agent", attempt=ctx.attempt, key=ctx.idempotency_key)
        t0 = time.monotonic()
        messages: list[Any] = [{"role": "user", "content": state["retrieve"][0]}]
        for kind, what in SCRIPT:
            messages.append(call(kind, tool, kind, what, messages))
        took = time.monotonic() - t0
        _emit("done", step="agent", seconds=took)
        return {"agent": messages[-1]["content"], "seconds_agent": took}

    return Step("agent", fn)


def workflow(seconds: float) -> list[Step]:
    return [
        _work("retrieve", seconds, lambda s: ["KB-112: reset a password", "KB-87: 2FA devices"]),
        _agent(seconds * 0.6),
        _work("write", seconds, lambda s: f"posted: {s['agent']}"),
    ]


def worker(run_id: str, seconds: float) -> None:
    """One attempt, in its own process: report what is skipped and replayed, then run."""
    with store_from_env() as store:
        cp = store.load(run_id)
        for name in cp.steps if cp else ():
            _emit("skip", step=name, seconds=cp.state.get(f"seconds_{name}", 0.0) if cp else 0)
        for record in cp.calls if cp else ():
            if "result" in record:
                _emit("replay", step="agent", index=record["i"], name=record["name"])
        state = run(run_id, workflow(seconds), store)
        _emit("finished", answer=state["write"])


@dataclass
class Attempt:
    rows: dict[str, tuple[str, float]] = field(default_factory=dict)
    killed: str | None = None
    returncode: int | None = None
    calls_replayed: int = 0


def attempt(
    run_id: str,
    seconds: float,
    env: Mapping[str, str],
    kill_in: str | None,
    on_event: Callable[[dict[str, Any]], None],
) -> Attempt:
    """Run one attempt in a child process; kill it partway through ``kill_in`` (in the
    agent step: while its call ``KILL_AT_CALL`` runs)."""
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
        step, kind = event.get("step", ""), event["event"]
        if kind in ("skip", "done"):
            result.rows[step] = (kind, event["seconds"])
        result.calls_replayed += kind == "replay"
        at_call = kind == "call" and event["index"] == KILL_AT_CALL
        if step == kill_in and ((kind == "start" and step != "agent") or at_call):
            time.sleep(seconds * 0.3)
            proc.kill()  # SIGKILL on POSIX; signal.SIGKILL does not exist on Windows
            result.killed = step
            result.rows[step] = ("killed", seconds * 0.3)
    result.returncode = proc.wait()
    return result


def _events(proc: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            if line.startswith("{"):
                yield json.loads(line)
