"""``durable-steps runs history`` and ``runs fork``: a run's completed steps as
its store keeps them, and a new run made from one of them (``runs.history``,
``runs.fork``). ``runs prune`` deletes expired runs with their history (``change``)."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from ..runs.fork import fork_run
from ..runs.history import run_history
from ..stores.config import store_for
from .common import json_value, say, size, when


@click.command("history")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the steps as JSON.")
def runs_history(run_id: str, as_json: bool) -> None:
    """List the completed steps of run RUN_ID that its store keeps: index, name, when
    it completed, its attempts and the bytes of its update, and under each step its
    calls (name or key, when recorded, duration where known, result bytes, the attempt; never
    results). What a store keeps is its history setting (DURABLE_HISTORY: steps, the
    default of every store; none). Example:

    \b
      durable-steps runs history ticket-4711
    """
    with store_for("env", create=False) as store:
        steps = run_history(store, run_id)
    if as_json:
        click.echo(json.dumps([asdict(s) for s in steps]))
        return
    if not steps:
        say(f"run {run_id} has no completed step yet")
    for s in steps:
        took = "" if s.attempts is None else f"  {s.attempts} attempt{'s' * (s.attempts != 1)}"
        bytes_ = "" if s.size is None else f"  {size(s.size)}"
        say(f"  {s.step:>4}  {s.name}  {when(s.at)}{took}{bytes_}")
        if s.calls_left_out:
            say(f"          ... {s.calls_left_out} earlier calls not kept")
        for c in s.calls or ():
            took_c = "" if c.start is None or c.end is None else f"  {c.end - c.start:.3f}s"
            at_c = "  unfinished" if c.end is None else f"  {when(c.end)}"
            bytes_c = "" if c.size is None else f"  {size(c.size)}"
            kind = "" if c.kind == "call" else f"  ({c.kind})"
            tried = "" if c.attempt is None else f"  attempt {c.attempt}"
            say(f"          {c.label}{kind}{at_c}{took_c}{bytes_c}{tried}")


@click.command("fork")
@click.argument("run_id")
@click.argument("new_run_id")
@click.option(
    "--at-step",
    "at_step",
    type=int,
    help="The completed step to fork after (-1, or left out with --at-call: before the first).",
)
@click.option("--update", "data", metavar="JSON", help="Top-level keys to set, a JSON object.")
@click.option(
    "--at-call",
    "at_call",
    type=int,
    help="Keep the first N recorded calls of the next step (rewind to just before call N).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_fork(  # noqa: PLR0917 (one parameter per option)
    run_id: str,
    new_run_id: str,
    at_step: int | None,
    data: str | None,
    at_call: int | None,
    as_json: bool,
) -> None:
    """Make run NEW_RUN_ID from run RUN_ID's state after step K (plus --update),
    continuing at step K+1; RUN_ID is not changed. A worker (or 'run') runs the new run
    like any other. A code-first run (one step: its calls) is forked at a call: --at-call
    N alone keeps its first N recorded calls and runs the rest live. Examples:

    \b
      durable-steps runs fork ticket-4711 ticket-4711-b --at-step 2
      durable-steps runs fork agent-7 agent-7-retry --at-step 0 --at-call 3 \\
          --update '{"prompt": "be brief"}'
      durable-steps runs fork research-1 research-1-b --at-call 4
    """
    update = json_value(data, None, "--update", "update")
    if update is not None and not isinstance(update, dict):
        raise click.BadParameter("the update must be a JSON object", param_hint="'--update'")
    with store_for("env", create=False) as store:
        made = fork_run(store, run_id, new_run_id, at_step=at_step, update=update, at_call=at_call)
    if as_json:
        click.echo(json.dumps({"run_id": made.run_id, "forked_from": dict(made.forked_from or {})}))
        return
    where = "before its first step" if made.step < 0 else f"after step {made.step}"
    kept = "" if at_call is None else f", keeping {at_call} recorded calls"
    say(
        f"forked run {new_run_id} from {run_id} {where}{kept}: it continues at step "
        f"{made.step + 1} when a worker (or 'run') runs it"
    )
