"""``durable-steps runs upgrade RUN --to VERSION --workflow MODULE:ATTR``: a run moved
to another version of its workflow's code (``runs.upgrade`` has the design).

The code is named as the worker names it (MODULE:ATTR, the same loader) and must
hold the run's workflow at VERSION: the run's completed steps are checked against
that version's step list before anything changes.
"""

from __future__ import annotations

import json

import click

from ..runner.errors import not_found
from ..runner.workflow import Workflow
from ..runs.upgrade import upgrade_run
from ..seam.errors import ConfigurationError
from ..seam.rules import check_run_id
from ..stores.config import store_for
from ..workers.loop import load_workflows
from ..workers.schedules import split
from .common import say


@click.command("upgrade")
@click.argument("run_id")
@click.option("--to", "version", required=True, metavar="VERSION", help="The version to move to.")
@click.option(
    "--workflow",
    "target",
    required=True,
    metavar="MODULE:ATTR",
    help="The code that holds the run's workflow at VERSION, as 'durable-steps worker' takes it.",
)
@click.option(
    "--drop-calls",
    is_flag=True,
    help="Move it even if its running step diverges on VERSION, discarding that step's "
    "recorded calls (the step then runs afresh, its calls made again).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_upgrade(run_id: str, version: str, target: str, drop_calls: bool, as_json: bool) -> None:
    """Move run RUN_ID to VERSION of its workflow's code, so that workers of VERSION run
    it from now on. Its completed steps must be the first steps of VERSION's step
    list (else nothing changes, and the difference is named); a completed run, or
    one a worker is running now, is refused. Its running step is replayed on
    VERSION's code first (as 'durable-steps replay' does: nothing run, nothing
    written): a move after which it would diverge from its recorded calls is refused,
    naming where, unless --drop-calls discards them. Its status stays: a failed or
    cancelled run is then resumed with 'runs resume'. Example:

    \b
      durable-steps runs upgrade refund-A-7 --to 2026-12 --workflow myapp.flows:WORKFLOWS
    """
    workflows, _ = split(load_workflows(target))  # (schedules need no upgrade)
    with store_for("env", create=False) as store:
        head = store.load_head(check_run_id(run_id))  # its workflow's name, not its state
        if head is None:
            raise not_found(run_id, "it was not upgraded")
        code = _version_of(workflows, head.workflow, version, target)
        dropped = len(loaded.calls) if drop_calls and (loaded := store.load(run_id)) else 0
        moved = upgrade_run(store, run_id, code, drop_calls=drop_calls)
    if as_json:
        outcome = {"run_id": run_id, "version": version, "moved": moved}
        click.echo(json.dumps({**outcome, "dropped_calls": dropped if moved else 0}))
    elif moved:
        say(f"run {run_id} now runs on version {version} (was {head.version or 'unpinned'})")
        if drop_calls:
            say(
                f"{dropped} recorded operation(s) of its running step {head.step + 1} were "
                "discarded: that step runs afresh, its calls made again"
            )
    else:
        say(f"run {run_id} runs on version {version} already; nothing changed")


def _version_of(workflows: list[Workflow], name: str | None, version: str, target: str) -> Workflow:
    for w in workflows:
        if w.name == name and w.version == version:
            return w
    have = sorted(repr(w.version) for w in workflows if w.name == name)
    raise ConfigurationError(
        f"{target} has no version {version!r} of workflow {name!r} (it has: "
        f"{', '.join(have) or 'none of that workflow'}); nothing was changed. Name the "
        "code of that version",
        variable="--workflow",
    )
