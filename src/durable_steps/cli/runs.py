"""``durable-steps runs ...``: the group, and ``runs list`` and ``runs show``, which
read the runs of the configured store (``change`` has the commands that change
them: signal, delete, prune).

Listing streams. ``runs list`` hands its filters (status, workflow, limit) to the
store, which applies them without reading any run's state, and prints the rows a
page at a time (``PAGE`` rows; the columns are sized by the first page, and a
longer value later pushes its line out rather than re-aligning what was printed):
a store of 100,000 runs holds one page in memory, never one table of all of them,
and ``--json`` writes its array item by item. An unreadable checkpoint is a row
marked ``unreadable``; its details follow the table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from itertools import islice
from typing import Any

import click
from rich.json import JSON
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..seam.checkpoint import STATUSES, Checkpoint, RunInfo
from ..seam.codec import Shown
from ..seam.errors import RunNotFoundError
from ..seam.rules import check_run_id
from ..seam.store import Store
from ..stores.config import store_for
from .attempts import show_attempts
from .common import out, owner, say, size, when
from .resume import show_resumed
from .streams import event_records, show_events

PAGE = 100
DETAILS = 20
"""Unreadable runs detailed below a table (``--json`` has every one)."""
STYLE = {
    "running": "cyan",
    "waiting": "yellow",
    "failed": "red",
    "completed": "green",
    "cancelled": "magenta",
    "unreadable": "bold red",
}
COLUMNS = (  # header, widest a column gets from the first page (a longer value overflows)
    ("run id", 60),
    ("status", 10),
    ("workflow", 24),
    ("last step", 32),
    ("attempt", 7),
    ("waits for / lease", 48),
    ("size", 10),
    ("updated", 20),
)
RIGHT = {"attempt", "size", "priority"}
QUEUED = (("queue", 24), ("priority", 8))
"""Columns shown after ``workflow`` when a run of the first page has a queue."""


@click.group()
def runs() -> None:
    """See, signal, message, delete and expire the runs in the configured store."""


def status_of(info: RunInfo) -> str:
    if info.error is not None:
        return "unreadable"
    return info.status or ("completed" if info.done else "running")


def _holding(i: RunInfo, status: str, now: float) -> str:
    """What holds a run up: the signal it waits for (and its deadline), its timer, or
    the worker that leases it."""
    holder, expires = i.owner, i.lease_expires
    if status == "waiting" and i.receiving is not None:  # the mailbox
        deadline = f" (deadline {when(i.wake_at)})" if i.wake_at is not None else ""
        return f"message on {i.receiving}{deadline}"
    if status == "waiting" and i.waiting_for:
        deadline = f" (deadline {when(i.wake_at)})" if i.wake_at is not None else ""
        return f"signal {i.waiting_for}{deadline}"
    if status == "waiting" and i.wake_at is not None:
        return f"sleeps until {when(i.wake_at)}"
    if holder is None or expires is None:
        return "-"
    if expires <= now:
        return f"lease expired ({owner(holder)})"
    return f"leased by {owner(holder)} until {when(expires)[11:]}"


def _cells(i: RunInfo, now: float, queued: bool) -> list[Text]:
    status = status_of(i)
    if i.error is not None:
        cells = ["-"] * (6 if queued else 4)
    else:
        cells = [
            (i.workflow or "-") + (f"@{i.version}" if i.version else ""),  # (version: lifecycle)
            *(_queue_cells(i) if queued else ()),
            f"{i.step} {i.step_name}" if i.step_name else "- (none yet)",
            str(i.attempt) if i.attempt > 0 else "-",  # (0: started for the workers, not run)
            _holding(i, status, now),
        ]
    return [
        Text(i.run_id),
        Text(status, STYLE[status]),
        *(Text(c) for c in cells),
        Text(size(i.size)),
        Text(when(i.updated_at)),
    ]


def _queue_cells(i: RunInfo) -> list[str]:
    """A queued run's queue (``name~partition``) and priority; ``-`` where unset."""
    if i.queue is None:
        return ["-", "-"]
    partition = f"~{i.partition}" if i.partition is not None else ""
    return [i.queue + partition, str(i.priority) if i.priority is not None else "-"]


def _table(infos: Iterator[RunInfo], heading: str) -> tuple[int, list[RunInfo], int]:
    """Print the runs a page at a time; returns how many, and the unreadable ones."""
    now, shown, bad = time.time(), 0, 0
    unreadable: list[RunInfo] = []
    widths: list[int] = []
    columns: tuple[tuple[str, int], ...] = COLUMNS
    while page := list(islice(infos, PAGE)):
        if not widths and any(i.queue is not None for i in page):
            columns = (*COLUMNS[:3], *QUEUED, *COLUMNS[3:])  # queues: where set
        rows = [_cells(i, now, len(columns) > len(COLUMNS)) for i in page]
        if not widths:
            say(heading)
            widths = [
                min(cap, max(len(name), *(row[c].cell_len for row in rows)))
                for c, (name, cap) in enumerate(columns)
            ]
            _row([Text(name, "bold") for name, _ in columns], widths, columns)
        for row in rows:
            _row(row, widths, columns)
        shown += len(page)
        for i in page:
            if i.error is not None:
                bad += 1
                if len(unreadable) < DETAILS:
                    unreadable.append(i)
    return shown, unreadable, bad


def _row(cells: list[Text], widths: list[int], columns: tuple[tuple[str, int], ...]) -> None:
    """One line of the table: cells padded to the column widths, two spaces apart. (Not
    a rich Table: a line costs a tenth as much, and pages line up with each other.)"""
    line = Text()
    for (name, _), cell, width in zip(columns, cells, widths, strict=True):
        pad = " " * max(0, width - cell.cell_len)
        line.append("  " if line else "")
        line.append_text(Text(pad) + cell if name in RIGHT else cell + pad)
    line.rstrip()
    out.print(line, soft_wrap=True)


def _json_array(items: Iterable[dict[str, Any]]) -> None:
    """One JSON array on stdout, written item by item as they come."""
    opening = "["
    for item in items:
        click.echo(f"{opening}\n  {json.dumps(item)}", nl=False)
        opening = ","
    click.echo("[]" if opening == "[" else "\n]")


def _filters(status: str | None, workflow: str | None, version: str | None = None) -> str:
    parts = [f"status {status}"] * bool(status) + [f"workflow {workflow}"] * bool(workflow)
    parts += [f"version {version}"] * bool(version)
    return f" with {' and '.join(parts)}" if parts else ""


@runs.command("list")
@click.option("--status", type=click.Choice(STATUSES), help="Only runs with this status.")
@click.option("--workflow", metavar="NAME", help="Only runs of this workflow.")
@click.option(
    "--version",
    metavar="V",
    help="Only runs pinned to this version of their workflow's code (shown as workflow@V).",
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N runs.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of every field, for scripts.")
def runs_list(
    status: str | None,
    workflow: str | None,
    limit: int | None,
    as_json: bool,
    version: str | None = None,  # lifecycle: last, so callers by position keep working
) -> None:
    """List runs: status, workflow (@ the version its run is pinned to), the signal a
    waiting run waits for, the worker that leases a running one, attempt, last
    completed step, size and last update; a queued run's queue (~partition) and
    priority, when the first page has one.

    The store applies the filters and reads no run's state. Rows print as the store
    yields them, a page of 100 at a time, so a store of any size lists in bounded
    memory (--limit N stops after N). A checkpoint that cannot be read is a row
    marked unreadable, with its details below the table. Examples:

    \b
      durable-steps runs list --status waiting
      durable-steps runs list --workflow refund --limit 20 --json
      durable-steps runs list --version 2026-11 --status running
    """
    with store_for("env", create=False) as store:
        infos = store.list_runs(status=status, workflow=workflow, limit=limit, version=version)
        if as_json:
            _json_array({**asdict(i), "status": status_of(i)} for i in infos)
            return
        where = f"{store!r}{_filters(status, workflow, version)}"
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


def load(store: Store, run_id: str) -> Checkpoint:
    cp = store.load(check_run_id(run_id))
    if cp is None:
        raise RunNotFoundError(
            f"run {run_id!r} has no checkpoint in {store!r}; "
            "'durable-steps runs list' shows the runs there",
            run_id=run_id,
        )
    return cp


def checkpoint_json(cp: Checkpoint, *, results: bool = False) -> dict[str, Any]:
    """The checkpoint for scripts; its recorded calls listed, their contents only with
    ``results``."""
    return {
        **asdict(cp),
        "state": cp.state,  # as it is: a value shown as Encrypted prints as such
        "steps": list(cp.steps),
        "signals": dict(cp.signals),
        "error": None if cp.error is None else dict(cp.error),
        "calls": calls_of(cp, results=results),
    }


def calls_of(cp: Checkpoint, *, results: bool = False) -> list[dict[str, Any]]:
    """The running step's journal as an operator sees it: index, kind, name, size, when
    -- a result only when asked for (``results``: it may hold what a model or a tool
    said, which only an operator debugging a crash asks to see)."""
    listed = []
    for r in cp.calls:
        kind = r.get("kind", "call")
        entry: dict[str, Any] = {"index": r["i"], "kind": kind, "name": r["name"]}
        if r.get("task"):  # made by a task the step created: numbered within it
            entry["task"] = r["task"]
        if "key" in r:  # a call given a key: found by it, whatever task made it
            entry["key"] = r["key"]
        if "result" in r:
            n = len(json.dumps(r["result"], default=str).encode())  # (an Encrypted: str)
            entry |= {"size": n, "at": r.get("at")}
            if results:
                entry["result"] = r["result"]
        elif kind == "call":
            entry["attempt"] = r.get("attempt")  # being retried
        else:
            entry["until"] = r.get("wake_at", r.get("deadline"))
        listed.append(entry)
    return listed


@runs.command("show")
@click.argument("run_id")
@click.option(
    "--state/--no-state",
    default=True,
    help="Print the run's state (default), or only its top-level keys and their sizes.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="Print only this top-level key of the state (repeatable).",
)
@click.option(
    "--calls",
    "with_results",
    is_flag=True,
    help="Also print what each recorded call of the running step returned.",
)
@click.option("--json", "as_json", is_flag=True, help="The whole checkpoint as JSON.")
def runs_show(
    run_id: str, state: bool, keys: tuple[str, ...], with_results: bool, as_json: bool
) -> None:
    """Show one run: status, workflow, lease, attempt, completed steps, the signal or
    time it waits for, the running step's recorded calls (in the order they were
    made: name, size, when, the task that made it; keys in --json; their results only
    with --calls), the signals delivered, the last error, and its
    state (--no-state: only its keys and their sizes; --key KEY: only that key).

    A recorded call's result is what a model or a tool answered: --calls prints it, for
    an operator debugging a crash; nothing else does. A value encrypted with a key this
    shell does not have (DURABLE_CODEC, DURABLE_KEY) prints as "<encrypted with key
    'ID'>"; everything else shows without the key. Examples:

    \b
      durable-steps runs show ticket-4711 --no-state
      durable-steps runs show ticket-4711 --key messages --calls
      durable-steps runs show ticket-4711 --no-state --calls --json
    """
    with store_for("env", create=False) as store:
        store.codec = Shown(store.codec)  # without the key: "<encrypted ...>", not a failure
        cp = load(store, run_id)
        events = event_records(store, run_id)  # published events (cli/streams.py)
    picked = _picked(cp, keys) if keys else None
    if as_json:
        shown = checkpoint_json(cp, results=with_results)
        shown["events"] = {k: v for k, v, _ in events}
        if picked is not None:
            shown["state"] = picked
        elif not state:
            del shown["state"]
            shown["state_keys"] = [{"key": k, "size": n} for k, n in state_sizes(cp.state)]
        click.echo(json.dumps(shown, indent=2, default=str))
        return
    _show(cp, with_results)
    show_events(events)
    if picked is not None:
        for key, value in picked.items():
            say((f"state[{key!r}]", "bold"))
            out.print(JSON(json.dumps(value, default=str)))
    elif state:
        say(("state", "bold"))
        out.print(JSON(json.dumps(cp.state, default=str)))
    else:
        sizes = state_sizes(cp.state)
        say((f"state: {len(sizes)} key(s)", "bold"), " (--key KEY prints one)")
        for key, n in sizes:
            say(f"  {key}  {size(n)}")


def state_sizes(state: dict[str, Any]) -> list[tuple[str, int]]:
    """Each top-level key of a state and the size of its value as JSON."""
    return [(k, len(json.dumps(v, default=str).encode())) for k, v in state.items()]


def _picked(cp: Checkpoint, keys: tuple[str, ...]) -> dict[str, Any]:
    missing = [k for k in keys if k not in cp.state]
    if missing:
        known = ", ".join(map(repr, list(cp.state)[:20])) or "none: the state is empty"
        more = f" (and {len(cp.state) - 20} more)" if len(cp.state) > 20 else ""
        raise click.ClickException(
            f"run {cp.run_id!r}'s state has no key {missing[0]!r}; its keys: {known}{more}. "
            f"'durable-steps runs show {cp.run_id} --no-state' lists them with their sizes"
        )
    return {k: cp.state[k] for k in keys}


def _show(cp: Checkpoint, with_results: bool) -> None:
    """Everything ``runs show`` prints before the state."""
    now = time.time()
    status = _status_line(cp)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    fields = {
        "run": Text(cp.run_id),
        "status": Text(str(status), STYLE[str(cp.status)]),
        "workflow": Text(cp.workflow or "- (a plain run, not a Workflow)"),
        **({"version": Text(cp.version)} if cp.version else {}),  # lifecycle
        "lease": Text(_lease(cp, now)),
        "updated": Text(when(cp.updated_at)),
        "etag": Text(cp.etag or "-"),
    }
    if cp.forked_from:  # fork
        f = cp.forked_from
        call = "" if f.get("call") is None else f", keeping {f.get('call')} recorded calls"
        at = "before its first step" if f.get("step") == -1 else f"after step {f.get('step')}"
        fields["forked from"] = Text(f"{f.get('run')} {at}{call}")
    for key, value in fields.items():
        grid.add_row(key, value)
    out.print(grid)
    say(("completed steps", "bold"))
    for i, name in enumerate(cp.steps):
        say("  ", ("✓", "green"), f" {i} ", name)
    if (words := cp.next_words(now)) is not None:
        say(f"  {words}")
    show_attempts(cp)
    _show_calls(cp, with_results)
    if cp.error:
        e = cp.error
        say(("last error", "bold red"))
        say(f"  {e.get('type')}: {e.get('message')}")
        say(f"  in step {e.get('step')}, attempt {e.get('attempt')}, at {when(e.get('at'))}")
    show_resumed(cp)
    if cp.signals:
        say(("signals delivered", "bold"))
        for name, payload in cp.signals.items():
            text = json.dumps(payload)
            if len(text) > 500:
                text = text[:500] + " ... ('runs show --json' has it whole)"
            say(f"  {name}: {text}")


def _status_line(cp: Checkpoint) -> str:
    if cp.status == "waiting":
        if cp.receiving is not None:  # the mailbox (runner.mailbox)
            deadline = f" (deadline {when(cp.wake_at)})" if cp.wake_at is not None else ""
            return f"waiting for a message on {cp.receiving}{deadline}"
        if cp.waiting_for is None:
            return f"asleep until {when(cp.wake_at)}"
        deadline = f" (deadline {when(cp.wake_at)})" if cp.wake_at is not None else ""
        return f"waiting for signal {cp.waiting_for}{deadline}"
    if cp.status == "cancelled" and cp.cancel_reason:
        return f"cancelled: {cp.cancel_reason}"
    return str(cp.status)


def _show_calls(cp: Checkpoint, with_results: bool) -> None:
    if not cp.calls:
        return
    say((f"recorded calls of step {cp.step + 1}, in the order they were made", "bold"))
    tasks: dict[str, int] = {}
    for n, c in enumerate(_in_time_order(calls_of(cp, results=with_results))):
        where = ""  # a call's key (an integration's: "1/tool/3ba8.../1") is in --json
        if "task" in c:  # a task's scope ("0.9.1.2": nested tasks) as the task's number
            where = f"  (in task {tasks.setdefault(c['task'], len(tasks) + 1)})"
        if "size" in c:
            say(f"  {n:>3} {c['name']}  {size(c['size'])}  {when(c['at'])}{where}")
        elif c["kind"] == "call":
            say(f"  {n:>3} {c['name']}  (failed; attempt {c['attempt']} next){where}")
        else:
            comes = "a message comes" if c["kind"] == "receive" else "the signal comes"
            until = when(c["until"]) if c["until"] is not None else comes
            say(f"  {n:>3} {c['kind']} {c['name']}  until {until}{where}")
        if "result" in c:
            shown = JSON(json.dumps(c["result"], default=str))
            out.print(Padding(shown, (0, 0, 0, 6), expand=False))


def _in_time_order(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded calls by when they were recorded; the journal numbers a task's calls
    within the task, so its order alone interleaves parallel tasks wrongly. Calls not
    recorded (failed, waiting) come last, in journal order."""
    done = [c for c in calls if isinstance(c.get("at"), int | float)]
    rest = [c for c in calls if not isinstance(c.get("at"), int | float)]
    return sorted(done, key=lambda c: c["at"]) + rest


def _lease(cp: Checkpoint, now: float) -> str:
    if cp.owner is None or cp.lease_expires is None:
        return "- (no worker holds it)"
    if cp.lease_expires <= now:
        return (
            f"expired at {when(cp.lease_expires)} (was {owner(cp.owner)}): "
            "a worker may take it over"
        )
    return f"held by {owner(cp.owner)} until {when(cp.lease_expires)}"
