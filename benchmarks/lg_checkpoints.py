"""Part 18: LangGraph checkpoints, ``DurableSaver`` against the peers, in one run.

The workload is a real LangGraph graph: one node that loops (as an agent's does), each
superstep adding one 5 KB message to a ``messages`` channel (``operator.add``, the way
agents keep a conversation), 200 supersteps to 1 MB (``--quick``: 40, to 200 KB),
invoked with ``durability="sync"`` (a superstep's checkpoint stored before the next
starts: LangGraph's durable mode).

- On the same cosmos-local server: ours (``DurableSaver`` on ``CosmosStore``) against
  ``langchain-azure-cosmosdb``'s ``CosmosDBSaverSync`` (Microsoft's, in ``[dev]``).
  Metered per superstep (the task's ``put_writes`` and the checkpoint's ``put``): the
  bytes the client sent (a counting proxy in front of the server, headers included),
  and the request units estimated from Microsoft's RU-per-item-size table for every
  item written (ours: the counting transport; theirs: each upsert/create's body).
- On files: the time a superstep takes, ours on ``FileStore`` against
  ``langgraph-checkpoint-sqlite``'s ``SqliteSaver`` (its defaults: one SQLite file,
  a commit per write).

Not judged against a target: a comparison, and the numbers of docs/performance.md.
"""

from __future__ import annotations

import base64
import json
import operator
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from .common import Table, ms, size, text
from .cosmos import CountingProxy, Wire, estimated_ru

GROWTH = 5_000
"""Characters each superstep adds."""
INSTALL = "pip install -e '.[dev]' (langgraph, langchain-azure-cosmosdb, SqliteSaver)"


def sealing() -> Any:
    """The codec of ``DURABLE_CODEC=zstd,aes256gcm``, a fresh key."""
    from durable_steps.seam.codec import Compression, Keyring, ValueCodec

    key = base64.b64encode(os.urandom(32))
    return ValueCodec(compression=Compression(), keys=Keyring("bench", {"bench": key}))


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]


def _graph(saver: Any, supersteps: int) -> Any:
    """One node that loops, as an agent's does: each superstep adds a message."""
    from langgraph.graph import END, START, StateGraph

    def grow(state: Chat) -> dict[str, Any]:
        return {"messages": [text(len(state["messages"]), GROWTH)]}

    builder = StateGraph(Chat)
    builder.add_node("grow", grow)
    builder.add_edge(START, "grow")
    builder.add_conditional_edges(
        "grow", lambda s: END if len(s["messages"]) >= supersteps else "grow", ["grow", END]
    )
    return builder.compile(checkpointer=saver)


def _invoke(graph: Any, supersteps: int) -> None:
    config = {
        "configurable": {"thread_id": f"t-{uuid.uuid4()}"},
        "recursion_limit": supersteps + 10,
    }
    graph.invoke({"messages": []}, config, durability="sync")


def _metered(
    saver: Any, meter: Callable[[], dict[str, float]]
) -> tuple[Any, list[dict[str, float]]]:
    """``saver`` behind a saver that meters each superstep: what its writes and its
    checkpoint cost, from the meter's change since the previous checkpoint."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    steps: list[dict[str, float]] = []
    mark = [meter()]

    class Metered(BaseCheckpointSaver):  # type: ignore[type-arg,misc]
        def get_tuple(self, config: Any) -> Any:
            return saver.get_tuple(config)

        def list(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            return saver.list(*args, **kwargs)  # type: ignore[no-any-return]

        def put_writes(self, *args: Any, **kwargs: Any) -> None:
            saver.put_writes(*args, **kwargs)

        def put(self, *args: Any, **kwargs: Any) -> Any:
            stored = saver.put(*args, **kwargs)
            now = meter()
            steps.append({k: now[k] - mark[0][k] for k in ("sent", "ru")})
            mark[0] = now
            return stored

        def get_next_version(self, current: Any, channel: Any) -> Any:
            return saver.get_next_version(current, channel)

    return Metered(), steps


def langgraph_cosmos(table: Table, endpoint: str, quick: bool) -> None:
    try:
        from langchain_azure_cosmosdb import CosmosDBSaverSync

        from durable_steps.integrations.langgraph import DurableSaver
    except ImportError:
        table.add("18", "LangGraph checkpoints on Cosmos DB", "n/a", note=INSTALL)
        return
    supersteps = 40 if quick else 200

    wire = Wire(endpoint, "bench-lg")
    try:
        saver, ours = _metered(DurableSaver(wire.store), lambda: _of(wire.meter()))
        _invoke(_graph(saver, supersteps), supersteps)
    finally:
        wire.close()
    # The same run on a store with DURABLE_CODEC=zstd,aes256gcm: every record sealed.
    aes = Wire(endpoint, "bench-lg-aes", codec=sealing())
    try:
        saver, sealed = _metered(DurableSaver(aes.store), lambda: _of(aes.meter()))
        _invoke(_graph(saver, supersteps), supersteps)
    finally:
        aes.close()

    from durable_steps.testing import EMULATOR_KEY

    proxy = CountingProxy(endpoint)
    ru = [0.0]
    try:
        peer = CosmosDBSaverSync(
            "bench",
            "bench-lg-theirs",
            endpoint=proxy.endpoint,
            key=EMULATOR_KEY,
            cosmos_client_kwargs={"enable_endpoint_discovery": False},
        )
        for method in ("upsert_item", "create_item"):
            write = getattr(peer.container, method)

            def counted(body: dict[str, Any], *a: Any, _write: Any = write, **kw: Any) -> Any:
                ru[0] += estimated_ru(len(json.dumps(body).encode()))
                return _write(body, *a, **kw)

            setattr(peer.container, method, counted)
        saver, theirs = _metered(peer, lambda: {"sent": proxy.sent, "ru": ru[0]})
        _invoke(_graph(saver, supersteps), supersteps)
        peer.close()
    finally:
        proxy.close()

    grown = size(GROWTH * supersteps)
    for who, steps in (("DurableSaver", ours), ("langchain-azure-cosmosdb", theirs)):
        last = steps[-1]
        table.add(
            "18",
            f"LangGraph {who}: sent a superstep, 1 / {len(steps) - 1}",
            f"{size(steps[1]['sent'])} / {size(last['sent'])}",
            note=f"est. {steps[1]['ru']:.1f} / {last['ru']:.1f} RU",
        )
        table.add(
            "18",
            f"LangGraph {who}: a run of {supersteps} supersteps to {grown}",
            f"{size(sum(s['sent'] for s in steps))} sent",
            note=f"est. {sum(s['ru'] for s in steps):,.0f} RU",
        )
    table.add(
        "18",
        f"LangGraph DurableSaver, zstd+aes256gcm: sent a superstep, 1 / {len(sealed) - 1}",
        f"{size(sealed[1]['sent'])} / {size(sealed[-1]['sent'])}",
        note=f"a run: {size(sum(s['sent'] for s in sealed))} sent, "
        f"{sum(s['sent'] for s in sealed) / max(1, sum(s['sent'] for s in ours)):.2f}x plain",
    )
    ratio = sum(s["sent"] for s in theirs) / max(1, sum(s["sent"] for s in ours))
    ru_ratio = sum(s["ru"] for s in theirs) / max(1e-9, sum(s["ru"] for s in ours))
    table.add(
        "18", "LangGraph bytes sent per run: theirs / ours", f"{ratio:.0f}x",
        note=f"estimated RU per run: {ru_ratio:.0f}x",
    )  # fmt: skip


def _of(meter: dict[str, Any]) -> dict[str, float]:
    return {"sent": float(meter["sent"]), "ru": float(meter["ru"])}


def langgraph_files(table: Table, base: Path, quick: bool) -> None:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver

        import durable_steps as ds
        from durable_steps.integrations.langgraph import DurableSaver
    except ImportError:
        table.add("18", "LangGraph checkpoints on files", "n/a", note=INSTALL)
        return
    supersteps = 40 if quick else 200
    where = base / f"lg-{uuid.uuid4().hex[:8]}"
    where.mkdir(parents=True)
    timings = {}
    with ds.FileStore(where / "store") as store:
        _invoke(_graph(DurableSaver(store), 3), 3)  # warm-up: imports, first files
        t0 = time.perf_counter()
        _invoke(_graph(DurableSaver(store), supersteps), supersteps)
        timings["DurableSaver on FileStore"] = (time.perf_counter() - t0) / supersteps
    conn = sqlite3.connect(where / "lg.sqlite", check_same_thread=False)
    try:
        _invoke(_graph(SqliteSaver(conn), 3), 3)
        t0 = time.perf_counter()
        _invoke(_graph(SqliteSaver(conn), supersteps), supersteps)
        timings["SqliteSaver"] = (time.perf_counter() - t0) / supersteps
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        conn.close()
    for who, seconds in timings.items():
        note = f"SQLite journal_mode={mode}, synchronous={sync}" if who == "SqliteSaver" else ""
        table.add("18", f"LangGraph {who}: a superstep, 5 KB to {size(GROWTH * supersteps)}",
                  ms(seconds), note=note)  # fmt: skip
    ratio = timings["SqliteSaver"] / timings["DurableSaver on FileStore"]
    table.add("18", "LangGraph time per superstep: SqliteSaver / DurableSaver", f"{ratio:.2f}x")
