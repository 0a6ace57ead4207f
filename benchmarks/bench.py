"""What a checkpoint costs: durable-steps against the disk's floor, the single-file
layout, Cosmos DB round trips, asyncio, and the peers users would pick instead.

    scripts/bench [--quick] [--dir PATH]

Everything runs in one process tree in one go, so ratios hold on a noisy machine.
Latencies are medians of repeated measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import operator
import os
import platform
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, TypedDict

from rich.console import Console
from rich.table import Table

import durable_steps as ds
from durable_steps._file import atomic_write
from durable_steps._store import dumps, to_document

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.servers import EMULATOR_KEY, start_cosmosdb_server, stop

out = Console(highlight=False, width=130)
log = Console(stderr=True, highlight=False)
STEPS = 20
rows: list[tuple[str, str, str, str]] = []


def row(part: str, what: str, value: str, note: str = "") -> None:
    rows.append((part, what, value, note))
    log.print(f"  {part:<4} {what:<58} {value:>14}  {note}")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def workflow(n: int = STEPS) -> list[ds.Step]:
    """n trivial steps whose state grows by ~50 bytes each (about 1 KB at the end)."""
    return [ds.Step(f"step-{i:02d}", lambda s, i=i: {f"k{i:02d}": "x" * 40}) for i in range(n)]


# -- 1. per-step overhead against the fsync floor ---------------------------------------


def part1(base: Path, repeat: int) -> float:
    log.rule("1. per-step overhead of run() on FileStore vs the durable-write floor")
    store = ds.FileStore(base / "p1")
    per_step = median_time(lambda: ds.run(f"r-{secrets.token_hex(4)}", workflow(), store), repeat)
    per_step /= STEPS
    payloads = []
    cp = ds.Checkpoint("floor", -1, {})
    for i in range(STEPS):
        cp = replace(
            cp,
            step=i,
            steps=(*cp.steps, f"step-{i:02d}"),
            state={**cp.state, f"k{i:02d}": "x" * 40},
        )
        payloads.append(dumps(to_document(cp, etag="e" * 24)))
    target = base / "p1-floor" / "f.json"
    target.parent.mkdir()

    def floor() -> None:
        for data in payloads:
            atomic_write(target, data)  # write + fsync(file) + rename + fsync(dir)

    floor_per_write = median_time(floor, repeat) / STEPS
    row("1", "run() per step, FileStore (20 trivial steps, ~1 KB state)", ms(per_step))
    row("1", "floor: write+fsync+rename+fsync(dir) of the same bytes", ms(floor_per_write))
    row("1", "ratio run() step : floor", f"{per_step / floor_per_write:.2f}x", "target ≤ 1.5x")
    return per_step


# -- 2. scaling with the number of runs ---------------------------------------------------


class SingleFileStore:
    """The baseline: one JSON map of every run, rewritten (atomically, fsynced) per save."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def save(self, cp: ds.Checkpoint) -> ds.Checkpoint:
        runs = json.loads(self.path.read_bytes()) if self.path.exists() else {}
        current = runs.get(cp.run_id, {}).get("etag")
        if current != cp.etag:
            raise ds.ConflictError("stale", run_id=cp.run_id)
        etag = secrets.token_hex(12)
        runs[cp.run_id] = to_document(cp, etag=etag)
        atomic_write(self.path, dumps(runs))
        return replace(cp, etag=etag)


def part2(base: Path, repeat: int) -> None:
    log.rule("2. save latency vs number of runs in the store")
    state = {"k": "x" * 1000}
    cases: dict[tuple[str, int], tuple[Any, list[ds.Checkpoint], list[float]]] = {}
    for n in (10, 1000, 10_000):
        fs = ds.FileStore(base / f"p2-{n}")
        for i in range(n):  # populate directly: the other runs only have to exist
            doc = to_document(ds.Checkpoint(f"other-{i}", 0, state, steps=("a",)), etag="e")
            fs.file_for(f"other-{i}").write_bytes(dumps(doc))
        single = SingleFileStore(base / f"p2-{n}.json")
        single.path.write_bytes(
            dumps(
                {
                    f"other-{i}": to_document(
                        ds.Checkpoint(f"other-{i}", 0, state, steps=("a",)), etag="e"
                    )
                    for i in range(n)
                }
            )
        )
        for name, store in (("FileStore", fs), ("single file", single)):
            cases[name, n] = (
                store,
                [store.save(ds.Checkpoint("mine", 0, state, steps=("a",)))],
                [],
            )
    for _ in range(repeat):  # interleaved, so drift on the machine hits every case alike
        for store, holder, times in cases.values():
            t0 = time.perf_counter()
            holder[0] = store.save(holder[0])
            times.append(time.perf_counter() - t0)
    results: dict[str, dict[int, float]] = {"FileStore": {}, "single file": {}}
    for (name, n), (_, _, times) in cases.items():
        results[name][n] = statistics.median(times)
        row("2", f"{name}: one save with {n:,} other runs", ms(results[name][n]))
    for name, r in results.items():
        target = "target ≤ 1.3x" if name == "FileStore" else ""
        row("2", f"{name}: ratio 10,000 : 10 runs", f"{r[10_000] / r[10]:.2f}x", target)


# -- 3. scaling with state size -----------------------------------------------------------


def part3(base: Path, repeat: int) -> None:
    log.rule("3. save latency vs state size")
    store = ds.FileStore(base / "p3")
    for label, size in (("1 KB", 1024), ("100 KB", 100 * 1024), ("1 MB", 1024 * 1024)):
        holder = [store.save(ds.Checkpoint(f"s-{size}", 0, {"blob": "x" * size}, steps=("a",)))]

        def save(holder: list[ds.Checkpoint] = holder) -> None:
            holder[0] = store.save(holder[0])

        row("3", f"FileStore save, {label} state", ms(median_time(save, repeat)))


# -- 4. concurrency -------------------------------------------------------------------------


def _saver(path: str, worker: int, go: Any, stop_at: Any, counts: Any) -> None:
    store = ds.FileStore(path)
    go.wait()
    n, i = 0, 0
    cp = None
    while time.time() < stop_at.value:
        if cp is None or cp.step >= 19:
            i += 1
            cp = store.save(ds.Checkpoint(f"w{worker}-{i}", -1, {}))
        cp = store.save(
            replace(
                cp,
                step=cp.step + 1,
                steps=(*cp.steps, f"s{cp.step + 1}"),
                state={**cp.state, f"k{cp.step + 1}": "x" * 40},
            )
        )
        n += 1
    counts[worker] = n


def part4(base: Path, seconds: float) -> None:
    log.rule("4. throughput of processes checkpointing different runs into one FileStore")
    ctx = mp.get_context("spawn")
    single = 0.0
    for procs in (1, 2, 4):
        go, stop_at, counts = ctx.Event(), ctx.Value("d", 0.0), ctx.Array("i", procs)
        workers = [
            ctx.Process(target=_saver, args=(str(base / "p4"), w, go, stop_at, counts))
            for w in range(procs)
        ]
        for w in workers:
            w.start()
        time.sleep(1.0)  # let them import and open the store
        stop_at.value = time.time() + seconds
        go.set()
        for w in workers:
            w.join()
        rate = sum(counts) / seconds
        single = single or rate
        row(
            "4",
            f"{procs} process(es), saves per second (all together)",
            f"{rate:,.0f}/s",
            f"{rate / single:.2f}x of 1 process",
        )


# -- 5. CosmosStore against cosmos-local ------------------------------------------------------


def part5(repeat: int) -> None:
    log.rule("5. CosmosStore against the local Cosmos DB protocol server (HTTP, loopback)")
    from azure.core.pipeline.transport import RequestsTransport

    class Counting(RequestsTransport):  # type: ignore[misc]
        requests = 0
        charge = 0.0
        charged = False

        def send(self, request: Any, **kwargs: Any) -> Any:
            Counting.requests += 1
            response = super().send(request, **kwargs)
            if "x-ms-request-charge" in response.headers:
                Counting.charged = True
                Counting.charge += float(response.headers["x-ms-request-charge"])
            return response

    proc, endpoint = start_cosmosdb_server()
    try:
        store = ds.CosmosStore(
            endpoint, key=EMULATOR_KEY, create_if_missing=True, transport=Counting()
        )
        run_id = f"bench-{secrets.token_hex(4)}"
        Counting.requests, Counting.charge = 0, 0.0
        cp = store.save(ds.Checkpoint(run_id, -1, {}))
        for i in range(50):
            cp = store.save(replace(cp, step=i, steps=(*cp.steps, f"s{i}"), state={"i": i}))
        row(
            "5",
            "HTTP requests per save (51 saves)",
            f"{Counting.requests / 51:.2f}",
            "target exactly 1",
        )
        Counting.requests = 0
        for _ in range(50):
            store.load(run_id)
        row(
            "5",
            "HTTP requests per load (50 loads)",
            f"{Counting.requests / 50:.2f}",
            "target exactly 1",
        )
        Counting.requests, Counting.charge = 0, 0.0
        per_step = (
            median_time(lambda: ds.run(f"bench-{secrets.token_hex(4)}", workflow(), store), repeat)
            / STEPS
        )
        row("5", "run() per step on cosmos-local (20 steps)", ms(per_step))
        row(
            "5",
            "request charge per request, as the server reports it",
            f"{Counting.charge / Counting.requests:.2f} RU" if Counting.charged else "n/a",
            "the local server's figure, not Azure's"
            if Counting.charged
            else "the server reports no charge",
        )
        store.close()
        part5_async(endpoint, 0)
        part5_async(endpoint, 0.01)
    finally:
        stop(proc)


def latency_proxy(endpoint: str, delay: float) -> tuple[str, Callable[[], None]]:
    """A loopback TCP proxy that holds each request for ``delay`` seconds: a stand-in
    for the network round trip to a real Cosmos DB account."""
    host, port = endpoint.removeprefix("http://").rstrip("/").split(":")
    loop = asyncio.new_event_loop()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wait: float) -> None:
        while data := await reader.read(65536):
            if wait:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(cr, sw, delay), pipe(sr, cw, 0), return_exceptions=True)

    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def close() -> None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        server.close()
        loop.close()

    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/", close


def part5_async(endpoint: str, latency: float, runs: int = 100, steps: int = 5) -> None:
    if latency:
        endpoint, close = latency_proxy(endpoint, latency)
    label = f", +{latency * 1000:.0f} ms per request" if latency else ""

    def wf(i: int) -> list[ds.Step]:
        return [ds.Step(f"s{j}", lambda s, j=j: {f"k{j}": i}) for j in range(steps)]

    tag = secrets.token_hex(3)
    with ds.CosmosStore(endpoint, key=EMULATOR_KEY) as store:
        t0 = time.perf_counter()
        for i in range(runs):
            ds.run(f"seq-{tag}-{i}", wf(i), store)
        sequential = time.perf_counter() - t0

    async def concurrent() -> float:
        async with ds.AsyncCosmosStore(endpoint, key=EMULATOR_KEY) as astore:
            await astore.load("warm-up")
            t0 = time.perf_counter()
            await asyncio.gather(
                *(ds.run_async(f"aio-{tag}-{i}", wf(i), astore) for i in range(runs))
            )
            return time.perf_counter() - t0

    together = asyncio.run(concurrent())
    if latency:
        close()
    row("5a", f"{runs} runs x {steps} steps, sync, one after another{label}", f"{sequential:.2f} s")
    row(
        "5a",
        f"{runs} runs x {steps} steps, async, asyncio.gather{label}",
        f"{together:.2f} s",
        f"{sequential / together:.1f}x faster",
    )


# -- 6. peers -------------------------------------------------------------------------------


def part6(base: Path, repeat: int, ours: float) -> None:
    log.rule("6. the same 20-step workflow in the peers (per-step overhead)")
    row("6", "durable-steps, FileStore (fsync per step)", ms(ours))
    try:
        row("6", "DBOS, SQLite system database (fsync per commit)", ms(_dbos(base, repeat)))
    except ImportError:
        row("6", "DBOS", "not installed", "pip install -e '.[bench]'")
    try:
        for durability in ("sync", "async"):
            note = (
                "equal durability"
                if durability == "sync"
                else "langgraph's default: may lose the last step"
            )
            row(
                "6",
                f"LangGraph, SqliteSaver, durability={durability!r}",
                ms(_langgraph(base, repeat, durability)),
                note,
            )
    except ImportError:
        row("6", "LangGraph", "not installed", "pip install -e '.[bench]'")


def _dbos(base: Path, repeat: int) -> float:
    from dbos import DBOS, SetWorkflowID

    DBOS(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{base / 'dbos.sqlite'}",
            "run_admin_server": False,
            "log_level": "ERROR",
        }
    )

    @DBOS.step()
    def step(i: int) -> str:
        return "x" * 40

    @DBOS.workflow()
    def wf() -> dict[str, str]:
        return {f"k{i:02d}": step(i) for i in range(STEPS)}

    DBOS.launch()
    try:

        def once() -> None:
            with SetWorkflowID(f"wf-{secrets.token_hex(6)}"):
                wf()

        once()
        return median_time(once, repeat) / STEPS
    finally:
        DBOS.destroy()


class GraphState(TypedDict):
    data: Annotated[dict[str, str], operator.or_]


def _langgraph(base: Path, repeat: int, durability: str) -> float:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(GraphState)
    names = [f"step-{i:02d}" for i in range(STEPS)]
    for i, name in enumerate(names):
        graph.add_node(name, lambda s, i=i: {"data": {f"k{i:02d}": "x" * 40}})
    for a, b in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(a, b)
    conn = sqlite3.connect(base / f"lg-{durability}.sqlite", check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(conn))

    def once() -> None:
        app.invoke(
            {"data": {}},
            {"configurable": {"thread_id": secrets.token_hex(6)}},
            durability=durability,
        )

    once()
    try:
        return median_time(once, repeat) / STEPS
    finally:
        conn.close()


# -- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--dir", help="where to write (default: a temp dir; same disk matters)")
    args = parser.parse_args()
    repeat = 5 if args.quick else 25
    base = Path(tempfile.mkdtemp(prefix="durable-bench-", dir=args.dir))
    t0 = time.time()
    ours = part1(base, repeat)
    part2(base, repeat * 4)
    part3(base, repeat)
    part4(base, 1.0 if args.quick else 3.0)
    part5(max(3, repeat // 3))
    part6(base, max(3, repeat // 3), ours)

    table = Table(
        title=f"durable-steps {ds.__version__} benchmarks — {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {time.time() - t0:.0f} s",
        title_justify="left",
    )
    for col in ("part", "measurement", "value", "note"):
        table.add_column(col, justify="right" if col == "value" else "left")
    for r in rows:
        table.add_row(*r)
    out.print(table)


if __name__ == "__main__":
    main()
