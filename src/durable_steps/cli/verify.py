"""``durable-steps runs verify`` (and ``doctor --verify``): read every run whole and
list the damaged ones, with what to do about each.

``runs list`` stays cheap: a store lists a run from its last record's fields (a
file store) or a projection of its item (Cosmos DB), never its state. So damage
before the last record -- a byte flipped in the middle of a file -- lists as a
healthy run until a load reads it, and a resume then fails. ``verify`` lists the
runs the same way and then loads each one whole, as a resume would: a run that
cannot be listed or loaded is damaged (a run deleted meanwhile is skipped). It
reads every run, so it costs what loading every run costs (on Cosmos DB, a point
read per run); it shows its progress on stderr.

A damaged run is named by its run id where the store can tell it (a file store
reads it from the first record of a damaged journal), else by the name the
listing gave it (a file's name), which ``runs delete`` accepts either way.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field

import click

from ..seam.errors import CorruptCheckpointError
from ..seam.store import Store
from ..stores.config import store_for
from .common import Progress, first_line, say

ADVICE = (
    "A damaged run cannot resume: its next run fails with CorruptCheckpointError. "
    "For each, either restore it from a backup (a file store: the file named in its "
    "error; Cosmos DB: the item, from the account's backup), then verify again; or "
    "start it over with the 'runs delete' command shown, which deletes its checkpoint: "
    "its next run starts from the first step, so its completed steps run again, and "
    "its state and the signals delivered to it are lost."
)


@dataclass
class Damaged:
    run_id: str
    """The run id, or the name the listing gave a run it could not name (a file's)."""
    error: str
    delete: str
    """The command that deletes it, to start it over."""


@dataclass
class Verified:
    store: str
    runs: int = 0
    """Runs read (damaged ones included; deleted while verified: not counted)."""
    damaged: list[Damaged] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged


def verify(store: Store, progress: Progress) -> Verified:
    """List every run of ``store`` and load each whole; the damaged ones."""
    report = Verified(repr(store))
    for info in store.list_runs():
        error = info.error
        if error is None:
            try:
                if store.load(info.run_id) is None:
                    continue  # deleted since it was listed
            except CorruptCheckpointError as exc:
                error = first_line(exc)
        report.runs += 1
        if error is not None:
            command = f"durable-steps runs delete {shlex.quote(info.run_id)}"
            report.damaged.append(Damaged(info.run_id, error, command))
        progress.advance()
    return report


def print_damaged(report: Verified) -> None:
    """The damaged runs, one block each, then what to do."""
    for d in report.damaged:
        say(("damaged ", "bold red"), d.run_id, ": ", d.error)
        say(f"  to start it over: {d.delete}")
    if report.damaged:
        say(ADVICE)


@click.command("verify")
@click.option("--json", "as_json", is_flag=True, help="The outcome as JSON, for scripts.")
def runs_verify(as_json: bool) -> None:
    """Read every run whole and list the damaged ones, with what to do: exit status 1
    if any run is damaged.

    'runs list' reads only what it shows (a run's last record), so a checkpoint
    damaged before its end lists as healthy, and fails only when the run resumes.
    This loads every run as a resume would. It costs what loading every run
    costs (on Cosmos DB, a point read per run) and shows its progress on stderr.
    'doctor --verify' runs the same check. Example:

    \b
      durable-steps runs verify || echo "damaged runs: see above"
    """
    with store_for("env", create=False) as store, Progress("verifying runs") as progress:
        report = verify(store, progress)
    if as_json:
        click.echo(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    else:
        say(summary(report))
        print_damaged(report)
    if not report.ok:
        raise SystemExit(1)


def summary(report: Verified) -> str:
    where = f"{report.runs:,} run(s) in {report.store}"
    if report.ok:
        return f"read {where} whole: none is damaged"
    whole = report.runs - len(report.damaged)
    return f"read {where}: {len(report.damaged):,} damaged, {whole:,} whole"
