"""Part 10: what history costs (issue 33, item 1) on the growing workload (200 steps
each adding 5 KB; ``growing``), both variants: the storage a run takes with every
completed step kept (``history="steps"``) against the same run without history
(``"none"``), on FileStore (bytes of its files: the run's log and the logs
compactions kept) and on Cosmos DB (bytes of the run's items, as the service stores
their JSON); and, on Cosmos DB with history on, what a save sends -- the targets of
part 4 (at most two requests per save, step 200's bytes within 2x step 1's, at most
3 MB a run) must hold with history kept. Target: storage <= 1.5x without history on
a state that only grows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import Metered, StepClock, Table, size
from .cosmos import Wire, step_saves
from .growing import SHOWN, VARIANTS, initial, workflow


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and "locks" not in p.parts)


def file_storage(table: Table, base: Path, quick: bool) -> None:
    del quick  # one run each: sizes do not vary
    for variant in VARIANTS:
        stored = {}
        for mode in ("none", "steps"):
            path = base / f"history-{variant}-{mode}"
            with ds.FileStore(path, history=mode) as store:
                workflow(variant).run(f"h-{variant}", store, input=initial(variant))
                kept = len(store.run_history(f"h-{variant}") or [])
            stored[mode] = du(path)
        table.judge(
            "11",
            f"{variant}: FileStore storage, history kept / none",
            f"{size(stored['steps'])} / {size(stored['none'])}",
            stored["steps"] / stored["none"],
            1.5,
            note=f"{kept} steps kept, each loadable (load_at)",
        )


def cosmos_storage(table: Table, endpoint: str, quick: bool) -> None:
    del quick
    for variant in VARIANTS:
        stored: dict[str, int] = {}
        for mode in ("none", "steps"):
            wire = Wire(endpoint, f"history-{variant}-{mode}", history=mode)
            try:
                run_id = f"h-{variant}"
                clock, metered = StepClock(), Metered(wire.store, wire.meter)
                workflow(variant, clock).run(run_id, metered, input=initial(variant))
                stored[mode] = _items_bytes(wire, run_id)
                if mode == "steps":
                    _wire_rows(table, variant, clock, metered)
            finally:
                wire.close()
        table.judge(
            "11",
            f"{variant}: Cosmos storage, history kept / none",
            f"{size(stored['steps'])} / {size(stored['none'])}",
            stored["steps"] / stored["none"],
            1.5,
            note="bytes of the run's items (their JSON, without system properties)",
        )


def _items_bytes(wire: Wire, run_id: str) -> int:
    """The bytes of every item of the run (head and segments), without the service's
    own properties, read through the store's container."""
    container: Any = wire.store._container  # the bench's own look behind the store
    items = container.query_items(
        "SELECT * FROM c WHERE c.run = @run",
        parameters=[{"name": "@run", "value": run_id}],
        partition_key=run_id,
    )
    total = 0
    for item in items:
        own = {k: v for k, v in item.items() if not k.startswith("_")}
        total += len(json.dumps(own, ensure_ascii=False, separators=(",", ":")).encode())
    return total


def _wire_rows(table: Table, variant: str, clock: StepClock, metered: Metered) -> None:
    saves = [c for c in metered.calls if c.writes]
    ordinary = [c for c in saves if not c.delta["queries"] and not c.delta["deletes"]]
    most = max(c.delta["requests"] for c in ordinary)
    table.judge(
        "11",
        f"{variant}: Cosmos with history, requests per ordinary save",
        f"{sum(c.delta['requests'] for c in ordinary) / len(ordinary):.2f}, at most {most}",
        most,
        2,
        unit="",
    )
    steps = step_saves(clock, saves)
    sent = [steps[n - 1].delta["sent"] for n in SHOWN]
    table.judge(
        "11",
        f"{variant}: Cosmos with history, bytes sent by steps 1 / 50 / 200",
        " / ".join(map(size, sent)),
        sent[-1] / sent[0],
        2,
        note=f"{size(sum(c.delta['sent'] for c in metered.calls))} a run (target <= 3 MB)",
    )
