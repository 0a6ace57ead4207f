"""``durable-steps runs ...``: list, show, signal, delete and expire the runs of the
configured store.

Listing streams. ``runs list`` hands its filters (status, workflow, limit) to the
store, which applies them without reading any run's state, and prints the rows a
page at a time (``PAGE`` rows, the columns sized by the first page): a store of
100,000 runs holds one page in memory, never one table of all of them, and
``--json`` writes its array item by item. An unreadable checkpoint is a row
marked ``unreadable``; its details follow the table.

``runs prune`` asks the store only for what it may delete (completed runs unless
``--all``, last updated before the cutoff) and deletes each run with the etag it
was listed with: a run resumed or saved meanwhile is kept and reported, never
deleted. With ``--yes`` (or ``--dry-run``) it streams; without, it lists first,
asks, then deletes exactly what it listed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from itertools import islice
from typing import Any

import click
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from ._cli_common import Progress, age, note, out, owner, say, size, when
from ._config import store_for
from ._errors import ConflictError, CorruptCheckpointError, RunNotFoundError
from ._signals import send_signal
from ._store import STATUSES, Checkpoint, RunInfo, check_run_id

PAGE = 100
DETAILS = 20
"""Unreadable runs detailed below a table (``--json`` has every one)."""
STYLE = {
    "running": "cyan",
    "waiting": "yellow",
    "failed": "red",
    "completed": "green",
    "unreadable": "bold red",
}
COLUMNS = (  # header, widest a column gets from the first page (longer values fold)
    ("run id", 60),
    ("status", 10),
    ("workflow", 24),
    ("last step", 32),
    ("attempt", 7),
    ("waits for / lease", 48),
    ("size", 10),
    ("updated", 20),
)


@click.group()
def runs() -> None:
    """See, signal, delete and expire the runs in the configured store."""


def status_of(info: RunInfo) -> str:
    if info.error is not None:
        return "unreadable"
    return info.status or ("completed" if info.done else "running")


def _holding(
    status: str, waits: str | None, holder: str | None, expires: float | None, now: float
) -> str:
    """What holds a run up: the signal it waits for, or the worker that leases it."""
    if status == "waiting" and waits:
        return f"signal {waits}"
    if holder is None or expires is None:
        return "-"
    if expires <= now:
        return f"lease expired ({owner(holder)})"
    return f"leased by {owner(holder)} until {when(expires)[11:]}"


def _cells(i: RunInfo, now: float) -> list[Text]:
    status = status_of(i)
    if i.error is not None:
        cells = ["-"] * 4
    else:
        cells = [
            i.workflow or "-",
            f"{i.step} {i.step_name}" if i.step_name else "- (none yet)",
            str(i.attempt),
            _holding(status, i.waiting_for, i.owner, i.lease_expires, now),
        ]
    return [
        Text(i.run_id),
        Text(status, STYLE[status]),
        *(Text(c) for c in cells),
        Text(size(i.size)),
        Text(when(i.updated_at)),
    ]


def _table(infos: Iterator[RunInfo], heading: str) -> tuple[int, list[RunInfo], int]:
    """Print the runs a page at a time; returns how many, and the unreadable ones."""
    now, shown, bad = time.time(), 0, 0
    unreadable: list[RunInfo] = []
    widths: list[int] = []
    while page := list(islice(infos, PAGE)):
        rows = [_cells(i, now) for i in page]
        if not widths:
            say(heading)
            widths = [
                min(cap, max(len(name), *(row[c].cell_len for row in rows)))
                for c, (name, cap) in enumerate(COLUMNS)
            ]
        # Later pages line up with the first, unless the terminal is too narrow for
        # that: then each page fits itself to it.
        fits = sum(widths) + 2 * len(widths) <= out.width
        table = Table(box=None, show_header=not shown, header_style="bold", pad_edge=False)
        for (name, _), width in zip(COLUMNS, widths, strict=True):
            short = name in ("status", "attempt", "size", "updated")
            table.add_column(
                name,
                min_width=width if fits else None,
                no_wrap=short,
                overflow="fold",
                justify="right" if name in ("attempt", "size") else "left",
            )
        for row in rows:
            table.add_row(*row)
        out.print(table)
        shown += len(page)
        for i in page:
            if i.error is not None:
                bad += 1
                if len(unreadable) < DETAILS:
                    unreadable.append(i)
    return shown, unreadable, bad


def _json_array(items: Iterable[dict[str, Any]]) -> None:
    """One JSON array on stdout, written item by item as they come."""
    opening = "["
    for item in items:
        click.echo(f"{opening}\n  {json.dumps(item)}", nl=False)
        opening = ","
    click.echo("[]" if opening == "[" else "\n]")


def _filters(status: str | None, workflow: str | None) -> str:
    parts = [f"status {status}"] * bool(status) + [f"workflow {workflow}"] * bool(workflow)
    return f" with {' and '.join(parts)}" if parts else ""


@runs.command("list")
@click.option("--status", type=click.Choice(STATUSES), help="Only runs with this status.")
@click.option("--workflow", metavar="NAME", help="Only runs of this workflow.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N runs.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of every field, for scripts.")
def runs_list(status: str | None, workflow: str | None, limit: int | None, as_json: bool) -> None:
    """List runs: status, workflow, the signal a waiting run waits for, the worker that
    leases a running one, attempt, last completed step, size and last update.

    The store applies the filters and reads no run's state. Rows print as the store
    yields them, a page of 100 at a time, so a store of any size lists in bounded
    memory (--limit N stops after N). A checkpoint that cannot be read is a row
    marked unreadable, with its details below the table. Examples:

    \b
      durable-steps runs list --status waiting
      durable-steps runs list --workflow refund --limit 20 --json
    """
    with store_for("env") as store:
        infos = store.list_runs(status=status, workflow=workflow, limit=limit)
        if as_json:
            _json_array({**asdict(i), "status": status_of(i)} for i in infos)
            return
        where = f"{store!r}{_filters(status, workflow)}"
        shown, unreadable, bad = _table(iter(infos), f"runs in {where}")
    if not shown:
        say(f"no runs in {where}")
        return
    more = f" (--limit {limit} reached: there may be more)" if shown == limit else ""
    say(f"{shown:,} run(s){more}" + (f"; {bad} unreadable, details below" if bad else ""))
    for i in unreadable:
        say(("unreadable ", "bold red"), i.run_id, ": ", i.error or "")
    if bad > len(unreadable):
        say(f"... and {bad - len(unreadable)} more unreadable ('runs list --json' has them all)")


def load(store: Any, run_id: str) -> Checkpoint:
    cp = store.load(check_run_id(run_id))
    if cp is None:
        raise RunNotFoundError(
            f"run {run_id!r} has no checkpoint in {store!r}; "
            "'durable-steps runs list' shows the runs there",
            run_id=run_id,
        )
    return cp  # type: ignore[no-any-return]


def checkpoint_json(cp: Checkpoint) -> dict[str, Any]:
    return {
        **asdict(cp),
        "steps": list(cp.steps),
        "signals": dict(cp.signals),
        "error": None if cp.error is None else dict(cp.error),
    }


@runs.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="The whole checkpoint as JSON.")
def runs_show(run_id: str, as_json: bool) -> None:
    """Show one run: status, workflow, lease, attempt, completed steps, the signal it
    waits for, the signals delivered, the last error, and its state.

    Example: durable-steps runs show ticket-4711
    """
    with store_for("env") as store:
        cp = load(store, run_id)
    if as_json:
        click.echo(json.dumps(checkpoint_json(cp), indent=2))
        return
    now = time.time()
    status = f"waiting for signal {cp.waiting_for}" if cp.status == "waiting" else cp.status
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    fields = {
        "run": Text(cp.run_id),
        "status": Text(str(status), STYLE[str(cp.status)]),
        "workflow": Text(cp.workflow or "- (a plain run, not a Workflow)"),
        "lease": Text(_lease(cp, now)),
        "updated": Text(when(cp.updated_at)),
        "etag": Text(cp.etag or "-"),
    }
    for key, value in fields.items():
        grid.add_row(key, value)
    out.print(grid)
    say(("completed steps", "bold"))
    for i, name in enumerate(cp.steps):
        say("  ", ("✓", "green"), f" {i} ", name)
    if not cp.done:
        say(f"  next: step {cp.step + 1}, attempt {cp.attempt}")
    if cp.error:
        e = cp.error
        say(("last error", "bold red"))
        say(f"  {e.get('type')}: {e.get('message')}")
        say(f"  in step {e.get('step')}, attempt {e.get('attempt')}, at {when(e.get('at'))}")
    if cp.signals:
        say(("signals delivered", "bold"))
        for name, payload in cp.signals.items():
            text = json.dumps(payload)
            if len(text) > 500:
                text = text[:500] + " ... ('runs show --json' has it whole)"
            say(f"  {name}: {text}")
    say(("state", "bold"))
    out.print(JSON(json.dumps(cp.state)))


def _lease(cp: Checkpoint, now: float) -> str:
    if cp.owner is None or cp.lease_expires is None:
        return "- (no worker holds it)"
    if cp.lease_expires <= now:
        return f"expired at {when(cp.lease_expires)} (was {cp.owner}): a worker may take it over"
    return f"held by {cp.owner} until {when(cp.lease_expires)}"


@runs.command("delete")
@click.argument("run_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def runs_delete(run_id: str, yes: bool) -> None:
    """Delete one run's checkpoint; run again, the run starts over. Asks first unless
    --yes. The run is deleted as it was read: if a worker saved it meanwhile,
    nothing is deleted. An unreadable checkpoint can be deleted too.

    Example: durable-steps runs delete ticket-4711 --yes
    """
    with store_for("env") as store:
        etag: str | None = None
        try:
            cp = load(store, run_id)
            what, etag = f"{cp.status}, {len(cp.steps)} completed step(s)", cp.etag
        except CorruptCheckpointError:
            what = "its checkpoint is unreadable"  # deleting it is how to start over
        if not yes:
            click.confirm(f"delete run {run_id!r} ({what}) from {store!r}?", abort=True, err=True)
        deleted = _delete(store, run_id, etag)
    note(f"deleted run {run_id!r}" if deleted else f"run {run_id!r} was already gone")


def _payload(data: str | None, data_file: str | None) -> Any:
    if data is not None and data_file is not None:
        raise click.UsageError("give the payload once: --data JSON or --data-file PATH")
    if data_file is not None:
        hint = "'--data-file'"
        try:
            if data_file == "-":
                text = sys.stdin.read()
            else:
                with open(data_file, encoding="utf-8") as f:
                    text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {data_file!r}: {exc}", param_hint=hint) from None
    elif data is not None:
        text, hint = data, "'--data'"
    else:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(
            f"not JSON ({exc}); give a JSON value, e.g. '{{\"ok\": true}}' (quoted for the shell)",
            param_hint=hint,
        ) from None


@runs.command("signal")
@click.argument("run_id")
@click.argument("name")
@click.option("--data", metavar="JSON", help="The payload, a JSON value (default: null).")
@click.option(
    "--data-file",
    metavar="PATH",
    help="Read the payload from a JSON file ('-': standard input).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the run's new status as JSON.")
def runs_signal(
    run_id: str, name: str, data: str | None, data_file: str | None, as_json: bool
) -> None:
    """Deliver signal NAME, with an optional JSON payload, to a run whose step waits
    for it (wait_for_signal(NAME)). The run then resumes at its next run, or with
    recover or a worker. A signal is delivered once: a second one of the same name
    is refused. Example:

    \b
      durable-steps runs signal refund-A-7 approval --data '{"ok": true, "by": "ann"}'
    """
    payload = _payload(data, data_file)
    with store_for("env") as store:
        cp = send_signal(store, run_id, name, payload)
    if as_json:
        keys = ("run_id", "status", "waiting_for", "owner", "lease_expires", "etag")
        click.echo(json.dumps({"signal": name, **{k: getattr(cp, k) for k in keys}}))
        return
    say(f"signal {name} delivered to run {run_id}: {_after_signal(cp)}")


def _after_signal(cp: Checkpoint) -> str:
    if cp.status == "waiting":
        return f"it still waits for signal {cp.waiting_for}; this one is kept until asked for"
    if cp.status == "completed":
        return "it had completed; the signal is kept, nothing resumes"
    if cp.status == "failed":
        return "it has failed; the signal is kept for when it is run again"
    if cp.owner is not None and (cp.lease_expires or 0) > time.time():
        return "it is running; its step gets the signal when it asks for it"
    return "it resumes at its next run (or with recover, or a worker)"


@runs.command("prune")
@click.option(
    "--older-than",
    "older",
    required=True,
    metavar="AGE",
    help="Delete runs last updated more than AGE ago: 30m, 12h, 7d, 2w.",
)
@click.option(
    "--all",
    "any_status",
    is_flag=True,
    help="Runs of any status (running, waiting, failed too); default: completed runs only.",
)
@click.option("--dry-run", is_flag=True, help="Only list what would be deleted.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask; delete as the runs are listed.")
@click.option("--json", "as_json", is_flag=True, help="Print the run ids as JSON.")
def runs_prune(older: str, any_status: bool, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Retention: delete the runs last updated more than AGE ago (completed runs only,
    unless --all).

    The store lists only those runs, and each is deleted only if it is unchanged
    since it was listed: a run resumed meanwhile is kept and reported. Without
    --yes the runs are listed first and you are asked. Examples:

    \b
      durable-steps runs prune --older-than 30d --dry-run
      durable-steps runs prune --older-than 7d --yes     # nightly, e.g. from cron
    """
    cutoff = time.time() - age(older)
    which = "run(s)" if any_status else "completed run(s)"
    done: dict[str, list[str]] = {"matched": [], "deleted": [], "kept": [], "gone": []}
    with store_for("env") as store:
        listed: Iterable[RunInfo] = store.list_runs(
            status=None if any_status else "completed", updated_before=cutoff
        )
        if not (yes or dry_run):
            listed = [i for i in listed if i.error is None]  # the operator confirms these
            if listed:
                click.confirm(
                    f"delete {len(listed)} {which} last updated before {when(cutoff)} "
                    f"from {store!r}?",
                    abort=True,
                    err=True,
                )
        with Progress("listing" if dry_run else "deleting") as progress:
            for info in listed:
                if info.error is None:  # (an unreadable run never matches these filters)
                    _prune_one(store, info, dry_run, as_json, done)
                    progress.advance()
    if as_json:
        click.echo(json.dumps({"dry_run": dry_run, **done}, indent=2))
        return
    verb = "would delete" if dry_run else "deleted"
    count = len(done["matched" if dry_run else "deleted"])
    kept = f"; kept {len(done['kept'])} that changed since listed" if done["kept"] else ""
    note(f"{verb} {count} {which} last updated before {when(cutoff)} (older than {older}){kept}")


def _prune_one(
    store: Any, info: RunInfo, dry_run: bool, as_json: bool, done: dict[str, list[str]]
) -> None:
    done["matched"].append(info.run_id)
    if dry_run:
        if not as_json:
            status = status_of(info)
            say(info.run_id, "  ", (status, STYLE[status]), f"  updated {when(info.updated_at)}")
        return
    try:
        gone = not _delete(store, info.run_id, info.etag)
    except ConflictError:
        done["kept"].append(info.run_id)
        note(f"kept run {info.run_id}: it changed since it was listed (resumed or saved)")
        return
    done["gone" if gone else "deleted"].append(info.run_id)


def _delete(store: Any, run_id: str, etag: str | None) -> bool:
    """Delete the run only as it was read (``etag``); ConflictError if it changed since."""
    return bool(store.delete(run_id, etag=etag))
