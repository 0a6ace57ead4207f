"""``durable-steps demo``: the story on the terminal of a run killed mid-step and
resumed (the workflow and its child processes are in ``demo_run``).

Its last line is a command that inspects the run and works where the demo was
started: ``durable-steps`` when that is on PATH, else this environment's console
script (``.venv/bin/durable-steps`` from a clone after ``scripts/demo``), else
``python -m durable_steps`` with the interpreter that runs the demo.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..seam.errors import DurableError
from ..stores.config import describe, store_from_env
from . import demo_run
from .common import Part, out, say


@click.command()
@click.option(
    "--crash-at",
    type=click.Choice(demo_run.STEPS),
    default="agent",
    show_default=True,
    help="The step during which the first attempt is killed (SIGKILL); in agent, while "
    "its fourth model or tool call runs.",
)
@click.option("--no-crash", is_flag=True, help="Run straight through, no kill.")
@click.option(
    "--step-seconds",
    type=click.FloatRange(0, 10),
    default=0.8,
    show_default=True,
    help="How long each step works (each of the agent's calls takes 0.6x).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Where the file store keeps checkpoints (default: a fresh temp directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON lines.")
def demo(
    crash_at: str, no_crash: bool, step_seconds: float, directory: str | None, as_json: bool
) -> None:
    """Run an agent-style workflow, kill it mid-step, and resume it.

    Attempt 1 runs retrieve -> agent -> write in a child process; agent is a loop in
    which a model asks for tools until it answers, each model request and tool call
    a durable call. The process is killed (SIGKILL) partway through --crash-at, as
    an OOM kill or a redeploy would: by default in the agent's fourth call. Attempt 2
    starts a fresh process on the same store: checkpointed steps are skipped, the
    agent's recorded calls return their results without being made again, the rest
    runs. With DURABLE_STORE=cosmos it runs against Cosmos DB (an emulator: add
    COSMOS_CREATE_IF_MISSING=true).
    """
    env: dict[str, str] = {}
    config = describe()
    if config["backend"] == "file":
        env = {
            "DURABLE_STORE": "file",
            "DURABLE_FILE_PATH": directory or tempfile.mkdtemp(prefix="durable-steps-demo-"),
        }
        where = f"the file store in {env['DURABLE_FILE_PATH']}"
    elif config["backend"] == "cosmos":
        where = f"Cosmos DB at {config['endpoint']} ({config['database']}/{config['container']})"
    else:
        raise click.UsageError(
            "the demo needs a store that outlives a process: "
            "unset DURABLE_STORE (file) or use DURABLE_STORE=cosmos"
        )
    run_id = f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    show = _printer(as_json)
    if not as_json:
        say(("durable-steps demo", "bold"), ": run ", (run_id, "cyan"), f" on {where}")
        story: list[Part] = ["No crash this time."]
        if not no_crash:
            story = ["The worker process will be ", ("killed (SIGKILL)", "bold red")]
            story += [" during ", (crash_at, "bold"), ", then a new process resumes the run.\n"]
        say(
            "Three steps; after each one a checkpoint is saved, and in the agent step after "
            "each model or tool call. ",
            *story,
        )
    attempts = []
    for n, kill_in in enumerate([None] if no_crash else [crash_at, None], start=1):
        if not as_json:
            # (a rule spans the console: outside a terminal that is 10,000 columns)
            out.print(Rule(f"attempt {n} (new process)"), width=min(out.width, 100))
        a = demo_run.attempt(run_id, step_seconds, env, kill_in, show)
        attempts.append(a)
        if a.killed:
            _after_kill(a, run_id, env, show if as_json else None)
        elif a.returncode != 0:
            raise DurableError(f"the demo worker failed (exit {a.returncode}); rerun with --debug")
    if not as_json:
        _summary(attempts)
        say("\nInspect the checkpoint: ", (inspect_command(run_id, env), "bold"))


def this_program() -> str:
    """How the user's shell runs this program again, from the current directory."""
    exe = Path(sys.executable)
    script = exe.with_name("durable-steps.exe" if os.name == "nt" else "durable-steps")
    found = shutil.which("durable-steps")
    if found and script.exists() and Path(found).resolve() == script.resolve():
        return "durable-steps"
    if script.exists():
        return _quote(_relative(script))
    return f"{_quote(_relative(exe))} -m durable_steps"


def inspect_command(run_id: str, env: dict[str, str]) -> str:
    command = f"{this_program()} runs show {run_id}"
    if "DURABLE_FILE_PATH" not in env:
        return command
    path = env["DURABLE_FILE_PATH"]
    if os.name == "nt":  # PowerShell, the shell of a Windows terminal
        return f'$env:DURABLE_FILE_PATH="{path}"; {command}'
    return f"DURABLE_FILE_PATH={shlex.quote(path)} {command}"


def _relative(path: Path) -> str:
    """``path`` relative to the current directory when it is inside it, else absolute."""
    try:
        inside = path.absolute().relative_to(Path.cwd())
    except ValueError:
        return str(path.absolute())
    return str(inside) if len(inside.parts) > 1 else os.path.join(".", inside)


def _quote(path: str) -> str:
    if os.name == "nt":
        return f'& "{path}"' if " " in path else path
    return shlex.quote(path)


def _printer(as_json: bool) -> Any:
    replays: list[dict[str, Any]] = []  # shown under the agent's start line, when it comes

    def show(event: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps(event))
            return
        step = event.get("step", "")
        if event["event"] == "replay":
            replays.append(event)
            return
        if event["event"] == "skip":
            say(
                (
                    f"  ↷ {step:<10} skipped: checkpointed by an earlier attempt "
                    f"(saves {event['seconds']:.1f}s)",
                    "dim",
                )
            )
        elif event["event"] == "start":
            again = f", attempt {event['attempt']}" if event["attempt"] > 1 else ""
            say(f"  ▶ {step:<10} {demo_run.WHAT[step]}{again} ...")
            for r in replays:
                say(
                    (
                        f"      ↷ call {r['index']} {r['name']:<7} replayed: recorded by an "
                        "earlier attempt, not made again",
                        "dim",
                    )
                )
            replays.clear()
        elif event["event"] == "done":
            say((f"  ✓ {step:<10} done in {event['seconds']:.1f}s, checkpoint saved", "green"))
        elif event["event"] == "call":
            say(f"      · call {event['index']} {event['name']:<7} {event['what']} ...")
        elif event["event"] == "finished":
            say(("  run complete", "bold green"), f": {event['answer']}")

    return show


def _after_kill(a: demo_run.Attempt, run_id: str, env: dict[str, str], emit: Any) -> None:
    with store_from_env(env) if env else store_from_env() as store:
        cp = store.load(run_id)
    saved = list(cp.steps) if cp else []
    calls = [f"{r['i']} {r['name']}" for r in cp.calls if "result" in r] if cp else []
    if emit:
        emit({"event": "killed", "step": a.killed, "checkpointed": saved, "calls": calls})
        return
    lost = "the call in flight was not recorded" if calls else "nothing of this step was saved"
    say(
        (f"  ✗ {a.killed:<10} worker killed with SIGKILL mid-step (exit {a.returncode})", "red"),
        f": {lost}",
    )
    recorded = f" and {len(calls)} recorded call(s) of it ({', '.join(calls)})" if calls else ""
    say(
        f"  on the store now: {len(saved)} completed step(s) {saved}{recorded}; the next "
        "attempt starts at ",
        (str(a.killed), "bold"),
    )


def _summary(attempts: list[demo_run.Attempt]) -> None:
    table = Table(title="what each attempt did", title_justify="left")
    table.add_column("step")
    for n in range(len(attempts)):
        table.add_column(f"attempt {n + 1}")
    saved = 0.0
    for step in demo_run.STEPS:
        cells = []
        for a in attempts:
            what, secs = a.rows.get(step, ("-", 0.0))
            if what == "skip":
                saved += secs
                cells.append(Text("skipped (checkpointed)", "dim"))
            elif what == "killed":
                cells.append(Text(f"killed at {secs:.1f}s", "red"))
            else:
                cells.append(Text(f"ran {secs:.1f}s" if what == "done" else "-"))
        table.add_row(step, *cells)
    out.print()
    out.print(table)
    if len(attempts) > 1:
        replayed = attempts[-1].calls_replayed
        calls = (
            f" and replayed {replayed} recorded model and tool call(s) instead of making them again"
            if replayed
            else ""
        )
        say(
            f"The resumed attempt skipped {saved:.1f}s of finished work{calls} (and their "
            "API/LLM cost). Only what was in flight ran again: execution is at-least-once, so "
            "give steps and calls idempotent side effects (current_step().idempotency_key "
            "helps)."
        )


@click.command("_demo-worker", hidden=True)
@click.argument("run_id")
@click.option("--step-seconds", type=float, default=0.8)
def demo_worker(run_id: str, step_seconds: float) -> None:
    demo_run.worker(run_id, step_seconds)
