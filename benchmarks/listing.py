"""Part 5: listing runs without reading their state (issue 12, item 5), and a save's
cost in a store that holds many runs.

A store is filled with N runs of 50 KB state each (through ``save``; half of them
completed), then listed in a fresh process, twice:

- ``new``: ``store.list_runs()``, iterated (not collected, as a caller streams it);
- ``old``: the full scan that listing used to be, written out here as the baseline:
  FileStore -- read every file under the store's directory and parse the JSON in it
  (a whole file of the old layout; every record of a journal); Cosmos DB --
  ``SELECT * FROM c`` into a list, through the SDK (every head and every segment: a
  run of 50 KB is two items; the runs seen are its heads).

Per listing: wall time; peak memory, as the growth of the process's peak RSS
(``VmHWM``, reset just before) across the listing; bytes transferred -- for FileStore the bytes
read() returned (``rchar``, page cache warm for both), for Cosmos DB the bytes the
server sent, counted by the proxy. The target (DESIGN: "listing transfers no
state"): per run, at most a quarter of the 50 KB state crosses.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import durable_steps as ds
from durable_steps.stores.file import runfile

from .common import KB, Table, io_counters, median, ms, peak_growth, serve, size, text, worker

STATE = 50 * KB


def checkpoint(i: int) -> ds.Checkpoint:
    return ds.Checkpoint(
        f"list-{i:05d}",
        0,
        {"blob": text(i, STATE)},
        steps=("a",),
        workflow="bench",
        status="completed" if i % 2 else "running",
    )


def populate_file(path: str, start: str, count: str) -> int:
    """Worker: runs ``start`` .. ``start + count`` into the FileStore at ``path``."""
    with ds.FileStore(path) as store:
        for i in range(int(start), int(start) + int(count)):
            store.save(checkpoint(i))
    return int(count)


def measure_file(how: str, path: str) -> dict[str, Any]:
    """Worker: one listing of the FileStore at ``path``, new or old."""
    store = ds.FileStore(path)
    before = io_counters()
    with peak_growth() as grew:
        t0 = time.perf_counter()
        if how == "new":
            count = sum(1 for _ in store.list_runs())
        else:
            count = sum(full_scan_file(p) for p in sorted(Path(path).rglob("*")) if p.is_file())
        seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "count": count,
        "memory": grew[0],
        "bytes": io_counters()["rchar"] - before["rchar"],
    }


def full_scan_file(path: Path) -> int:
    """The old listing's work on one file: read it all, parse all of its JSON (one
    document in a file of the old layout; each record's meta and body in a journal,
    via the store's own replay); 1 if the file held a run."""
    data = path.read_bytes()
    if runfile.is_log(data[:1]):
        try:
            return int(bool(runfile.replay(data, path.stem, str(path))[1]))
        except ds.CorruptCheckpointError:
            return 0
    try:
        return int(isinstance(json.loads(data), dict))
    except ValueError:
        return 0


def measure_cosmos(how: str, endpoint: str, container: str) -> dict[str, Any]:
    """Worker: one listing of a cosmos-local container, new or old, through a proxy."""
    from .cosmos import CountingProxy

    proxy = CountingProxy(endpoint)
    if how == "new":
        store = ds.CosmosStore(proxy.endpoint, key=ds_key(), container=container)
    else:
        from azure.cosmos import CosmosClient

        client = CosmosClient(proxy.endpoint, ds_key(), enable_endpoint_discovery=False)
        items = client.get_database_client("durable").get_container_client(container)
        items.read()
    received = proxy.received
    with peak_growth() as grew:
        t0 = time.perf_counter()
        if how == "new":
            count = sum(1 for _ in store.list_runs())
        else:
            query = items.query_items("SELECT * FROM c", enable_cross_partition_query=True)
            count = sum(1 for item in list(query) if "seg" not in item)  # runs: their heads
        seconds = time.perf_counter() - t0
    out = {
        "seconds": seconds,
        "count": count,
        "memory": grew[0],
        "bytes": proxy.received - received,
    }
    proxy.close()
    return out


def ds_key() -> str:
    from durable_steps.testing import EMULATOR_KEY

    return EMULATOR_KEY


def file_listing(table: Table, base: Path, quick: bool) -> None:
    n = 1_000 if quick else 10_000
    path = base / "listing"
    with ThreadPoolExecutor(2) as pool:  # two processes: the machine has two cores
        half = n // 2
        list(pool.map(lambda s: worker("listing", "populate-file", path, s, half), (0, half)))
    report(
        table,
        "FileStore",
        n,
        {how: worker("listing", "measure-file", how, path) for how in ("new", "old")},
    )
    save_scaling(table, base, path, n, quick)


def cosmos_listing(table: Table, endpoint: str, quick: bool) -> None:
    n = 200 if quick else 2_000
    with (
        ds.CosmosStore(
            endpoint, key=ds_key(), container="listing", create_if_missing=True
        ) as store,
        ThreadPoolExecutor(4) as pool,
    ):
        list(pool.map(lambda i: store.save(checkpoint(i)), range(n)))
    got = {
        how: worker("listing", "measure-cosmos", how, endpoint, "listing") for how in ("new", "old")
    }
    report(table, "cosmos-local", n, got)


def report(table: Table, store: str, n: int, got: dict[str, dict[str, Any]]) -> None:
    new, old = got["new"], got["old"]
    for how, r in (("list_runs()", new), ("old full scan", old)):
        table.add(
            "5",
            f"{store}: list {n:,} runs, {how}",
            ms(r["seconds"]),
            note=f"peak memory +{size(r['memory'])}; {size(r['bytes'])} "
            f"{'read' if store == 'FileStore' else 'received'}; {r['count']:,} seen",
        )
    table.judge(
        "5",
        f"{store}: list_runs() transfers no state",
        f"{size(new['bytes'] / max(new['count'], 1))} a run",
        new["bytes"] / max(new["count"], 1) / STATE,
        0.25,
        note=f"vs the 50 KB state; time {new['seconds'] / old['seconds']:.2f}x, "
        f"bytes {new['bytes'] / max(old['bytes'], 1):.2f}x the full scan's",
    )


def save_scaling(table: Table, base: Path, full: Path, n: int, quick: bool) -> None:
    """A 1 KB save in the store holding n runs, against one in an empty store
    (DESIGN: the cost of one save must not grow with the number of runs)."""
    stores = {"empty": ds.FileStore(base / "scaling-empty"), "full": ds.FileStore(full)}
    held = {
        k: s.save(ds.Checkpoint(f"scaling-{k}", 0, {"note": text(1, KB)}, steps=("a",)))
        for k, s in stores.items()
    }
    times: dict[str, list[float]] = {k: [] for k in stores}
    for _ in range(20 if quick else 100):  # interleaved, so drift hits both alike
        for k, s in stores.items():
            t0 = time.perf_counter()
            held[k] = s.save(held[k])
            times[k].append(time.perf_counter() - t0)
    empty, crowded = median(times["empty"]), median(times["full"])
    table.judge(
        "5",
        f"FileStore: 1 KB save among {n:,} runs",
        ms(crowded),
        crowded / empty,
        1.3,
        note=f"vs an empty store: {ms(empty)}",
    )
    for s in stores.values():
        s.close()


if __name__ == "__main__":
    serve(
        {
            "populate-file": populate_file,
            "measure-file": measure_file,
            "measure-cosmos": measure_cosmos,
        }
    )
