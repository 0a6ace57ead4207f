"""Benchmark parts of the runner itself: what tracing costs per step, and what a heartbeat
writes. Called by benchmarks/bench.py, which owns the table."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

_TRACED = r"""
import json, os, secrets, statistics, sys, time
mode, base, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
store = ds.MemoryStore() if base == "memory" else ds.FileStore(base)
steps = [ds.Step(f"s{i:02d}", lambda s, i=i: {f"k{i:02d}": "x" * 40}) for i in range(20)]
times = []
for _ in range(repeat):
    t0 = time.perf_counter()
    ds.run(f"r-{secrets.token_hex(4)}", steps, store)
    times.append((time.perf_counter() - t0) / 20)
print(json.dumps(statistics.median(times)))
"""

MODES = (
    ("none", "opentelemetry-api not installed"),
    ("api", "opentelemetry-api, no SDK configured (no-op)"),
    ("sdk", "OpenTelemetry SDK, in-memory exporter"),
)


def tracing(row: Callable[..., None], ms: Callable[[float], str], repeat: int) -> None:
    """run() per step in three processes: without OpenTelemetry, with the API only, and
    with the SDK recording every span (MemoryStore, so that only the runner is timed)."""
    seen: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
    for _ in range(3):  # interleaved rounds, so drift hits every mode alike
        for mode, _label in MODES:
            done = subprocess.run(
                [sys.executable, "-c", _TRACED, mode, "memory", str(repeat * 4)],
                capture_output=True,
                text=True,
                check=True,
            )
            seen[mode].append(json.loads(done.stdout))
    none = min(seen["none"])
    for mode, label in MODES:
        best = min(seen[mode])
        note = "" if mode == "none" else f"+{(best - none) * 1e6:.0f} us per step"
        row("7", f"run() per step, MemoryStore, {label}", ms(best), note)


def heartbeat(row: Callable[..., None]) -> None:
    """Bytes a heartbeat writes on the file store, at 1 KB and 1 MB of state."""
    import durable_steps as ds
    from durable_steps._state import frozen_state, mark_stored

    for size, label in ((1024, "1 KB"), (1024 * 1024, "1 MB")):
        with tempfile.TemporaryDirectory() as tmp, ds.FileStore(tmp) as store:
            state = frozen_state({"blob": "x" * size}, "hb")
            cp = store.save(ds.Checkpoint("hb", -1, state, owner="me", lease_expires=1.0))
            mark_stored(state, cp.etag)
            before = _bytes_in(Path(tmp))
            for i in range(10):
                cp = store.save(replace(cp, lease_expires=2.0 + i, updated_at=None))
                mark_stored(state, cp.etag)
            per = (_bytes_in(Path(tmp)) - before) / 10
        row("8", f"heartbeat on FileStore, {label} state: bytes written", f"{per:,.0f} B")


def _bytes_in(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
