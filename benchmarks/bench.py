"""What a checkpoint costs: durable-steps against the disk's floor, its peers and its
targets (DESIGN.md, "Performance"), in one table from one run.

    scripts/bench [--quick] [--dir PATH] [--skip PART ...]

Parts, one module each: 1-2 ``floors`` (the disk's floors; trivial steps), 3
``growing`` and ``peers`` (the growing workload; LangGraph and DBOS on it), 4
``cosmos`` (requests and bytes on the wire), 5 ``listing``, 6-7 ``runner_parts``
(heartbeat, tracing), 8 ``agent`` (the agent loop's durable calls; a worker's pickup
of started runs and due timers), 9 ``console`` (the console's first page of 100,000
runs), 10 ``codec`` (values encrypted and compressed at rest), 11 ``history`` (the
storage history takes; saves with history on Cosmos DB), 12 ``af_checkpoints`` (Agent
Framework checkpoints on Cosmos DB, ours against its own ``CosmosCheckpointStorage``).
13 ``streams`` (a chunk's cost at 1 and 10,000; writer-to-reader latency), 14
``mailbox`` (a send's cost after 1 and 1,000 consumed messages), 15 ``fleet`` (a
worker's look with many leased runs; 200 async agents in one worker process) and
``fleet_runs`` (trivial runs through 8 worker processes, beside DBOS queues),
``fleet_pickup`` (an idle worker's pickup of a start, a signal, a child's end: p50/p99)
and ``fleet_scaling`` (1/2/4/8 processes, CPU a run; the fleet's rows beside DBOS), 16
``queues`` (a queue's limit: an admission, and 8 workers through a queue of
concurrency 4), 17 ``codefirst`` (a ``@durable.step`` call against ``call`` and
``@DBOS.step``), 18 ``lg_checkpoints`` (LangGraph checkpoints: ``DurableSaver`` against
langchain-azure-cosmosdb's saver on cosmos-local, and against ``SqliteSaver`` on
files). This module owns the table and the command line.

Every row that has a target shows it, the measured ratio and "met" or "MISSED".
Parts run one after another in one invocation, on the same disk, so their ratios
hold on a noisy machine; latencies are medians of repeated runs (``--quick``: fewer
repeats and smaller listings, labelled in the title).

A part that raises, or adds no row, is a bench that cannot run: the others still
run and the table is shown, then the command exits 1 naming it. A missed target
is not an error (the table says MISSED). ``--quick`` is the smoke run that
``scripts/test`` makes (tests/project/test_bench.py), so a bench that cannot run
does not land.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

import durable_steps as ds

from .common import Table

PARTS = (
    "floors",
    "trivial",
    "growing",
    "cosmos",
    "listing",
    "heartbeat",
    "tracing",
    "agent",
    "pickup",
    "console",
    "codec",
    "history",
    "agent-framework",
    "streams",
    "mailbox",
    "fleet",
    "fleet-runs",
    "fleet-pickup",
    "fleet-scaling",
    "queues",
    "codefirst",
    "langgraph",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: fewer repeats, 1,000/200-run listings"
    )
    parser.add_argument("--dir", help="where to write (default: the temp dir; the disk matters)")
    parser.add_argument("--skip", nargs="*", default=[], choices=PARTS, help="parts to leave out")
    parser.add_argument("--keep", action="store_true", help="keep the files written")
    args = parser.parse_args()

    err = Console(stderr=True, highlight=False, width=160)
    table = Table(log=lambda line: err.print(line, markup=False))
    base = Path(tempfile.mkdtemp(prefix="durable-bench-", dir=args.dir))
    started, load = time.time(), os.getloadavg()[0]
    try:
        broken = run_parts(table, base, args.quick, set(args.skip), err)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    show(table, args.quick, time.time() - started, base, load)
    if broken:
        err.print(f"bench: did not run: {'; '.join(broken)}", markup=False)
        sys.exit(1)


def run_parts(table: Table, base: Path, quick: bool, skip: set[str], err: Console) -> list[str]:
    """Runs the parts not in ``skip``; returns the titles of those that did not run
    (raised, or added no row)."""
    from . import (
        agent,
        codec,
        codefirst,
        console,
        fleet,
        fleet_pickup,
        fleet_runs,
        fleet_scaling,
        floors,
        growing,
        history,
        lg_checkpoints,
        listing,
        mailbox,
        queues,
        runner_parts,
        streams,
    )

    broken: list[str] = []

    def part(name: str, title: str, fn: Callable[[], object]) -> None:
        if name in skip:
            return
        err.rule(title)
        t0, rows = time.perf_counter(), len(table.rows)
        try:
            fn()
            err.print(f"  ({time.perf_counter() - t0:.1f} s)")
        except Exception as exc:  # one broken part must not hide the others' numbers
            err.print(traceback.format_exc(), markup=False)
            number = title.split(".", maxsplit=1)[0]
            table.add(number, f"{title}: did not complete", "error", note=str(exc)[:80])
            broken.append(f"{title} ({type(exc).__name__}: {str(exc)[:200]})")
            return
        if len(table.rows) == rows:
            broken.append(f"{title} (no rows)")

    part("floors", "1. floors on this disk", lambda: floors.floors(table, base, quick))
    part("trivial", "2. trivial steps", lambda: floors.trivial(table, base, quick))
    part("growing", "3. the growing workload", lambda: growing.growing(table, base, quick))
    if not cosmos_parts(table, base, quick, skip, part):
        broken.append("4-5. cosmos-local did not start")
    part("listing", "5. listing FileStore", lambda: listing.file_listing(table, base, quick))
    part("heartbeat", "6. heartbeat on FileStore", lambda: runner_parts.heartbeat(table, base))
    part("tracing", "7. tracing overhead", lambda: runner_parts.tracing(table, quick))
    part("agent", "8. the agent loop (durable calls)", lambda: agent.loop(table, base, quick))
    part("pickup", "8. handing runs to a worker", lambda: agent.pickup(table, base, quick))
    part("console", "9. the console on FileStore", lambda: console.file_console(table, base, quick))
    part("codec", "10. the codec on FileStore", lambda: codec.file_codec(table, base, quick))
    part("history", "11. history on FileStore", lambda: history.file_storage(table, base, quick))
    part("streams", "13. streams on FileStore", lambda: streams.per_chunk_file(table, base, quick))
    part(
        "mailbox", "14. the mailbox on FileStore", lambda: mailbox.file_mailbox(table, base, quick)
    )
    part("fleet", "15. the fleet: looks on FileStore", lambda: fleet.file_looks(table, base, quick))
    part(
        "fleet",
        "15. the fleet: async agents on FileStore",
        lambda: fleet.file_agents(table, base, quick),
    )
    part(
        "fleet-runs",
        "15. the fleet: 8 worker processes on FileStore",
        lambda: fleet_runs.file_fleet(table, base, quick),
    )
    part(
        "fleet-runs",
        "15. the fleet: 8 DBOS processes on one queue (SQLite)",
        lambda: fleet_runs.dbos_fleet(table, base, quick),
    )
    part(
        "fleet-pickup",
        "15. the fleet: pickup on FileStore (wake-ups)",
        lambda: fleet_pickup.file_pickup(table, base, quick),
    )
    part(
        "fleet-pickup",
        "15. the fleet: pickup on DBOS queues (SQLite)",
        lambda: fleet_pickup.dbos_pickup(table, base, quick),
    )
    part(
        "fleet-scaling",
        "15. the fleet: 1, 2, 4 and 8 worker processes, ours and DBOS",
        lambda: fleet_scaling.scaling(table, base, quick),
    )
    part("queues", "16. a queue's limit", lambda: queues.queues(table, base, quick))
    part(
        "codefirst",
        "17. a decorated step's call",
        lambda: codefirst.codefirst(table, base, quick),
    )
    part(
        "langgraph",
        "18. LangGraph checkpoints on files",
        lambda: lg_checkpoints.langgraph_files(table, base, quick),
    )
    if not {"fleet-runs", "fleet-pickup", "fleet-scaling"} <= skip:
        err.rule("15. the fleet beside DBOS")
        fleet_scaling.fleet_table(table)
    return broken


def cosmos_parts(
    table: Table,
    base: Path,
    quick: bool,
    skip: set[str],
    part: Callable[[str, str, Callable[[], object]], None],
) -> bool:
    """Parts 4, 5, 9 and 10-15 on Cosmos (listing, the console, the codec, history, Agent
    Framework's checkpoints, streams, the mailbox, the fleet) share one cosmos-local
    server; False when it did not start."""
    parts = {
        "cosmos",
        "listing",
        "console",
        "codec",
        "history",
        "agent-framework",
        "streams",
        "mailbox",
        "fleet",
        "fleet-runs",
        "fleet-pickup",
        "langgraph",
    }
    if parts <= skip:
        return True
    from . import (
        af_checkpoints,
        codec,
        console,
        cosmos,
        fleet,
        fleet_pickup,
        fleet_runs,
        history,
        lg_checkpoints,
        listing,
        mailbox,
        streams,
    )

    with ExitStack() as stack:
        try:
            endpoint = stack.enter_context(cosmos.server())
        except Exception as exc:  # no Node.js, no npm package: say so in the table
            table.add("4", "cosmos-local did not start", "n/a", note=str(exc)[:100])
            return False
        part("cosmos", "4. Cosmos DB on the wire", lambda: cosmos.cosmos(table, endpoint, quick))
        part(
            "listing",
            "5. listing cosmos-local",
            lambda: listing.cosmos_listing(table, endpoint, quick),
        )
        part(
            "console",
            "9. the console on cosmos-local",
            lambda: console.cosmos_console(table, endpoint, quick),
        )
        part(
            "codec",
            "10. the codec on cosmos-local",
            lambda: codec.cosmos_codec(table, endpoint, quick),
        )
        part(
            "history",
            "11. history on cosmos-local",
            lambda: history.cosmos_storage(table, endpoint, quick),
        )
        part(
            "agent-framework",
            "12. Agent Framework checkpoints on cosmos-local",
            lambda: af_checkpoints.agent_framework(table, endpoint, quick),
        )
        part(
            "streams",
            "13. streams on cosmos-local",
            lambda: streams.per_chunk_cosmos(table, endpoint, quick),
        )
        part(
            "mailbox",
            "14. the mailbox on cosmos-local",
            lambda: mailbox.cosmos_mailbox(table, endpoint, quick),
        )
        part(
            "fleet",
            "15. the fleet: looks on cosmos-local",
            lambda: fleet.cosmos_looks(table, endpoint, quick),
        )
        part(
            "fleet",
            "15. the fleet: async agents on cosmos-local",
            lambda: fleet.cosmos_agents(table, endpoint, quick),
        )
        part(
            "fleet-runs",
            "15. the fleet: 8 worker processes on cosmos-local",
            lambda: fleet_runs.cosmos_fleet(table, endpoint, base, quick),
        )
        part(
            "fleet-pickup",
            "15. the fleet: pickup on cosmos-local (the poll)",
            lambda: fleet_pickup.cosmos_pickup(table, endpoint, base, quick),
        )
        part(
            "langgraph",
            "18. LangGraph checkpoints on cosmos-local",
            lambda: lg_checkpoints.langgraph_cosmos(table, endpoint, quick),
        )
    return True


def show(table: Table, quick: bool, seconds: float, base: Path, load: float) -> None:
    out = Console(highlight=False, width=190)
    title = (
        f"durable-steps {ds.__version__} — {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, disk of {base.parent}, "
        f"load {load:.1f} at start, {seconds:.0f} s"
    )
    if quick:
        title += "  [--quick: fewer repeats, smaller listings; a smoke run, not the numbers]"
    rich = RichTable(title=title, title_justify="left")
    for name, justify in (
        ("#", "left"),
        ("measurement", "left"),
        ("measured", "right"),
        ("target", "right"),
        ("ratio", "right"),
        ("", "left"),
        ("note", "left"),
    ):
        rich.add_column(name, justify=justify, no_wrap=name != "note")  # type: ignore[arg-type]
    for r in table.rows:
        rich.add_row(r.part, r.what, r.measured, r.target, r.ratio, r.verdict, r.note)
    out.print(rich)
    judged = [r for r in table.rows if r.verdict in ("met", "MISSED")]
    missed = [r for r in judged if r.verdict == "MISSED"]
    out.print(f"{len(judged) - len(missed)} of {len(judged)} targets met", highlight=False)


if __name__ == "__main__":
    main()
