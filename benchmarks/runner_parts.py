"""Parts 6 and 7: what the runner itself costs -- a heartbeat's writes, and tracing.

Heartbeat: a one-step workflow with a short lease (0.6 s, so a beat every 0.2 s)
whose step waits until three heartbeats have been written, on a state of 1 KB or
1 MB. The beats are the store writes that start and end while the step runs, as
``Metered`` saw them; what each wrote is whatever the meter counts (the kernel's
write counters for FileStore, the bytes on the wire for Cosmos DB). The same
function serves part 4 (``benchmarks.cosmos``).

Tracing: run() per step (20 trivial steps on MemoryStore, so only the runner is
timed) in three fresh processes: without OpenTelemetry importable, with the API
and no SDK configured (no-op), and with the SDK recording every span into an
in-memory exporter. Five interleaved rounds (one with --quick); the best of each mode counts.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import KB, Call, Metered, StepClock, Table, io_counters, ms, size, text

BEAT_SIZES = (("1 KB", KB), ("1 MB", 1024 * KB))


def beats(
    store: Any, meter: Callable[[], dict[str, int]], state_size: int, count: int = 3
) -> list[Call]:
    """The store writes of ``count`` heartbeats of a run whose state is ``state_size``."""
    metered, clock = Metered(store, meter), StepClock()

    def wait(state: Any) -> None:
        start, deadline = time.perf_counter(), time.perf_counter() + 30
        while sum(c.writes and c.start >= start for c in metered.calls) < count:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no {count} heartbeats within 30 s (lease 0.6 s)")
            time.sleep(0.01)

    flow = ds.Workflow("heartbeat", [ds.Step("wait", clock(wait))])
    flow.run(
        f"hb-{secrets.token_hex(4)}",
        metered,
        input={"blob": text(state_size, state_size)},
        lease=0.6,
    )
    inside = [
        c
        for c in metered.calls
        if c.writes and c.start >= clock.entered[0] and c.end <= clock.returned[0]
    ]
    return inside[:count]


def mean(calls: list[Call], key: str) -> float:
    return sum(c.delta[key] for c in calls) / len(calls)


def heartbeat(table: Table, base: Path) -> None:
    """Part 6: bytes a heartbeat writes on FileStore, at 1 KB and 1 MB of state."""
    per_beat = {}
    for label, n in BEAT_SIZES:
        with ds.FileStore(base / f"heartbeat-{n}") as store:
            calls = beats(store, io_counters, n)
        per_beat[n] = mean(calls, "write_bytes")
        table.add(
            "6",
            f"FileStore heartbeat, {label} state: written a beat",
            size(per_beat[n]),
            note=f"write() calls {size(mean(calls, 'wchar'))}; {ms(mean_time(calls))} a beat",
        )
    judge_beats(table, "6", "FileStore", per_beat)


def judge_beats(table: Table, part: str, store: str, per_beat: dict[int, float]) -> None:
    """Issue 12: a heartbeat must not rewrite a large state where it can avoid it --
    judged as: a beat on a 1 MB state moves at most 5% of it."""
    _, n = BEAT_SIZES[-1]
    table.judge(
        part,
        f"{store} heartbeat does not rewrite the state",
        f"{size(per_beat[n])} a beat",
        per_beat[n] / n,
        0.05,
        note="ratio: a beat's bytes : the 1 MB state",
    )


def mean_time(calls: list[Call]) -> float:
    return sum(c.end - c.start for c in calls) / len(calls)


_TRACED = r"""
import json, secrets, statistics, sys, time
mode, repeat = sys.argv[1], int(sys.argv[2])
if mode == "none":
    sys.modules["opentelemetry"] = None          # as if the [otel] extra were missing
elif mode == "sdk":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
import durable_steps as ds
store = ds.MemoryStore()
steps = [ds.Step(f"s{i:02d}", lambda s, i=i: {f"k{i:02d}": "x" * 40}) for i in range(20)]
ds.run("warm-up", steps, store)
times = []
for _ in range(repeat):
    t0 = time.perf_counter()
    ds.run(f"r-{secrets.token_hex(4)}", steps, store)
    times.append((time.perf_counter() - t0) / 20)
print(json.dumps({"per_step": statistics.median(times), "otel": "opentelemetry" in sys.modules
                  and sys.modules["opentelemetry"] is not None}))
"""

MODES = (
    ("none", "opentelemetry not importable"),
    ("api", "OpenTelemetry API, no SDK (no-op)"),
    ("sdk", "OpenTelemetry SDK, in-memory exporter"),
)


def tracing(table: Table, quick: bool) -> None:
    """Part 7: run() per step without OpenTelemetry, with the no-op API, with the SDK."""
    seen: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
    imported: dict[str, bool] = {}
    for _ in range(1 if quick else 5):  # interleaved rounds, so drift hits every mode alike
        for mode, _label in MODES:
            done = subprocess.run(
                [sys.executable, "-c", _TRACED, mode, "50" if quick else "200"],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout)
            seen[mode].append(result["per_step"])
            imported[mode] = result["otel"]
    none = min(seen["none"])
    for mode, label in MODES:
        best = min(seen[mode])
        extra = (
            "" if mode == "none" else f"{(best - none) * 1e6:+.0f} us a step ({best / none:.2f}x); "
        )
        table.add(
            "7",
            f"run() per step, {label}",
            ms(best),
            note=f"{extra}opentelemetry imported: {'yes' if imported[mode] else 'no'}",
        )
