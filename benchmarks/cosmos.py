"""Part 4: CosmosStore on the wire, against cosmos-local: the real ``azure-cosmos`` SDK
over HTTP to ``@vercel/cosmosdb-server``, started as the tests start it -- or, when
``COSMOS_ENDPOINT`` names a live account (with ``COSMOS_KEY``), against that account,
whose measured ``x-ms-request-charge`` is then shown beside the estimate.

Two meters, neither of which looks inside the store:

- ``CountingProxy``: a loopback TCP proxy between the SDK and the server that counts
  every byte each way (headers included: what a network would carry). A call's
  bytes are the counters' change across it. (Against a live account the bytes are
  the transport's: request bodies plus their headers, no TLS.)
- ``CountingTransport``: the SDK's own HTTP transport, recording each request: method,
  path, ``Prefer`` header (``return=minimal`` asks the service not to echo a written
  item; a query, a POST, is logged as ``QUERY``), the size of the item it writes, and
  the answer's ``x-ms-request-charge``.
  ``GET /`` is the SDK's account refresh, a background request no save makes; it is
  counted apart.

Request charge, estimated from Microsoft's table of the RU a write costs by item size
("Request units in Azure Cosmos DB", the per-operation cost table; FACTS.md: 1 KB 4.95,
8 KB 7.04, 64 KB 22.67, 128 KB 48.19, 256 KB 98.29, 512 KB 184.57, 1 MB 625, 2 MB
1,250), interpolated linearly, for every item written: a create, a replace, a patch
(billed as a write of the whole item) and a delete (counted as a write of the item's
size). Reads and queries are not in the estimate.

Measured, on both growing workloads (``growing``: 200 steps each adding 5 KB, as new
keys or as one extended list) in the container layout the store creates (partition
key /run: a head and segments) and, for comparison, in the earlier layout (/id: the
whole state per save): requests, bytes and estimated RU per save (ordinary saves, and
folds apart with their deletes) and per run; requests per load of the finished 1 MB
run; the agent loop (one step, 500 ``call``s each returning 2 KB): requests and bytes
per call; and a heartbeat's bytes at 1 KB and 1 MB of state.
The npm server itself ignores ``Prefer: return=minimal`` (FACTS); the wrapper around it
(``durable_steps.devtools.cosmos_server``) honours it as the service does, so the bytes
received show what the store asks for.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import durable_steps as ds
from durable_steps.seam.codec import ValueCodec
from durable_steps.testing import EMULATOR_KEY

from .common import ROOT, Call, Metered, StepClock, Table, size, text
from .growing import SHOWN, VARIANTS, initial, workflow
from .runner_parts import BEAT_SIZES, beats, judge_beats, mean

RU_TABLE = ((1, 4.95), (8, 7.04), (64, 22.67), (128, 48.19), (256, 98.29), (512, 184.57),
            (1024, 625.0), (2048, 1250.0))  # fmt: skip
"""Microsoft's RU of a write by item size (KB, RU)."""
CALLS = 500
CALL_RESULT = 2048
CALLS_SHOWN = (1, 250, 500)


def estimated_ru(item_bytes: float) -> float:
    """The RU of writing an item of ``item_bytes``, from ``RU_TABLE`` (linear between its
    sizes; at least the 1 KB write; beyond 2 MB in proportion)."""
    kb = item_bytes / 1024
    if kb <= RU_TABLE[0][0]:
        return RU_TABLE[0][1]
    for (a, ra), (b, rb) in itertools.pairwise(RU_TABLE):
        if kb <= b:
            return ra + (rb - ra) * (kb - a) / (b - a)
    return RU_TABLE[-1][1] * kb / RU_TABLE[-1][0]


@contextmanager
def server() -> Iterator[str]:
    """cosmos-local on a free loopback port, resolved from this repository's
    node_modules; yields its endpoint."""
    # The starter the tests and `durable-steps dev cosmos-server` use (the 404 fix for
    # missing items, exit when stdin closes), so the benchmark runs the same server.
    from durable_steps.devtools.cosmos_server import start_cosmosdb_server, stop

    proc, endpoint = start_cosmosdb_server(ROOT)
    SERVERS[endpoint] = proc.pid
    try:
        yield endpoint
    finally:
        del SERVERS[endpoint]
        stop(proc)


SERVERS: dict[str, int] = {}
"""The process id of each cosmos-local server running, by endpoint: parts that show the
server's own CPU time read it (``cpu_seconds``)."""


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from ``/proc``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CountingProxy:
    """A loopback TCP proxy that counts the bytes it forwards each way."""

    def __init__(self, endpoint: str) -> None:
        host, port = endpoint.removeprefix("http://").rstrip("/").split(":")
        self.sent = self.received = 0
        self._loop = asyncio.new_event_loop()

        async def pipe(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool
        ) -> None:
            while data := await reader.read(1 << 16):
                if upstream:
                    self.sent += len(data)
                else:
                    self.received += len(data)
                writer.write(data)
                await writer.drain()
            writer.close()

        async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
            try:
                sr, sw = await asyncio.open_connection(host, int(port))
                await asyncio.gather(
                    pipe(cr, sw, True), pipe(sr, cw, False), return_exceptions=True
                )
            except asyncio.CancelledError:  # close(): ends as a connection that closed, so
                cw.close()  # asyncio's server does not log the cancelled task as an error

        self._server = self._loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/"

    def close(self) -> None:
        """Stop, ending the connections still open: the server keeps them alive (as the
        service does), so their pipes are pending; cancelled and awaited here, they do not
        die with the loop ("Task was destroyed but it is pending")."""

        async def shut() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def counting_transport() -> Any:
    from azure.core.pipeline.transport import RequestsTransport

    class CountingTransport(RequestsTransport):  # type: ignore[misc]
        """Logs each request and keeps running totals (``totals``) for ``Metered``."""

        def __init__(self) -> None:
            super().__init__()
            self.log: list[tuple[str, str, str]] = []
            self.items: dict[str, int] = {}  # item id -> bytes last written
            self.totals = {"ru": 0.0, "charge": 0.0, "queries": 0, "deletes": 0, "bytes": 0}
            self._lock = threading.Lock()

        def send(self, request: Any, **kwargs: Any) -> Any:
            path = "/" + request.url.split("://", 1)[-1].partition("/")[2]
            body = request.body or b""
            body = body.encode() if isinstance(body, str) else bytes(body)
            response = super().send(request, **kwargs)
            charge = float(response.headers.get("x-ms-request-charge") or 0)
            query = bool(request.headers.get("x-ms-documentdb-isquery"))
            with self._lock:
                method = "QUERY" if query else request.method
                self.log.append((method, path, request.headers.get("Prefer", "")))
                self._count(request, path, body, charge)
            return response

        def _count(self, request: Any, path: str, body: bytes, charge: float) -> None:
            t = self.totals
            t["charge"] += charge
            t["bytes"] += len(body) + sum(len(k) + len(v) + 4 for k, v in request.headers.items())
            if "/docs" not in path:
                return
            doc = path.rsplit("/docs/", 1)[-1] if "/docs/" in path else None
            if request.headers.get("x-ms-documentdb-isquery"):
                t["queries"] += 1
            elif request.method == "POST" and body:
                self.items[json.loads(body)["id"]] = len(body)
                t["ru"] += estimated_ru(len(body))
            elif request.method == "PUT" and doc:
                self.items[doc] = len(body)
                t["ru"] += estimated_ru(len(body))
            elif request.method in ("PATCH", "DELETE") and doc:
                t["ru"] += estimated_ru(self.items.get(doc, 1024))  # a patch bills the item
                t["deletes"] += request.method == "DELETE"

    return CountingTransport()


class Wire:
    """A CosmosStore behind the counting proxy (or on a live account), and the meter
    for ``Metered``."""

    def __init__(
        self,
        endpoint: str,
        container: str,
        *,
        partition_key: str | None = None,
        codec: ValueCodec | None = None,
        history: str = "steps",
    ) -> None:
        live = os.environ.get("COSMOS_ENDPOINT")
        self.live = bool(live)
        key = os.environ.get("COSMOS_KEY") if live else EMULATOR_KEY
        self.proxy = None if live else CountingProxy(endpoint)
        url = live or (self.proxy.endpoint if self.proxy else endpoint)
        database = os.environ.get("COSMOS_DATABASE", "durable") if live else "bench"
        if partition_key is not None:
            _create(url, key, database, container, partition_key)
        self.transport = counting_transport()
        self.store = ds.CosmosStore(
            url,
            key=key,
            database=database,
            container=container,
            create_if_missing=partition_key is None,
            transport=self.transport,
            codec=codec,
            history=history,  # the store's default; part 11 (benchmarks/history.py) compares
        )

    def meter(self) -> dict[str, Any]:
        log = self.transport.log
        refreshes = sum(1 for method, path, _ in log if (method, path) == ("GET", "/"))
        sent = self.proxy.sent if self.proxy else self.transport.totals["bytes"]
        return {
            "sent": sent,
            "received": self.proxy.received if self.proxy else 0,
            "requests": len(log) - refreshes,
            "refreshes": refreshes,
            **self.transport.totals,
        }

    def close(self) -> None:
        self.store.close()
        if self.proxy is not None:
            self.proxy.close()


def _create(url: str, key: Any, database: str, container: str, path: str) -> None:
    """A container of the earlier layout, made as earlier versions' infra/ made it."""
    from azure.cosmos import CosmosClient, PartitionKey

    with CosmosClient(url, credential=key, enable_endpoint_discovery=False) as client:
        db = client.create_database_if_not_exists(database)
        db.create_container_if_not_exists(container, partition_key=PartitionKey(path=path))


def cosmos(table: Table, endpoint: str, quick: bool) -> None:
    wire = Wire(endpoint, "bench")
    try:
        for variant in VARIANTS:
            growing(table, wire, variant, "")
        earlier = Wire(endpoint, "bench-id", partition_key="/id")
        try:
            growing(table, earlier, "keys", " (earlier /id layout)")
        finally:
            earlier.close()
        loads(table, wire, 10 if quick else 50)
        agent_loop(table, wire)
        per_beat = {}
        for label, n in BEAT_SIZES:
            calls = beats(wire.store, wire.meter, n)
            per_beat[n] = mean(calls, "sent")
            table.add(
                "4",
                f"Cosmos heartbeat, {label} state: sent a beat",
                size(per_beat[n]),
                note=f"received {size(mean(calls, 'received'))}; "
                f"{mean(calls, 'requests'):.2f} requests a beat",
            )
        judge_beats(table, "4", "Cosmos", per_beat)
        no_echo(table, wire)
    finally:
        wire.close()


def growing(table: Table, wire: Wire, variant: str, layout: str) -> None:
    """The growing workload ``variant`` through ``wire``: its rows (judged for the /run
    layout; shown for comparison for the earlier one)."""
    clock = StepClock()
    metered = Metered(wire.store, wire.meter)
    workflow(variant, clock).run(
        f"grow-{variant}{layout and '-id'}", metered, input=initial(variant)
    )
    saves = [c for c in metered.calls if c.writes]
    ordinary = [c for c in saves if not c.delta["queries"] and not c.delta["deletes"]]
    folds = [c for c in saves if c not in ordinary]
    steps = step_saves(clock, saves)
    sent = [steps[n - 1].delta["sent"] for n in SHOWN]
    ru = [steps[n - 1].delta["ru"] for n in SHOWN]
    per_run = sum(c.delta["sent"] for c in metered.calls)
    ru_run = sum(c.delta["ru"] for c in saves)
    charge = sum(c.delta["charge"] for c in metered.calls)
    name = f"{variant}{layout}"
    if layout:
        table.add("4", f"{name}: bytes sent by the saves of steps 1 / 50 / 200",
                  " / ".join(map(size, sent)), note=f"{size(per_run)} a run")  # fmt: skip
        table.add("4", f"{name}: estimated request charge per run", f"{ru_run:,.0f} RU",
                  note=f"a save at steps 1 / 50 / 200: {' / '.join(f'{r:.1f}' for r in ru)} RU"
                  + measured(wire, charge))  # fmt: skip
        return
    most = max(c.delta["requests"] for c in ordinary)
    table.judge(
        "4",
        f"{name}: requests per ordinary save ({len(ordinary)} saves)",
        f"{sum(c.delta['requests'] for c in ordinary) / len(ordinary):.2f}, at most {most}",
        most,
        2,
        unit="",
        note=fold_note(folds),
    )
    table.judge(
        "4",
        f"{name}: bytes sent by the saves of steps 1 / 50 / 200",
        " / ".join(map(size, sent)),
        sent[-1] / sent[0],
        2,
        note="ratio: step 200 : step 1",
    )
    answers = [steps[n - 1].delta["received"] for n in SHOWN]
    table.judge(
        "4",
        f"{name}: bytes received by those saves",
        " / ".join(map(size, answers)),
        answers[-1] / answers[0],
        1.5,
        note="ratio: step 200 : step 1 (the answers carry no state: no echo)",
    )
    received = sum(c.delta["received"] for c in saves)
    table.judge(
        "4",
        f"{name}: bytes sent per run",
        size(per_run),
        per_run / 1e6,
        3,
        unit=" MB",
        note=f"{len(saves)} saves; received {size(received)}",
    )
    table.judge(
        "4",
        f"{name}: estimated request charge per run",
        f"{ru_run:,.0f} RU",
        ru_run,
        5000,
        unit=" RU",
        note=f"a save at steps 1 / 50 / 200: {' / '.join(f'{r:.1f}' for r in ru)} RU "
        "(Microsoft's RU-by-item-size table)" + measured(wire, charge),
    )


def fold_note(folds: list[Call]) -> str:
    if not folds:
        return "no fold (a state that only grows is never rewritten)"
    requests = sum(c.delta["requests"] for c in folds)
    deletes = sum(c.delta["deletes"] for c in folds)
    return f"folds apart: {len(folds)}, {requests} requests with their {deletes} deletes"


def measured(wire: Wire, charge: float) -> str:
    return f"; measured x-ms-request-charge {charge:,.0f} RU" if wire.live else ""


def step_saves(clock: StepClock, writes: list[Call]) -> list[Call]:
    """Each step's checkpoint: the first write that starts after the step returned."""
    return [min((c for c in writes if c.start >= r), key=lambda c: c.start) for r in clock.returned]


def loads(table: Table, wire: Wire, n: int) -> None:
    metered = Metered(wire.store, wire.meter)
    for _ in range(n):
        metered.load("grow-keys")
    requests = sum(c.delta["requests"] for c in metered.calls)
    table.judge(
        "4",
        f"requests per load ({n} loads of the 1 MB run)",
        f"{requests / n:.2f}",
        requests / n,
        2,
        unit="",
        note=f"a point read of the head, one query of its segments; "
        f"{size(mean(metered.calls, 'received'))} received a load; " + refreshes(metered.calls),
    )


def agent_loop(table: Table, wire: Wire) -> None:
    """One step making 500 durable calls, each returning 2 KB: what each call's save
    sends (DESIGN "Performance": at most 2 requests and 8 KB a call, flat)."""
    metered = Metered(wire.store, wire.meter)
    per_call: list[dict[str, Any]] = []

    def agent(state: Any) -> dict[str, Any]:
        for i in range(CALLS):
            before = len(metered.calls)
            ds.call("tool", lambda i=i: text(i, CALL_RESULT))
            saves = [c for c in metered.calls[before:] if c.writes]
            totals = {k: sum(c.delta[k] for c in saves) for k in ("requests", "sent", "ru")}
            per_call.append(totals)
        return {"answer": "done"}

    flow = ds.Workflow("agent", [ds.Step("agent", agent)])
    flow.run("agent-loop", metered, input={"question": "what is durable execution?"})
    shown = [per_call[n - 1] for n in CALLS_SHOWN]
    most = max(c["requests"] for c in per_call)
    table.judge(
        "4",
        "agent loop: requests per call at calls 1 / 250 / 500",
        " / ".join(str(c["requests"]) for c in shown),
        most,
        2,
        unit="",
        note=f"at most {most} over {CALLS} calls of {size(CALL_RESULT)}",
    )
    biggest = max(c["sent"] for c in per_call)
    table.verdict(
        "4",
        "agent loop: bytes sent per call at calls 1 / 250 / 500",
        " / ".join(size(c["sent"]) for c in shown),
        "≤ 8 KB",
        biggest <= 8000,
        note=f"at most {size(biggest)} over the {CALLS} calls; "
        f"{sum(c['ru'] for c in per_call):,.0f} RU estimated in all",
    )
    table.judge(
        "4",
        "agent loop: flat (bytes sent by call 500 : call 1)",
        f"{size(shown[-1]['sent'])} : {size(shown[0]['sent'])}",
        shown[-1]["sent"] / shown[0]["sent"],
        2,
        note="call 1 is the head alone (its data inline), later ones a segment and the head",
    )


def no_echo(table: Table, wire: Wire) -> None:
    posts = [  # item writes only (not the setup's database and container creation)
        prefer
        for method, path, prefer in wire.transport.log
        if method in ("POST", "PUT", "PATCH") and "/docs" in path
    ]
    minimal = posts.count("return=minimal")
    table.verdict(
        "4",
        "writes ask for no echo (Prefer: return=minimal)",
        f"{minimal} of {len(posts)}",
        "all",
        minimal == len(posts) > 0,
        note="what the real service honours; the SDK's no_response=True",
    )


def refreshes(calls: list[Call]) -> str:
    n = sum(c.delta["refreshes"] for c in calls)
    return f"{n} account refresh(es) (GET /) not counted" if n else "no account refresh"
