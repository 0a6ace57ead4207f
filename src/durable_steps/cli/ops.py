"""``durable-steps doctor``, ``migrate`` and ``worker``: checking a store, copying
runs between stores, and recovering runs in a loop.

``migrate`` streams the source's listing and copies one run at a time, its kept history
first (``copying``). A run it
cannot copy (unreadable in the source, too large or not valid for the target) is
recorded and skipped; a failure of a store itself (unreachable, refused, missing
container) stops the copy, since every later run would fail the same way. Either
way the report lists what was copied, what was already there, the conflicts and
the failures, and the exit status is 1 if anything was not copied. Running it
again continues: runs already in the target are found identical and left alone.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import click

from ..seam.checkpoint import Checkpoint, RunInfo
from ..seam.errors import (
    ConfigurationError,
    CorruptCheckpointError,
    DurableError,
    StoreError,
)
from ..seam.store import Store
from ..stores.config import async_store_for, check_spec, describe, store_for
from ..stores.file.store import FileStore
from .common import Progress, first_line, note, say
from .copying import Copied, copy_run
from .verify import Verified, print_damaged, summary, verify

# -- doctor -----------------------------------------------------------------------------


@click.command()
@click.option(
    "--verify",
    "read_all",
    is_flag=True,
    help="Also read every run whole, as 'runs verify' does, and list the damaged ones.",
)
def doctor(read_all: bool) -> None:
    """Check the configured store: configuration, reachability, write, read back, delete;
    with --verify, also that every run in it can be read whole.

    Each failure says what to fix. A store that is not there yet is created (and
    said so, with where: a run started elsewhere would not be found here). For an
    emulator, COSMOS_CREATE_IF_MISSING=true creates the database and container
    first. Without --verify the runs are not read: a run damaged before its last
    record is found by --verify (or 'runs verify'). Example:

    \b
      DURABLE_STORE=cosmos COSMOS_ENDPOINT=http://localhost:8081/ \\
        COSMOS_KEY=<the emulator's key> COSMOS_CREATE_IF_MISSING=true durable-steps doctor
    """
    ok = True

    def check(label: str, fn: Any) -> Any:
        nonlocal ok
        try:
            value = fn()
        except Exception as exc:
            ok = False
            say(("✗ ", "red"), f"{label}: {first_line(exc)}")
            return None
        say(("✓ ", "green"), label + (f": {value}" if isinstance(value, str) else ""))
        return value if value is not None else True

    opened: list[Any] = []

    def open_store() -> str | None:
        store, created = open_or_create()
        opened.append(store)
        return created

    config = check("configuration", lambda: ", ".join(f"{k}={v}" for k, v in describe().items()))
    if config and check("open the store", open_store):
        with opened[0] as store:
            _layout(store)
            if store.kind == "CosmosStore":
                check("container indexes", lambda: _indexes(store))
                check("container TTL", lambda: _ttl(store))
            probe = f"durable-steps-doctor-{uuid.uuid4().hex}"
            saved = check(
                "write a probe checkpoint",
                lambda: (
                    store.save(Checkpoint(probe, 0, {"probe": True}, steps=("probe",))) and None
                ),
            )
            if saved:
                check("read it back", lambda: _probe_matches(store.load(probe)))
                check("delete it", lambda: _probe_deleted(store.delete(probe)))
            if read_all:
                try:
                    report = _verify(store)
                except Exception as exc:
                    ok = False
                    say(("✗ ", "red"), f"read every run whole: {first_line(exc)}")
                else:
                    ok = _verified(report) and ok
    if not ok:
        raise SystemExit(1)
    if read_all:
        say(("the store is ready", "bold green"))
    else:
        say(("the store is ready", "bold green"), " (its runs were not read: --verify reads them)")


def _verify(store: Store) -> Verified:
    with Progress("verifying runs") as progress:
        return verify(store, progress)


def _verified(report: Verified) -> bool:
    """``doctor --verify``'s line for what ``verify`` found, and the damaged runs."""
    mark = ("✓ ", "green") if report.ok else ("✗ ", "red")
    say(mark, f"read every run whole: {summary(report)}")
    print_damaged(report)
    return report.ok


def open_or_create() -> tuple[Any, str | None]:
    """The configured store for a command that may start it (doctor, worker): the one
    that is there, else a new one, with a line that says it was created and where
    (so that a wrong directory or DURABLE_FILE_PATH shows); None when it was there."""
    try:
        return store_for("env", create=False), None
    except StoreError as missing:
        if missing.status_code != 404:
            raise
    store = store_for("env")
    where = store.path.absolute() if isinstance(store, FileStore) else repr(store)
    return store, (
        f"created it: there was no store at {where} (runs started elsewhere are not here; "
        "DURABLE_CREATE_IF_MISSING=false refuses)"
    )


def _layout(store: Store) -> None:
    """A Cosmos DB container's layout: the one it should have, or the earlier one (which
    works, with its limits) and how to move."""
    if store.kind != "CosmosStore":
        return
    from ..stores.cosmos.store import CosmosStore  # (azure: only when it is one)

    assert isinstance(store, CosmosStore)
    advice = store.layout_advice()
    if advice is None:
        say(("✓ ", "green"), "container layout: partition key /run (a head and segments per run)")
    else:
        say(("! ", "yellow"), f"container layout: {advice}")


def _indexes(store: Store) -> str:
    """What the Cosmos DB container indexes of a worker's look (``indexes_checked``)."""
    from ..stores.cosmos.container import indexes_checked
    from ..stores.cosmos.store import CosmosStore

    assert isinstance(store, CosmosStore)
    return indexes_checked(store.indexing_policy)


def _ttl(store: Store) -> str:
    """Whether the Cosmos DB container's TTL lets finished_ttl work (``ttl_checked``)."""
    from ..stores.cosmos.container import ttl_checked
    from ..stores.cosmos.store import CosmosStore

    assert isinstance(store, CosmosStore)
    return ttl_checked(store.default_ttl, store.finished_ttl)


def _probe_matches(cp: Checkpoint | None) -> None:
    if cp is None or cp.state != {"probe": True}:
        raise DurableError(f"read back {cp!r} instead of the probe")


def _probe_deleted(deleted: bool) -> None:
    if not deleted:
        raise DurableError("the probe was already gone")


# -- migrate ----------------------------------------------------------------------------


@click.command()
@click.option(
    "--to",
    "target",
    required=True,
    metavar="STORE",
    help="Where to copy: file:PATH, cosmos (COSMOS_* variables), cosmos:CONTAINER (another "
    "container of that database) or env.",
)
@click.option(
    "--from",
    "source",
    default="env",
    show_default=True,
    metavar="STORE",
    help="Where to copy from: env (the configured store), file:PATH, cosmos or cosmos:CONTAINER.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def migrate(target: str, source: str, as_json: bool) -> None:
    """Copy every run to another store, checkpoints intact (steps, state, attempt, age),
    with the history the source keeps of each (every kept step, then the latest).

    Each run is read in the target first: one that already exists there is
    compared, reported and left alone, never written to. A run that cannot be
    copied (unreadable, over the state limit) is reported and skipped; the exit
    status is then 1. Examples, laptop files to Cosmos DB, and a container of the
    earlier layout (partition key /id) to a new one (partition key /run, from
    infra/):

    \b
      COSMOS_ENDPOINT=https://ACCOUNT.documents.azure.com:443/ \\
        durable-steps migrate --from file:.durable --to cosmos
      durable-steps migrate --from cosmos --to cosmos:checkpoints2
    """
    result: dict[str, Any] = {
        "copied": [],
        "identical": [],
        "conflicts": [],
        "failed": [],
        "stopped": None,
        "history_steps": 0,
        "latest_only": [],
    }
    check_spec(source)
    check_spec(target)  # before the source is opened: a typo is the first thing said
    with (
        store_for(source, create=False) as src,
        store_for(target) as dst,
        Progress("copying") as progress,
    ):
        where = f"from {src!r} to {dst!r}"
        current = None  # the run being copied, if a store fails during its copy
        try:
            for info in src.list_runs():
                current = info.run_id
                try:
                    outcome = _copy(src, dst, info)
                except (StoreError, ConfigurationError):
                    raise  # the store itself fails: every later run would too
                except DurableError as exc:
                    result["failed"].append(_failure(info.run_id, exc))
                    if not as_json:
                        note(("failed ", "red"), f"{info.run_id}: {_why(exc)}")
                else:
                    if outcome.outcome is not None:
                        result[outcome.outcome].append(info.run_id)
                    result["history_steps"] += outcome.steps
                    if outcome.latest_only:
                        result["latest_only"].append(info.run_id)
                current = None
                progress.advance()
        except (StoreError, ConfigurationError) as exc:
            result["stopped"] = _failure(current, exc)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        _report(result, where)
    if result["conflicts"] or result["failed"] or result["stopped"]:
        raise SystemExit(1)


def _copy(src: Any, dst: Any, info: RunInfo) -> Copied:
    if info.error is not None:
        raise CorruptCheckpointError(info.error, run_id=info.run_id)
    cp = src.load(info.run_id)
    if cp is None:
        return Copied(None)  # deleted while we copied
    # The target is read first: a run already there is compared, never written to (a
    # create that loses may leave data behind on Cosmos DB until 'runs prune').
    return copy_run(src, dst, cp)


def _failure(run_id: str | None, exc: DurableError) -> dict[str, Any]:
    return {"run_id": run_id, "error": type(exc).__name__, "message": first_line(exc)}


def _why(exc: DurableError) -> str:
    return f"{type(exc).__name__}: {first_line(exc)}"


def _report(result: dict[str, Any], where: str) -> None:
    copied, there = len(result["copied"]), len(result["identical"])
    note(f"copied {copied:,} run(s) {where}; {there:,} already there")
    if result["history_steps"]:
        note(f"history: {result['history_steps']:,} earlier step(s) copied before the latest")
    if latest := result["latest_only"]:
        note(
            f"{len(latest):,} run(s) copied without history: the source kept only their "
            "latest checkpoint (history='none', or a container of the earlier /id layout)"
        )
    if result["conflicts"]:
        shown = ", ".join(result["conflicts"][:10])
        more = f" and {len(result['conflicts']) - 10} more" if len(result["conflicts"]) > 10 else ""
        note(
            (f"{len(result['conflicts'])} conflict(s)", "red"),
            f", left alone (the target holds a different checkpoint): {shown}{more}",
        )
    if result["failed"]:
        note((f"{len(result['failed'])} failed", "red"), " (listed above): not copied")
    if stopped := result["stopped"]:
        at = f" at run {stopped['run_id']}" if stopped["run_id"] else ""
        note(
            ("stopped", "red"),
            f"{at}: {stopped['error']}: {stopped['message']}. Fix it and run migrate again: "
            "runs already copied are found identical and left alone",
        )


# -- worker -----------------------------------------------------------------------------


@click.command()
@click.argument("target", metavar="MODULE:ATTR")
@click.option("--once", is_flag=True, help="One pass over the runs to recover, then exit.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1000),
    default=4,
    show_default=True,
    help="Runs in progress at the same time: async workflows as tasks on the worker's "
    "event loop (hundreds are fine), sync ones each in a thread.",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.1),
    default=1.0,
    show_default=True,
    help="A started run is picked up within this many seconds (the worker looks that often; "
    "a look reads only runs it could take).",
)
@click.option(
    "--lease",
    type=click.FloatRange(1),
    default=60.0,
    show_default=True,
    help="Seconds a run stays leased to this worker without a save or a heartbeat.",
)
@click.option("--owner", help="A stable id for this worker (default: unique per run).")
@click.option(
    "--version",
    "versions",
    multiple=True,
    metavar="V",
    help="Serve only runs of this version of the workflows (repeatable; default: the "
    "versions of the workflows loaded), and runs not pinned to one yet.",
)
def worker(
    target: str,
    *,
    once: bool,
    concurrency: int,
    interval: float,
    lease: float,
    owner: str | None,
    versions: tuple[str, ...],
) -> None:
    """Run the runs of MODULE:ATTR (a Workflow, or a list of Workflows and Schedules)
    that are waiting for a worker, in a loop, until SIGTERM or SIGINT: runs started
    for the workers (Workflow.start, 'runs start'), runs whose worker died, and
    waiting runs whose timer or signal deadline has come. The limits of the queues
    the workflows declare hold across every worker; each Schedule's ticks are
    started once each, by whichever worker sees them first.

    Serves sync and async workflows: async ones (an async def step) run as tasks on
    the worker's event loop, sync ones each in a thread. Each look reads only the
    runs it could take (free or expired lease, due timers, started runs), runs them
    (at most --concurrency at a time) and prints a line per run; looks come often
    enough to pick a started run up within --interval. On SIGTERM or SIGINT no new
    run starts; running runs stop at their next call, sleep, wait or step boundary
    and release their leases (what they recorded stays); then it exits 0. Runs
    waiting for a signal that has not come, failed and cancelled runs are left
    alone.

    A run is pinned to the version of its workflow's code it began on
    (Workflow(..., version=)): a worker takes only runs of the versions it serves, so
    old and new workers run side by side during a deploy. Examples:

    \b
      durable-steps worker myapp.flows:WORKFLOWS --concurrency 8
      durable-steps worker myapp.flows:WORKFLOWS --version 2026-12
    """
    from ..workers.fleet import runs_async
    from ..workers.loop import load_workflows, on_signals, serve
    from ..workers.schedules import split
    from ..workers.versions import select_versions

    served, schedules = split(load_workflows(target))
    workflows = select_versions(served, versions)
    # Async workflows run on the worker's event loop, through the async store of the
    # same configuration (opened on that loop: the Cosmos client's session lives there).
    astore = (lambda: async_store_for("env")) if any(map(runs_async, workflows)) else None
    stop = threading.Event()
    on_signals(stop, note)
    store, created = open_or_create()  # runs may not have started yet: it waits for them
    if created:
        note(f"worker: {created}")
    with store:
        names = ", ".join(w.name + (f" {w.version}" if w.version else "") for w in workflows)
        note(f"worker: recovering runs of {names} in {store!r}" + (" (once)" if once else ""))
        serve(
            store,
            [*workflows, *schedules],
            once=once,
            concurrency=concurrency,
            interval=interval,
            lease=lease,
            owner=owner,
            echo=_worker_line,
            stop=stop,
            astore=astore,
        )


def _worker_line(what: Any) -> None:
    if isinstance(what, str):
        say(what)
        return
    line = f"run {what.run_id} ({what.workflow}): {what.outcome}"
    if what.error is not None:
        kind, message = type(what.error).__name__, first_line(what.error)
        line += f": {kind}" if message == kind else f": {kind}: {message}"
    say(line)
