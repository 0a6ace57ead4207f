"""Part 13: output streams -- what a chunk costs at chunk 1 and at chunk 10,000
(time; bytes written or sent; requests on Cosmos DB), and how long a chunk takes from
``write_stream`` to a following reader (p50/p99), on FileStore and cosmos-local.

The writer is a real run: one step that writes ``N`` chunks of ~100 bytes with
``write_stream``. Each chunk's time is measured around its ``write_stream``; bytes on
FileStore come from the kernel's counters (``/proc/self/io``), on Cosmos DB from the
counting proxy (``Wire``). The latency run writes chunks while a reader in another
thread follows the stream with ``read_stream``; each chunk carries its write time.

DBOS streams side by side: the same two workloads as a DBOS workflow
(``DBOS.write_stream`` in the workflow, ``DBOS.read_stream`` following it, polling
every 5 ms) on its SQLite system database, in a fresh process (``[bench]`` extra).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import durable_steps as ds

from .common import Table, dbos_on_sqlite, io_counters, ms, serve, size, worker, written

CHUNK = "x" * 100
EDGE = 100
"""Chunks averaged at each end (the first and the last ``EDGE``)."""
PACE = 0.002
"""Seconds between the chunks of the latency runs: a model's pace, not a burst."""
INSTALL = "not installed: pip install -e '.[bench]' (scripts/bench does)"


def _writer(n: int, times: list[float], meter: Any = None, meters: list[Any] | None = None):  # type: ignore[no-untyped-def]
    def step(state: Any) -> None:
        for i in range(n):
            before = meter() if meter is not None else None
            t0 = time.perf_counter()
            ds.write_stream("out", {"i": i, "text": CHUNK, "at": time.time()})
            times.append(time.perf_counter() - t0)
            if meters is not None and meter is not None:
                meters.append((before, meter()))

    return [ds.Step("stream", step)]


def _ends(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values[:EDGE]), statistics.mean(values[-EDGE:])


def per_chunk_file(table: Table, base: Path, quick: bool) -> None:
    n = 1_000 if quick else 10_000
    with ds.FileStore(Path(tempfile.mkdtemp(dir=base)) / "store") as store:
        times: list[float] = []
        io = io_counters()
        ds.run("stream-bench", _writer(n, times), store)
        wrote = written(io, io_counters())
    first, last = _ends(times)
    table.judge(
        "13",
        f"FileStore chunk {n:,} vs chunk 1..{EDGE} (time)",
        f"{ms(first)} → {ms(last)}",
        last / first,
        1.5,
        note=f"{size(wrote.get('write_bytes', 0) / n)} written a chunk (kernel), one append",
    )
    latency(table, "FileStore", store_path=base, quick=quick)
    peers(table, base, quick)


def per_chunk_cosmos(table: Table, endpoint: str, quick: bool) -> None:
    from .cosmos import Wire

    n = 300 if quick else 10_000
    wire = Wire(endpoint, "bench-streams")
    try:
        times: list[float] = []
        meters: list[Any] = []
        ds.run(f"stream-{uuid.uuid4()}", _writer(n, times, wire.meter, meters), wire.store)
        sent = [b["sent"] - a["sent"] for a, b in meters]
        requests = [b["requests"] - a["requests"] for a, b in meters]
        first, last = _ends(times)
        (s1, s2), (r1, r2) = _ends(sent), _ends(requests)
        table.judge(
            "13",
            f"Cosmos chunk {n:,} vs chunk 1..{EDGE} (bytes sent)",
            f"{size(s1)} → {size(s2)}",
            s2 / s1,
            1.5,
            note=f"{r1:.2f} → {r2:.2f} requests a chunk; {ms(first)} → {ms(last)}",
        )
        latency(table, "cosmos-local", store=wire.store, quick=quick)
    finally:
        wire.close()


def latency(
    table: Table,
    label: str,
    *,
    store: ds.Store | None = None,
    store_path: Path | None = None,
    quick: bool,
) -> None:
    """Writer-to-reader latency of a following reader, p50 and p99."""
    own = store is None
    if store is None:
        assert store_path is not None
        store = ds.FileStore(Path(tempfile.mkdtemp(dir=store_path)) / "store")
    n = 100 if quick else 1_000
    run_id = f"latency-{uuid.uuid4()}"
    store.save(ds.Checkpoint(run_id, -1, {}))
    lags: list[float] = []

    def follow() -> None:
        for _, chunk in ds.read_stream(
            store, run_id, "out", wait=True, interval=0.005, max_interval=0.02
        ):
            lags.append(time.time() - chunk["at"])

    reader = threading.Thread(target=follow)
    reader.start()

    def step(state: Any) -> None:
        for i in range(n):
            ds.write_stream("out", {"i": i, "at": time.time()})
            time.sleep(PACE)  # a model's pace between tokens, not a burst

    ds.run(run_id, [ds.Step("s", step)], store)
    reader.join(120)
    if own:
        store.close()
    q = statistics.quantiles(lags, n=100)
    table.add(
        "13",
        f"{label}: write_stream → following reader, p50 / p99",
        f"{ms(q[49])} / {ms(q[98])}",
        note=f"{len(lags)} chunks; reader polls every 5-20 ms",
    )


def peers(table: Table, base: Path, quick: bool) -> None:
    """The same per-chunk and latency workloads on DBOS streams (SQLite), side by side."""
    n, lat = (250, 100) if quick else (10_000, 1_000)
    path = Path(tempfile.mkdtemp(dir=base))
    got = worker("streams", "dbos", path, n, lat)
    if "missing" in got:
        table.add("13", "DBOS streams (SQLite), the same workload", "-", note=got["missing"])
        return
    table.add(
        "13",
        f"DBOS streams (SQLite): chunk {n:,} vs chunk 1..{EDGE} (time)",
        f"{ms(got['first'])} → {ms(got['last'])}",
        note=f"{size(got['written'] / n)} written a chunk (kernel); write_stream in a workflow",
    )
    table.add(
        "13",
        "DBOS streams (SQLite): write_stream → following reader, p50 / p99",
        f"{ms(got['p50'])} / {ms(got['p99'])}",
        note=f"{got['chunks']} chunks; DBOS.read_stream polls every 5 ms",
    )


def dbos(path: str, n: str, lat: str) -> dict[str, Any]:
    """Both workloads as DBOS workflows on SQLite (run in a process of its own)."""
    try:
        from dbos import DBOS, SetWorkflowID
    except ImportError:
        return {"missing": INSTALL}

    dbos_on_sqlite("bench-streams", path)
    times: list[float] = []

    @DBOS.workflow()
    def chunks(count: int) -> None:
        for i in range(count):
            t0 = time.perf_counter()
            DBOS.write_stream("out", {"i": i, "text": CHUNK, "at": time.time()})
            times.append(time.perf_counter() - t0)

    @DBOS.workflow()
    def paced(count: int) -> None:
        for i in range(count):
            DBOS.write_stream("out", {"i": i, "at": time.time()})
            time.sleep(PACE)
        DBOS.close_stream("out")

    DBOS.launch()
    try:
        with SetWorkflowID("warm-up"):
            chunks(5)
        times.clear()
        io = io_counters()
        with SetWorkflowID("chunks"):
            chunks(int(n))
        wrote = written(io, io_counters())
        with SetWorkflowID("latency"):
            DBOS.start_workflow(paced, int(lat))
        lags = [
            time.time() - value["at"]
            for value in DBOS.read_stream("latency", "out", polling_interval_sec=0.005)
        ]
    finally:
        DBOS.destroy()
    first, last = _ends(times)
    q = statistics.quantiles(lags, n=100)
    return {
        "first": first,
        "last": last,
        "written": wrote["write_bytes"],
        "p50": q[49],
        "p99": q[98],
        "chunks": len(lags),
    }


if __name__ == "__main__" and len(sys.argv) > 1:
    serve({"dbos": dbos})
