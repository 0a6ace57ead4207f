"""``durable-steps runs stream``, ``runs streams`` and ``runs events``: a run's output
streams (one followed, or all listed) and published events from a shell
(``runs.streams``, ``runs.stream_index``, ``runs.events``), and the events block
of ``runs show``."""

from __future__ import annotations

import json
from typing import Any

import click

from ..runner import events as run_events
from ..runner.streams import StreamReset
from ..runs.stream_index import list_streams
from ..runs.streams import read_stream
from ..seam.errors import RunNotFoundError
from ..seam.rules import check_run_id
from ..seam.store import Store
from ..stores.config import store_for
from .common import say, when


def _exists(store: Store, run_id: str) -> None:
    if store.run_info(check_run_id(run_id)) is None:
        raise RunNotFoundError(
            f"run {run_id!r} has no checkpoint in {store!r}; "
            "'durable-steps runs list' shows the runs there",
            run_id=run_id,
        )


@click.command("stream")
@click.argument("run_id")
@click.argument("name")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep reading until the stream is closed or the run ends."
)
@click.option(
    "--after", type=int, default=None, metavar="N", help="Only chunks after offset N (resume)."
)
@click.option(
    "--wait",
    is_flag=True,
    help="A stream the run has not written yet is waited for (with --follow), not unknown.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, for scripts.")
def runs_stream(  # noqa: PLR0917 (click passes each argument and option)
    run_id: str, name: str, follow: bool, after: int | None, wait: bool, as_json: bool
) -> None:
    """Print the chunks of run RUN_ID's stream NAME, one per line: its offset and the
    chunk as JSON. A reset line marks the chunks of a call that was interrupted (a
    crash, an error) and written again after it. --after N resumes after the last
    offset you saw: nothing is missed, nothing repeated. A NAME the run has not written
    exits 1 naming the streams it has, unless --wait (the run may write it later). Examples:

    \b
      durable-steps runs stream ticket-4711 answer --follow
      durable-steps runs stream ticket-4711 answer --after 41 --json
    """
    with store_for("env", create=False) as store:
        _exists(store, run_id)
        read = read_stream(store, run_id, name, after=after, follow=follow, wait=wait)
        for offset, chunk in read:
            if isinstance(chunk, StreamReset):
                if as_json:
                    line = {"offset": offset, "reset": chunk.since, "call": chunk.call}
                    click.echo(json.dumps(line))
                else:
                    click.echo(
                        f"{offset}\t-- reset: the chunks from offset {chunk.since} on were "
                        "written by an interrupted attempt; what follows replaces them"
                    )
            elif as_json:
                click.echo(json.dumps({"offset": offset, "chunk": chunk}))
            else:
                click.echo(f"{offset}\t{json.dumps(chunk)}")


@click.command("streams")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="A JSON array, for scripts.")
def runs_streams(run_id: str, as_json: bool) -> None:
    """List the streams run RUN_ID wrote: name, entries (chunks and reset markers: the
    next offset) and whether it is closed. 'runs stream RUN_ID NAME' prints one. Example:

    \b
      durable-steps runs streams ticket-4711
    """
    with store_for("env", create=False) as store:
        found = list_streams(store, check_run_id(run_id))
    if as_json:
        click.echo(json.dumps([s._asdict() for s in found], indent=2))
        return
    if not found:
        say(f"run {run_id} has written no stream")
    for s in found:
        click.echo(f"{s.name}\t{s.length} entries\t{'closed' if s.closed else 'open'}")


@click.command("events")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="One JSON object of every event.")
def runs_events(run_id: str, as_json: bool) -> None:
    """Print the events run RUN_ID published (set_event): key, value, when. Example:

    \b
      durable-steps runs events ticket-4711 --json
    """
    with store_for("env", create=False) as store:
        _exists(store, run_id)
        records = event_records(store, run_id)
    if as_json:
        click.echo(json.dumps({k: v for k, v, _ in records}, indent=2))
        return
    if not records:
        say(f"run {run_id} has published no events")
    show_events(records)


def event_records(store: Store, run_id: str) -> list[tuple[str, Any, float | None]]:
    """Each event: its key, value and when it was set."""
    found = []
    for item in store.read_items(run_id, run_events.KIND):
        value = item.value if isinstance(item.value, dict) else {}
        at = value.get("set_at")
        found.append((item.key, value.get("value"), at if isinstance(at, float | int) else None))
    return found


def show_events(records: list[tuple[str, Any, float | None]]) -> None:
    """The events block of ``runs show`` and ``runs events``."""
    if not records:
        return
    say(("events", "bold"))
    for key, value, at in records:
        text = json.dumps(value)
        if len(text) > 500:
            text = text[:500] + " ... ('runs events --json' has it whole)"
        say(f"  {key}: {text}  ({when(at)})")
