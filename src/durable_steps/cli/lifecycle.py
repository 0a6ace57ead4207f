"""``durable-steps runs start`` and ``runs cancel``: handing a run to the workers, and
stopping one, from a shell or a script -- no import of the workflow's code needed
(a run is started by its workflow's name; the worker that knows the code runs it)."""

from __future__ import annotations

import json

import click

from ..runner.cancel import cancel_run
from ..runner.requests import execute
from ..runner.store_io import blocking_io
from ..runner.workflow import start_program
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
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_start(  # noqa: PLR0917 (click passes options as keywords, by their names)
    run_id: str,
    name: str,
    data: str | None,
    data_file: str | None,
    version: str | None,
    as_json: bool,
) -> None:
    """Create run RUN_ID of workflow NAME for the workers (``durable-steps worker``)
    to pick up, with the input as its initial state; nothing runs here. Starting a
    run that exists already starts nothing (a retried request is safe); a run of
    another workflow is refused. Examples:

    \b
      durable-steps runs start order-1042 --workflow fulfil --input '{"sku": "A-7"}'
      durable-steps runs start order-1043 --workflow fulfil --input-file order.json
    """
    value = json_value(data, data_file, "--input", "input")
    if value is not None and not isinstance(value, dict):
        raise click.BadParameter(
            "the input must be a JSON object (the run's initial state), not "
            f"{type(value).__name__}",
            param_hint="'--input'",
        )
    with store_for("env") as store:
        created = execute(start_program(name, run_id, value, version), blocking_io(store))
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "workflow": name, "created": created}))
    elif created:
        say(f"started run {run_id} of workflow {name}: a worker running {name} picks it up")
    else:
        say(f"run {run_id} of workflow {name} exists already; nothing was started")


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
