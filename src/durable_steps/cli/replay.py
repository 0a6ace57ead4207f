"""``durable-steps replay MODULE:WORKFLOWS [--run ID ... | --status LIST]``: the runs in
flight re-run against the code about to be deployed, nothing run and nothing written
(``runner.replay`` has the design). A table (or ``--json``), one line per run; exit 1
when any run diverges, so a CI job can stop the deploy.
"""

from __future__ import annotations

import json
import sys

import click
from rich.table import Table
from rich.text import Text

from ..runner.replay import DEFAULT_STATUSES, RunReplay, replay, workflows_of
from ..seam.checkpoint import STATUSES
from ..stores.config import store_for
from ..workers.loop import load_workflows
from ..workers.schedules import split
from .common import out, say


@click.command("replay")
@click.argument("target", metavar="MODULE:WORKFLOWS")
@click.option("--run", "run_ids", multiple=True, metavar="ID", help="Check this run (repeatable).")
@click.option(
    "--status",
    "statuses",
    default=",".join(DEFAULT_STATUSES),
    show_default=True,
    metavar="LIST",
    help="Check the runs of these statuses (comma-separated), when no --run is given.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per run, in a list.")
def replay_command(target: str, run_ids: tuple[str, ...], statuses: str, as_json: bool) -> None:
    """Replay the runs in flight against the code in MODULE:WORKFLOWS (a Workflow or a
    list of them, as 'durable-steps worker' takes it) before you deploy it.

    Each run's current step runs on that code -- the workflow of the run's name and
    version -- with every call, sleep and wait answered from the run's record. Nothing
    is executed (the replay stops at the first call that has no result recorded) and
    nothing is written to the store. Code between calls does run: keep side effects
    inside call(). Each run:

    \b
      replays            every recorded call was asked for, in order, by the same name
      diverges           the code asks for a recorded call under another name, or ends
                         (or waits) without asking for calls the run recorded: on this
                         code the run would fail (exit 1)
      cannot be checked  no such run, a workflow or version the code does not have, a
                         completed run, or a step that recorded nothing yet

    Examples (the store comes from the environment, as for every command):

    \b
      durable-steps replay myapp.flows:WORKFLOWS
      durable-steps replay myapp.flows:WORKFLOWS --status waiting --json
      durable-steps replay myapp.flows:WORKFLOWS --run refund-A-7 --run refund-A-8
    """
    workflows, _ = split(load_workflows(target))  # (schedules start runs; nothing to replay)
    chosen = [s.strip() for s in statuses.split(",") if s.strip()]
    if wrong := [s for s in chosen if s not in STATUSES]:
        raise click.BadParameter(
            f"{', '.join(wrong)}: not a status (the statuses: {', '.join(STATUSES)})",
            param_hint="--status",
        )
    with store_for("env", create=False) as store:
        results = replay(workflows_of(workflows), store, run_ids or None, statuses=chosen)
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        _table(results, target, run_ids, chosen)
    if any(r.diverges for r in results):
        sys.exit(1)


def _table(
    results: list[RunReplay], target: str, run_ids: tuple[str, ...], statuses: list[str]
) -> None:
    if not results:
        which = "the runs named" if run_ids else f"no {'/'.join(statuses)} runs"
        say(f"nothing to replay: {which} in this store")
        return
    table = Table(title=f"runs replayed against {target}", title_justify="left")
    for column in ("run", "workflow", "version", "step", "outcome", "detail"):
        # the run (to be copied) and the outcome whole; the rest folds in a narrow terminal
        table.add_column(column, no_wrap=column in ("run", "outcome"), overflow="fold")
    for r in results:
        step = "" if r.step is None else f"{r.step} {r.step_name or ''}".strip()
        style = {"replays": "green", "diverges": "bold red"}.get(r.outcome, "yellow")
        cells = (r.run_id, r.workflow or "", r.version or "", step)
        table.add_row(*map(Text, cells), Text(r.outcome, style=style), Text(r.detail))
    out.print(table)
    counts = {o: sum(r.outcome == o for r in results) for o in ("replays", "diverges")}
    unchecked = len(results) - sum(counts.values())
    say(f"{counts['replays']} replay, {counts['diverges']} diverge, {unchecked} cannot be checked")
