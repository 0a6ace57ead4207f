"""``durable-steps runs resume RUN [--here --workflow MODULE:ATTR]``: a failed or
cancelled run running again from its last checkpoint (``runs.resume`` has the
design), and how ``runs show`` tells the failures it had before.

Without ``--here`` the run is handed back to the workers: no code is imported, as
with ``runs start``. With ``--here`` this process runs it to its end, with the
workflow's code named as the worker names it (MODULE:ATTR, the same loader). The
code is found before anything changes: a run whose workflow (at its pinned version)
is not in MODULE:ATTR is refused, nothing resumed.
"""

from __future__ import annotations

import json

import click

from ..runner.errors import not_found
from ..runner.workflow import Workflow
from ..runs.resume import resume_run
from ..seam.checkpoint import Checkpoint
from ..seam.errors import ConfigurationError, RunWaiting
from ..seam.rules import check_run_id
from ..stores.config import store_for
from ..workers.loop import load_workflows
from ..workers.schedules import split
from .common import first_line, say, when


@click.command("resume")
@click.argument("run_id")
@click.option(
    "--here",
    is_flag=True,
    help="Run it here to its end (needs --workflow), instead of leaving it to the workers.",
)
@click.option(
    "--workflow",
    "target",
    metavar="MODULE:ATTR",
    help="The workflow's code for --here, as 'durable-steps worker' takes it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_resume(run_id: str, here: bool, target: str | None, as_json: bool) -> None:
    """Make failed or cancelled run RUN_ID running again from its last checkpoint: its
    completed steps stay, the step it stopped in starts a new round of attempts (its
    recorded calls replay), and how it had ended stays in its record ('runs show').
    A worker serving its workflow picks it up; with --here this command runs it.
    A completed, running or waiting run is refused, nothing changed. Examples:

    \b
      durable-steps runs resume refund-A-7
      durable-steps runs resume refund-A-7 --here --workflow myapp.flows:WORKFLOWS
    """
    if here and target is None:
        raise click.UsageError("--here runs the run in this process: name its code with --workflow")
    if target is not None and not here:
        raise click.UsageError("--workflow is the code for --here; add --here, or leave it out")
    with store_for("env", create=False) as store:
        code = None
        if target is not None:
            head = store.load_head(check_run_id(run_id))  # what it runs on, not its state
            if head is None:
                raise not_found(run_id, "it was not resumed")
            code = code_of(head, split(load_workflows(target))[0], target)
        cp = resume_run(store, run_id)
        if code is None:
            if as_json:
                click.echo(json.dumps({"run_id": run_id, "status": cp.status, "step": cp.step}))
            else:
                say(f"resumed run {run_id} at step {cp.step + 1}: a worker serving it picks it up")
            return
        say(f"resumed run {run_id} at step {cp.step + 1}; running it here")
        try:
            code.run(run_id, store)
        except RunWaiting as exc:
            say(f"run {run_id} is waiting: {first_line(exc)}")
            return
        except Exception as exc:  # the step's own error: one line, as any failure here
            kind = type(exc).__name__
            failed = f"run {run_id} failed again: {kind}: {first_line(exc)}"
            raise click.ClickException(failed) from exc
    say(f"run {run_id} completed")


def code_of(cp: Checkpoint, workflows: list[Workflow], target: str) -> Workflow:
    """The workflow of ``workflows`` that runs ``cp``: its name, at its pinned version."""
    for w in workflows:
        if w.name == cp.workflow and cp.version in (None, w.version):
            return w
    at = f" version {cp.version!r} of" if cp.version else ""
    raise ConfigurationError(
        f"run {cp.run_id!r} is a run of{at} workflow {cp.workflow!r}, which {target} does "
        "not hold; nothing was resumed. Name the module that holds it",
        variable="--workflow",
    )


def show_resumed(cp: Checkpoint) -> None:
    """How the run had ended each time it was resumed (``runs show``)."""
    if not cp.resumed:
        return
    say(("resumed", "bold"))
    for r in cp.resumed:
        error = r.get("error")
        why = f"{error.get('type')}: {error.get('message')}" if error else "-"
        if r.get("status") == "cancelled":
            why = f"cancelled ({r.get('cancel_reason') or 'no reason given'})"
        say(f"  {when(r.get('at'))}: was {r.get('status')} at step {r.get('step')}: {why}")
