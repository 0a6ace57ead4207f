"""The durable-steps command line: the demo, and an operator's view of the runs."""

from __future__ import annotations

import json
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.json import JSON
from rich.markup import escape
from rich.table import Table

from . import _demo
from ._config import describe, store_for, store_from_env
from ._errors import ConflictError, CorruptCheckpointError, DurableError
from ._store import Checkpoint, RunInfo, check_run_id

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
_options = {"debug": False}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _size(n: int) -> str:
    return (
        f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"
    )


def _status(info: RunInfo) -> str:
    return "unreadable" if info.error else "completed" if info.done else "in progress"


def _age(text: str) -> float:
    match = _DURATION.match(text.strip())
    if not match:
        raise click.BadParameter(
            f"{text!r} is not an age; use a number and a unit: 30m, 12h, 7d, 2w"
        )
    return float(match[1]) * _UNIT[match[2]]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.version_option(package_name="durable-steps", prog_name="durable-steps")
def cli(debug: bool) -> None:
    """Durable execution for multi-step Python work: checkpoint after every step,
    resume where a crashed run stopped.

    The store comes from the environment: DURABLE_STORE=file|cosmos|memory
    (default file, in DURABLE_FILE_PATH or .durable), COSMOS_ENDPOINT, COSMOS_KEY
    (absent: Entra ID), COSMOS_DATABASE, COSMOS_CONTAINER, COSMOS_VERIFY_TLS.
    """
    _options["debug"] = debug


# -- demo -------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--crash-at",
    type=click.Choice(_demo.STEPS),
    default="summarise",
    show_default=True,
    help="The step during which the first attempt is killed (SIGKILL).",
)
@click.option("--no-crash", is_flag=True, help="Run straight through, no kill.")
@click.option(
    "--step-seconds",
    type=click.FloatRange(0, 10),
    default=0.8,
    show_default=True,
    help="How long each step works (summarise takes 1.5x).",
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

    Attempt 1 runs retrieve -> call_tool -> summarise -> write in a child process
    and kills that process with SIGKILL partway through --crash-at (as an OOM
    kill or a redeploy would). Attempt 2 starts a fresh process on the same
    store: checkpointed steps are skipped, the rest run.
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
    show = _demo_printer(as_json)
    if not as_json:
        out.print(f"[bold]durable-steps demo[/]: run [cyan]{run_id}[/] on {where}")
        out.print(
            "Four steps; after each one a checkpoint is saved. "
            + (
                "No crash this time."
                if no_crash
                else f"The worker process will be [bold red]killed (SIGKILL)[/] during "
                f"[bold]{crash_at}[/], then a new process resumes the same run.\n"
            )
        )
    attempts = []
    for n, kill_in in enumerate([None] if no_crash else [crash_at, None], start=1):
        if not as_json:
            out.rule(f"attempt {n} (new process)")
        a = _demo.attempt(run_id, step_seconds, env, kill_in, show)
        attempts.append(a)
        if a.killed:
            _demo_after_kill(a, run_id, env, show if as_json else None)
        elif a.returncode != 0:
            raise DurableError(f"the demo worker failed (exit {a.returncode}); rerun with --debug")
    if not as_json:
        _demo_summary(attempts)
        prefix = f"DURABLE_FILE_PATH={env['DURABLE_FILE_PATH']} " if env else ""
        out.print(f"\nInspect the checkpoint: [bold]{prefix}durable-steps runs show {run_id}[/]")


def _demo_printer(as_json: bool) -> Any:
    def show(event: dict[str, Any]) -> None:
        if as_json:
            print(json.dumps(event), flush=True)
            return
        step = event.get("step", "")
        if event["event"] == "skip":
            out.print(
                f"  [dim]↷ {step:<10} skipped: checkpointed by an earlier attempt "
                f"(saves {event['seconds']:.1f}s)[/]"
            )
        elif event["event"] == "start":
            note = f", attempt {event['attempt']}" if event["attempt"] > 1 else ""
            out.print(f"  ▶ {step:<10} {_demo.WHAT[step]}{note} ...")
        elif event["event"] == "done":
            out.print(f"  [green]✓ {step:<10} done in {event['seconds']:.1f}s, checkpoint saved[/]")
        elif event["event"] == "finished":
            out.print(f"  [bold green]run complete[/]: {event['answer']}")

    return show


def _demo_after_kill(a: _demo.Attempt, run_id: str, env: dict[str, str], emit: Any) -> None:
    store = store_from_env(env) if env else store_from_env()
    try:
        cp = store.load(run_id)
    finally:
        store.close()
    saved = list(cp.steps) if cp else []
    if emit:
        emit({"event": "killed", "step": a.killed, "checkpointed": saved})
        return
    out.print(
        f"  [bold red]✗ {a.killed:<10} worker killed with SIGKILL mid-step "
        f"(exit {a.returncode})[/]: nothing of this step was saved"
    )
    out.print(
        f"  on the store now: {len(saved)} completed step(s) {saved}, "
        f"the next attempt starts at [bold]{a.killed}[/]"
    )


def _demo_summary(attempts: list[_demo.Attempt]) -> None:
    table = Table(title="what each attempt did", title_justify="left")
    table.add_column("step")
    for n in range(len(attempts)):
        table.add_column(f"attempt {n + 1}")
    saved = 0.0
    for step in _demo.STEPS:
        cells = []
        for a in attempts:
            what, secs = a.rows.get(step, ("-", 0.0))
            if what == "skip":
                saved += secs
                cells.append("[dim]skipped (checkpointed)[/]")
            else:
                cells.append(
                    {"done": f"ran {secs:.1f}s", "killed": f"[red]killed at {secs:.1f}s[/]"}.get(
                        what, "-"
                    )
                )
        table.add_row(step, *cells)
    out.print()
    out.print(table)
    if len(attempts) > 1:
        out.print(
            f"The resumed attempt skipped {saved:.1f}s of finished work (and its API/LLM "
            "cost). Only the killed step ran again: execution is at-least-once, so give "
            "steps idempotent side effects (current_step().idempotency_key helps)."
        )


@cli.command("_demo-worker", hidden=True)
@click.argument("run_id")
@click.option("--step-seconds", type=float, default=0.8)
def demo_worker(run_id: str, step_seconds: float) -> None:
    _demo.worker(run_id, step_seconds)


# -- runs -------------------------------------------------------------------------------


@cli.group()
def runs() -> None:
    """Inspect, delete and expire the runs in the configured store."""


def _info_dict(info: RunInfo) -> dict[str, Any]:
    return {**asdict(info), "status": _status(info)}


@runs.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, for scripts.")
def runs_list(as_json: bool) -> None:
    """List runs: last completed step, status, size, last update."""
    store = store_for("env")
    try:
        infos = list(store.list_runs())
    finally:
        store.close()
    if as_json:
        print(json.dumps([_info_dict(i) for i in infos], indent=2))
        return
    if not infos:
        out.print(f"no runs in {store!r}")
        return
    table = Table(title=f"{len(infos)} run(s) in {store!r}", title_justify="left")
    table.add_column("run id", overflow="fold")
    for col in ("last step", "status", "size", "updated"):
        table.add_column(col, justify="right" if col == "size" else "left", no_wrap=True)
    for i in infos:
        step = f"{i.step} {i.step_name}" if i.step_name else "- (none yet)"
        status = f"[red]unreadable[/]: {i.error}" if i.error else _status(i)
        table.add_row(i.run_id, step, status, _size(i.size), _when(i.updated_at))
    out.print(table)


def _load(store: Any, run_id: str) -> Checkpoint:
    cp = store.load(check_run_id(run_id))
    if cp is None:
        raise DurableError(
            f"run {run_id!r} has no checkpoint in {store!r}; "
            "'durable-steps runs list' shows the runs there"
        )
    return cp  # type: ignore[no-any-return]


@runs.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="The raw checkpoint as JSON.")
def runs_show(run_id: str, as_json: bool) -> None:
    """Show one run's checkpoint: completed steps, state, etag."""
    store = store_for("env")
    try:
        cp = _load(store, run_id)
    finally:
        store.close()
    if as_json:
        print(json.dumps({**asdict(cp), "steps": list(cp.steps)}, indent=2, ensure_ascii=False))
        return
    out.print(
        f"[bold]run[/] {cp.run_id}   [bold]status[/] "
        f"{'completed' if cp.done else 'in progress'}   [bold]etag[/] {cp.etag}   "
        f"[bold]updated[/] {_when(cp.updated_at)}"
    )
    for i, name in enumerate(cp.steps):
        out.print(f"  [green]✓[/] {i} {name}")
    if not cp.done:
        out.print(f"  next: step {cp.step + 1}, attempt {cp.attempt}")
    out.print(JSON(json.dumps(cp.state, ensure_ascii=False)))


@runs.command("delete")
@click.argument("run_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def runs_delete(run_id: str, yes: bool) -> None:
    """Delete one run's checkpoint (the run then starts over if run again)."""
    store = store_for("env")
    try:
        try:
            what = f"{len(_load(store, run_id).steps)} completed steps"
        except CorruptCheckpointError:
            what = "its checkpoint is unreadable"  # deleting it is how to start over
        if not yes:
            click.confirm(f"delete run {run_id!r} ({what}) from {store!r}?", abort=True, err=True)
        store.delete(run_id)
    finally:
        store.close()
    err.print(f"deleted run {run_id!r}")


@runs.command("prune")
@click.option(
    "--older-than",
    "age",
    required=True,
    metavar="AGE",
    help="Delete runs last updated more than AGE ago: 30m, 12h, 7d, 2w.",
)
@click.option(
    "--all",
    "include_unfinished",
    is_flag=True,
    help="Also delete runs that never completed (default: completed runs only).",
)
@click.option("--dry-run", is_flag=True, help="Only list what would be deleted.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the affected run ids as JSON.")
def runs_prune(age: str, include_unfinished: bool, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Retention: delete runs whose checkpoint is older than an age."""
    cutoff = time.time() - _age(age)
    store = store_for("env")
    try:
        old = [
            i
            for i in store.list_runs()
            if not i.error and (i.updated_at or 0) < cutoff and (i.done or include_unfinished)
        ]
        if old and not dry_run and not yes:
            click.confirm(
                f"delete {len(old)} run(s) last updated before {_when(cutoff)}?",
                abort=True,
                err=True,
            )
        deleted = (
            []
            if dry_run
            else [i.run_id for i in _progress(old, "deleting") if store.delete(i.run_id)]
        )
    finally:
        store.close()
    if as_json:
        print(json.dumps({"matched": [i.run_id for i in old], "deleted": deleted}))
    else:
        verb = "would delete" if dry_run else "deleted"
        err.print(f"{verb} {len(old) if dry_run else len(deleted)} run(s) older than {age}")


def _progress(items: list[RunInfo], what: str) -> Iterator[RunInfo]:
    if len(items) < 20 or not err.is_terminal:
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=what, console=err, transient=True)


# -- doctor -----------------------------------------------------------------------------


@cli.command()
def doctor() -> None:
    """Check the configured store: configuration, reachability, write, read back, delete."""
    ok = True

    def check(label: str, fn: Any) -> Any:
        nonlocal ok
        try:
            value = fn()
        except Exception as exc:
            ok = False
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            out.print(f"[red]✗[/] {label}: {first}")
            return None
        out.print(f"[green]✓[/] {label}" + (f": {value}" if isinstance(value, str) else ""))
        return value if value is not None else True

    config = check("configuration", lambda: ", ".join(f"{k}={v}" for k, v in describe().items()))
    store = check("open the store", lambda: store_for("env")) if config else None
    if store is not None:
        probe = f"durable-steps-doctor-{uuid.uuid4().hex}"
        saved = check(
            "write a probe checkpoint",
            lambda: store.save(Checkpoint(probe, 0, {"probe": True}, steps=("probe",))) and None,
        )
        if saved:
            check("read it back", lambda: _probe_matches(store.load(probe)))
            check("delete it", lambda: _probe_deleted(store.delete(probe)))
        store.close()
    if not ok:
        raise SystemExit(1)
    out.print("[bold green]the store is ready[/]")


def _probe_matches(cp: Checkpoint | None) -> None:
    if cp is None or cp.state != {"probe": True}:
        _fail(f"read back {cp!r}")


def _probe_deleted(deleted: bool) -> None:
    if not deleted:
        _fail("it was already gone")


def _fail(message: str) -> None:
    raise DurableError(message)


# -- migrate ----------------------------------------------------------------------------


@cli.command()
@click.option(
    "--to",
    "target",
    required=True,
    metavar="STORE",
    help="Where to copy: file:PATH, cosmos (COSMOS_* variables) or env.",
)
@click.option(
    "--from",
    "source",
    default="env",
    show_default=True,
    metavar="STORE",
    help="Where to copy from: env (the configured store), file:PATH or cosmos.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def migrate(target: str, source: str, as_json: bool) -> None:
    """Copy every run to another store, checkpoints intact (steps, state, attempt, age).

    A run that already exists in the target is left alone and reported; nothing
    is overwritten. Example, laptop files to Cosmos DB:

    \b
      COSMOS_ENDPOINT=https://ACCOUNT.documents.azure.com:443/ \\
        durable-steps migrate --from file:.durable --to cosmos
    """
    src, dst = store_for(source), None
    result: dict[str, list[str]] = {
        "copied": [],
        "identical": [],
        "conflicts": [],
        "unreadable": [],
    }
    try:
        dst = store_for(target)
        infos = list(src.list_runs())
        for info in _progress(infos, "copying"):
            if info.error:
                result["unreadable"].append(info.run_id)
                continue
            cp = src.load(info.run_id)
            if cp is None:
                continue  # deleted while we copied
            try:
                dst.save(replace(cp, etag=None))
                result["copied"].append(cp.run_id)
            except ConflictError:
                there = dst.load(cp.run_id)
                same = there is not None and (there.state, there.steps) == (cp.state, cp.steps)
                result["identical" if same else "conflicts"].append(cp.run_id)
    finally:
        src.close()
        if dst is not None:
            dst.close()
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        err.print(
            f"copied {len(result['copied'])} run(s) from {src!r} to {dst!r}; "
            f"{len(result['identical'])} already there"
        )
        for key in ("conflicts", "unreadable"):
            if result[key]:
                err.print(
                    f"[red]{len(result[key])} {key}[/] (left alone): " + ", ".join(result[key][:10])
                )
    if result["conflicts"] or result["unreadable"]:
        raise SystemExit(1)


# -- worker -----------------------------------------------------------------------------


@cli.command()
@click.argument("target", metavar="MODULE:ATTR")
@click.option("--once", is_flag=True, help="One pass over the runs to recover, then exit.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1000),
    default=4,
    show_default=True,
    help="Runs resumed at the same time (each in its own thread).",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.1),
    default=5.0,
    show_default=True,
    help="Seconds between looks for runs to recover.",
)
@click.option(
    "--lease",
    type=click.FloatRange(1),
    default=60.0,
    show_default=True,
    help="Seconds a run stays leased to this worker without a save or a heartbeat.",
)
@click.option("--owner", help="A stable id for this worker (default: unique per run).")
def worker(
    target: str, *, once: bool, concurrency: int, interval: float, lease: float, owner: str | None
) -> None:
    """Resume the unfinished runs of MODULE:ATTR (a Workflow or a list of them) whose
    worker died, in a loop, until SIGTERM or SIGINT.

    Each pass lists the running runs of those workflows whose lease is free, resumes
    them (at most --concurrency at a time) and prints a line per run. On SIGTERM or
    SIGINT no new run starts; running runs stop at their next step boundary and
    release their leases; then it exits 0. Runs waiting for a signal or failed are
    left alone. Example:

    \b
      durable-steps worker myapp.flows:WORKFLOWS --concurrency 8
    """
    from ._worker import load_workflows, on_signals, serve

    workflows = load_workflows(target)
    stop = threading.Event()
    on_signals(stop, lambda line: err.print(escape(line)))
    store = store_for("env")
    names = ", ".join(w.name for w in workflows)
    err.print(
        escape(f"worker: recovering runs of {names} in {store!r}" + (" (once)" if once else ""))
    )
    try:
        serve(
            store,
            workflows,
            once=once,
            concurrency=concurrency,
            interval=interval,
            lease=lease,
            owner=owner,
            echo=_worker_line,
            stop=stop,
        )
    finally:
        store.close()


def _worker_line(what: Any) -> None:
    if isinstance(what, str):
        out.print(escape(what), soft_wrap=True)
        return
    line = f"run {what.run_id} ({what.workflow}): {what.outcome}"
    if what.error is not None:
        first = str(what.error).splitlines()[0] if str(what.error) else ""
        line += f": {type(what.error).__name__}: {first}"
    out.print(escape(line), soft_wrap=True)


# -- entry point ------------------------------------------------------------------------


def main() -> None:
    try:
        rc = cli.main(prog_name="durable-steps", standalone_mode=False)
    except click.exceptions.Abort:
        err.print("aborted")
        rc = 1
    except click.ClickException as exc:
        exc.show()
        rc = exc.exit_code
    except (DurableError, OSError) as exc:
        if _options["debug"]:
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        err.print(f"[red]error:[/] {first}", soft_wrap=True)
        rc = 1
    sys.exit(rc if isinstance(rc, int) else 0)
