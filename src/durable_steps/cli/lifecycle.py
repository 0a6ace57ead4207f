"""``durable-steps runs start`` and ``runs cancel``: handing a run to the workers, and
stopping one, from a shell or a script -- no import of the workflow's code needed
(a run is started by its workflow's name; the worker that knows the code runs it)."""

from __future__ import annotations

import difflib
import json

import click

from ..runner.requests import execute
from ..runner.store_io import blocking_io
from ..runner.workflow import placement, start_program
from ..runs.cancel import cancel_run
from ..seam.store import Store
from ..stores.config import store_for
from .common import json_value, say


@click.command("start")
@click.argument("run_id")
@click.option("--workflow", "name", required=True, metavar="NAME", help="The workflow's name.")
@click.option("--input", "data", metavar="JSON", help="The initial state, a JSON object.")
@click.option(
    "--input-file", "data_file", metavar="PATH", help="Read the input from a file ('-': stdin)."
)
@click.option(
    "--version",
    metavar="V",
    help="Pin the run to this version of the workflow's code (default: the first worker's).",
)
@click.option(
    "--workflow-from",
    "target",
    metavar="MODULE:ATTR",
    help="Check NAME against these workflows (the worker's target; imports that code).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0, min_open=True),
    metavar="SECONDS",
    help="Cancel the run if it has not finished this many seconds from now (reason deadline).",
)
@click.option(
    "--new-workflow",
    is_flag=True,
    help="Start NAME although no run of it is in the store yet (its first run).",
)
@click.option(  # queues
    "--queue", metavar="NAME", help="The queue whose limits the workers take it under."
)
@click.option(
    "--priority", type=int, metavar="P", help="Among its queue's runs, higher is taken first."
)
@click.option(
    "--partition", metavar="KEY", help="The queue partition (e.g. a tenant) it counts in."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_start(
    run_id: str,
    *,
    name: str,
    data: str | None,
    data_file: str | None,
    target: str | None,
    timeout: float | None,
    new_workflow: bool,
    version: str | None,
    queue: str | None,
    priority: int | None,
    partition: str | None,
    as_json: bool,
) -> None:
    """Create run RUN_ID of workflow NAME for the workers (``durable-steps worker``)
    to pick up, with the input as its initial state; nothing runs here. Starting a
    run that exists already starts nothing (a retried request is safe); a run of
    another workflow is refused.

    NAME must be known, or no worker would ever take the run: a workflow of
    --workflow-from MODULE:ATTR, or one that runs in the store already have. The
    first run of a new workflow needs --new-workflow (or --workflow-from). Examples:

    \b
      durable-steps runs start order-1042 --workflow fulfil --input '{"sku": "A-7"}'
      durable-steps runs start order-1043 --workflow fulfil --input-file order.json
      durable-steps runs start order-1 --workflow fulfil --workflow-from shop.flows:WORKFLOWS
      durable-steps runs start order-1 --workflow fulfil --new-workflow
      durable-steps runs start order-1044 --workflow fulfil --queue orders --priority 10

    --queue names a queue that a worker's workflows declare (Workflow(queue=Queue(...)));
    without it, a run of a workflow with a queue is taken under that queue, at the
    queue's own priority. --partition gives the run's tenant its own limits.
    """
    value = json_value(data, data_file, "--input", "input")
    if value is not None and not isinstance(value, dict):
        raise click.BadParameter(
            "the input must be a JSON object (the run's initial state), not "
            f"{type(value).__name__}",
            param_hint="'--input'",
        )
    try:
        placed = placement(queue, priority, partition)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with store_for("env") as store:
        if not new_workflow:
            check_known(store, name, target)
        program = start_program(
            name, run_id, value, version=version, timeout=timeout, placed=placed
        )
        created = execute(program, blocking_io(store))
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "workflow": name, "created": created}))
    elif created:
        say(f"started run {run_id} of workflow {name}: a worker running {name} picks it up")
    else:
        say(f"run {run_id} of workflow {name} exists already; nothing was started")


# -- is the workflow known? --------------------------------------------------------------

_SEEN = 1000
"""Runs a refusal looks through for the names of workflows the store knows (to suggest)."""


def check_known(store: Store, name: str, target: str | None) -> None:
    """Refuse a workflow name that no worker would take: not among ``target``'s
    workflows when one is given, else not the workflow of any run in the store (a
    listing filtered by the backend, one row). The refusal names the close matches."""
    if target is not None:
        from ..workers.loop import load_workflows  # (imports the user's code: when asked)

        known = [w.name for w in load_workflows(target)]
        if name in known:
            return
        where = f"{target} has {', '.join(map(repr, known))}"
    else:
        if any(True for _ in store.list_runs(workflow=name, limit=1)):
            return
        known = sorted({i.workflow for i in store.list_runs(limit=_SEEN) if i.workflow})
        where = "no run in the store has it"
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    raise click.UsageError(
        f"unknown workflow {name!r} ({where}): no worker would take the run, so nothing was "
        f"started. {hint}Name a workflow of the worker's code with --workflow-from MODULE:ATTR, "
        "or pass --new-workflow for the first run of a new workflow"
    )


@click.command("cancel")
@click.argument("run_id")
@click.option("--reason", metavar="TEXT", help="Why; kept with the run and shown by 'runs show'.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_cancel(run_id: str, reason: str | None, as_json: bool) -> None:
    """Cancel run RUN_ID: it starts no other step or call. A worker running it stops at
    its next save or heartbeat (an async step is cancelled; a sync step's result is
    not saved); nothing runs it again. A completed run cannot be cancelled. Example:

    \b
      durable-steps runs cancel order-1042 --reason "customer withdrew"
    """
    with store_for("env", create=False) as store:
        cancelled = cancel_run(store, run_id, reason=reason)
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "cancelled": cancelled}))
    elif cancelled:
        say(f"cancelled run {run_id}: it starts no other step or call")
    else:
        say(f"run {run_id} was cancelled already; nothing changed")
