"""Part 10: what a send to a run's mailbox costs (``send_message``), after 1 and after
1,000 consumed messages, on FileStore and on cosmos-local.

The run is a chat loop: one step taking message after message (``receive``), as a
conversation does. A send reads the run's head and writes it back conditionally; its
cost must not grow with the messages consumed before (they leave the head when they
are consumed). Measured per send, as the median of a few sends at each point: the
time, the bytes (FileStore: written and read, from the kernel's counters; Cosmos:
sent on the wire, from the counting proxy) and the requests (Cosmos).

Note what the consumed messages still are while the step runs: its journal's records
(a receive is recorded like a call, and dropped when the step completes), which the
run file holds; a FileStore head read reads the last record and the step names and
signals where it says they lie (``stores/file/head_place``), not the file, and a
Cosmos head read never reads the journal (it lives in the run's segments).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import Metered, Table, io_counters, median, ms, size

TOPIC = "chat"
SENDS = 7
"""Sends measured at each point (their median)."""


def _chat() -> ds.Workflow:
    def talk(state: Any) -> dict[str, Any]:
        while ds.receive(TOPIC) != "bye":
            pass
        return {}

    return ds.Workflow("chat", [ds.Step("talk", talk)])


def _consume(store: ds.Store, run_id: str, n: int) -> None:
    """Send ``n`` messages and let the run take them all (then it waits again)."""
    for i in range(n):
        ds.send_message(store, run_id, TOPIC, f"message {i}: " + "x" * 80)
    with contextlib.suppress(ds.RunWaiting):  # it took them all and waits for more
        _chat().run(run_id, store)


def _sends(metered: Metered, run_id: str, meter: Callable[[], dict[str, int]]) -> dict[str, float]:
    """The median cost of ``SENDS`` sends through ``metered`` (which the run then takes)."""
    times, deltas = [], []
    for i in range(SENDS):
        before, t0 = meter(), time.perf_counter()
        ds.send_message(metered, run_id, TOPIC, f"measured {i}: " + "y" * 80)
        times.append(time.perf_counter() - t0)
        after = meter()
        deltas.append({k: after[k] - before.get(k, 0) for k in after})
    _consume(metered, run_id, 0)  # taken, so that the next point starts with none waiting
    return {"time": median(times), **{k: median([d[k] for d in deltas]) for k in deltas[0]}}


def _points(
    store: ds.Store, meter: Callable[[], dict[str, int]], run_id: str, many: int
) -> tuple[dict[str, float], dict[str, float]]:
    _chat().start(run_id, store)
    metered = Metered(store, meter)
    _consume(store, run_id, 1)
    first = _sends(metered, run_id, meter)
    _consume(store, run_id, many - 1 - SENDS)
    return first, _sends(metered, run_id, meter)


def file_mailbox(table: Table, base: Path, quick: bool) -> None:
    many = 200 if quick else 1000
    with ds.FileStore(base / "mailbox") as store:

        def meter() -> dict[str, int]:
            io = io_counters()
            return {"written": io["wchar"], "read": io["rchar"]}

        one, later = _points(store, meter, "chat-file", many)
    _rows(table, "FileStore", one, later, many, ("written", "read"))


def cosmos_mailbox(table: Table, endpoint: str, quick: bool) -> None:
    from .cosmos import Wire

    many = 200 if quick else 1000
    wire = Wire(endpoint, "bench-mailbox")
    try:
        one, later = _points(wire.store, wire.meter, "chat-cosmos", many)
    finally:
        wire.close()
    _rows(table, "cosmos-local", one, later, many, ("sent", "requests"))
    table.verdict(
        "14",
        "cosmos-local: requests per send (a head read and a head write)",
        f"{one['requests']:.0f} / {later['requests']:.0f}",
        "≤ 2",
        max(one["requests"], later["requests"]) <= 2,
        note=f"after 1 / after {many:,} consumed",
    )


def _rows(  # noqa: PLR0917 (one store's two points)
    table: Table,
    store: str,
    one: dict[str, float],
    later: dict[str, float],
    many: int,
    counters: tuple[str, ...],
) -> None:
    what = f"after 1 / {many:,} consumed"
    table.add(
        "14",
        f"{store}: a send's time, {what}",
        f"{ms(one['time'])} / {ms(later['time'])}",
        note=f"median of {SENDS} sends; the run's chat step holds {many:,} receive records",
    )
    for key in counters:
        shown = (lambda v: f"{v:.0f}") if key == "requests" else size
        table.add(
            "14", f"{store}: {key} per send, {what}", f"{shown(one[key])} / {shown(later[key])}"
        )
    for key in (k for k in counters if k != "requests"):  # written and read; sent
        table.judge(
            "14",
            f"{store}: flat ({key} per send after {many:,} : after 1 consumed)",
            f"{size(later[key])} : {size(one[key])}",
            later[key] / one[key] if one[key] else None,
            1.5,
        )
