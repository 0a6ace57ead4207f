"""``durable-steps runs signal``, ``runs delete`` and ``runs prune``: the commands that
change the runs of the configured store.

A deletion never removes more than the operator saw. ``runs delete`` deletes the
run with the etag it showed in its question, and ``runs prune`` asks the store
only for what it may delete (completed and cancelled runs unless ``--all``, last updated before
the cutoff) and deletes each run with the etag it was listed with: a run resumed
or saved meanwhile is kept and reported, never deleted. With ``--yes`` (or
``--dry-run``) prune streams; without, it lists first, asks, then deletes exactly
what it listed.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable
from dataclasses import replace

import click

from ..runs.signals import send_signal
from ..seam.checkpoint import ENDED, Checkpoint, RunInfo
from ..seam.errors import ConflictError, CorruptCheckpointError
from ..seam.store import Store
from ..stores.config import store_for
from .common import Progress, age, json_value, note, say, when
from .runs import STYLE, load, status_of


@click.command("delete")
@click.argument("run_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def runs_delete(run_id: str, yes: bool) -> None:
    """Delete one run's checkpoint; run again, the run starts over. Asks first unless
    --yes. The run is deleted as it was read: if a worker saved it meanwhile,
    nothing is deleted (a heartbeat, which renews its lease only, does not count).
    An unreadable checkpoint can be deleted too.

    Example: durable-steps runs delete ticket-4711 --yes
    """
    with store_for("env", create=False) as store:
        etag: str | None = None
        try:
            cp = load(store, run_id)
            what, etag = f"{cp.status}, {len(cp.steps)} completed step(s)", cp.etag
        except CorruptCheckpointError:
            what = "its checkpoint is unreadable"  # deleting it is how to start over
        if not yes:
            click.confirm(f"delete run {run_id!r} ({what}) from {store!r}?", abort=True, err=True)
        deleted = _delete_as_read(store, run_id, cp if etag is not None else None)
    note(f"deleted run {run_id!r}" if deleted else f"run {run_id!r} was already gone")


@click.command("signal")
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
    payload = json_value(data, data_file, "--data", "payload")
    with store_for("env", create=False) as store:
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


@click.command("prune")
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
    help="Runs of any status (running, waiting, failed too); default: completed and "
    "cancelled runs only.",
)
@click.option("--dry-run", is_flag=True, help="Only list what would be deleted.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask; delete as the runs are listed.")
@click.option("--json", "as_json", is_flag=True, help="Print the run ids as JSON.")
def runs_prune(older: str, any_status: bool, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Retention: delete the runs last updated more than AGE ago (completed and cancelled
    runs only, unless --all).

    The store lists only those runs, and each is deleted only if it is unchanged
    since it was listed: a run resumed meanwhile is kept and reported. Without
    --yes the runs are listed first and you are asked. It also deletes the runs that
    ended more than DURABLE_FINISHED_TTL seconds ago (with their history), on stores
    that do not expire them themselves (file). On Cosmos DB it also removes
    data (segments) that no run's head reaches, an hour after it was written: a
    delete that crashed half-way, a run expired by finished_ttl, a save that failed
    or lost to another writer. Examples:

    \b
      durable-steps runs prune --older-than 30d --dry-run
      durable-steps runs prune --older-than 7d --yes     # nightly, e.g. from cron
    """
    cutoff = time.time() - age(older)
    which = "run(s)" if any_status else "completed or cancelled run(s)"
    done: dict[str, list[str]] = {"matched": [], "deleted": [], "kept": [], "gone": []}
    with store_for("env", create=False) as store:
        listed: Iterable[RunInfo] = itertools.chain.from_iterable(
            store.list_runs(status=status, updated_before=cutoff)
            for status in ((None,) if any_status else ENDED)
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
        # Retention: runs past the store's finished_ttl, on a store that has
        # no item TTL (file, memory), with their history.
        expired = 0 if dry_run else store.delete_expired()
        # Cosmos DB: data that no head reaches (a crashed delete, an expired run, a lost save);
        # file store: history no run file claims.
        segments = None if dry_run else store.prune_orphans()
    if as_json:
        extra = {} if segments is None else {"orphaned_segments": segments}
        extra["expired"] = expired
        click.echo(json.dumps({"dry_run": dry_run, **done, **extra}, indent=2))
        return
    verb = "would delete" if dry_run else "deleted"
    count = len(done["matched" if dry_run else "deleted"])
    kept = f"; kept {len(done['kept'])} that changed since listed" if done["kept"] else ""
    swept = "" if not segments else f"; removed {segments:,} orphaned segment(s)"
    swept += "" if not expired else f"; deleted {expired:,} expired run(s) (DURABLE_FINISHED_TTL)"
    note(
        f"{verb} {count:,} {which} last updated before {when(cutoff)} (older than {older})"
        f"{kept}{swept}"
    )


def _prune_one(
    store: Store, info: RunInfo, dry_run: bool, as_json: bool, done: dict[str, list[str]]
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


# A heartbeat renews a running run's lease (a new etag) every lease/3 seconds; a
# delete that lost the race to one alone is sent again with the new etag, a few times.
_HEARTBEAT_RETRIES = 5


def _delete_as_read(store: Store, run_id: str, read: Checkpoint | None) -> bool:
    """Delete the run as the operator saw it (``read``; None: unreadable, deleted
    whatever it holds). A ConflictError stands if the run changed in anything but its
    lease's renewal -- a heartbeat of the worker that runs it changes nothing shown."""
    if read is None:
        return _delete(store, run_id, None)
    for _ in range(_HEARTBEAT_RETRIES):
        try:
            return _delete(store, run_id, read.etag)
        except ConflictError:
            latest = store.load(run_id)
            if latest is None:
                return False  # deleted meanwhile: already gone
            if _shown(latest) != _shown(read):
                raise
            read = latest
    return _delete(store, run_id, read.etag)


def _shown(cp: Checkpoint) -> Checkpoint:
    """The checkpoint without what a heartbeat changes (its etag, lease, update time)."""
    return replace(cp, etag=None, lease_expires=None, updated_at=None)


def _delete(store: Store, run_id: str, etag: str | None) -> bool:
    """Delete the run only as it was read (``etag``); ConflictError if it changed since."""
    return bool(store.delete(run_id, etag=etag))
