"""Part 4: CosmosStore on the wire, against cosmos-local: the real ``azure-cosmos`` SDK
over HTTP to ``@vercel/cosmosdb-server``, started as the tests start it.

Two meters, neither of which looks inside the store:

- ``CountingProxy``: a loopback TCP proxy between the SDK and the server that counts
  every byte each way (headers included: what a network would carry). A call's
  bytes are the counters' change across it: a request is wholly forwarded before
  its response exists, and a response is counted before it is forwarded.
- ``CountingTransport``: the SDK's own HTTP transport, recording each request's
  method, path and ``Prefer`` header (``return=minimal`` asks the service not to
  echo a written item). ``GET /`` is the SDK's account refresh, a background
  request that no save or load makes; it is counted apart.

Measured: requests and bytes per save on the growing workload (``keys`` variant;
Cosmos DB stores the whole item per save, so the ``list`` variant sends the same),
requests and bytes per load of the finished 1 MB run, and a heartbeat's bytes at
1 KB and 1 MB of state. The npm server itself ignores ``Prefer: return=minimal``
(FACTS); the wrapper around it (``durable_steps.devtools.cosmos_server``) honours it
as the service does, so the bytes received show what the store asks for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import durable_steps as ds
from durable_steps.testing import EMULATOR_KEY

from .common import ROOT, Call, Metered, StepClock, Table, median, size, step_costs
from .growing import SHOWN, workflow
from .runner_parts import BEAT_SIZES, beats, judge_beats, mean


@contextmanager
def server() -> Iterator[str]:
    """cosmos-local on a free loopback port, resolved from this repository's
    node_modules; yields its endpoint."""
    # The starter the tests and `durable-steps dev cosmos-server` use (the 404 fix for
    # missing items, exit when stdin closes), so the benchmark runs the same server.
    from durable_steps.devtools.cosmos_server import start_cosmosdb_server, stop

    proc, endpoint = start_cosmosdb_server(ROOT)
    try:
        yield endpoint
    finally:
        stop(proc)


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
            sr, sw = await asyncio.open_connection(host, int(port))
            await asyncio.gather(pipe(cr, sw, True), pipe(sr, cw, False), return_exceptions=True)

        self._server = self._loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/"

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._server.close()
        self._loop.close()


def counting_transport() -> Any:
    from azure.core.pipeline.transport import RequestsTransport

    class CountingTransport(RequestsTransport):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.log: list[tuple[str, str, str]] = []

        def send(self, request: Any, **kwargs: Any) -> Any:
            path = "/" + request.url.split("://", 1)[-1].partition("/")[2]
            self.log.append((request.method, path, request.headers.get("Prefer", "")))
            return super().send(request, **kwargs)

    return CountingTransport()


class Wire:
    """A CosmosStore behind the counting proxy, and the meter for ``Metered``."""

    def __init__(self, endpoint: str, container: str) -> None:
        self.proxy = CountingProxy(endpoint)
        self.transport = counting_transport()
        self.store = ds.CosmosStore(
            self.proxy.endpoint,
            key=EMULATOR_KEY,
            container=container,
            create_if_missing=True,
            transport=self.transport,
        )

    def meter(self) -> dict[str, int]:
        log = self.transport.log
        refreshes = sum(1 for method, path, _ in log if (method, path) == ("GET", "/"))
        return {
            "sent": self.proxy.sent,
            "received": self.proxy.received,
            "requests": len(log) - refreshes,
            "refreshes": refreshes,
        }

    def close(self) -> None:
        self.store.close()
        self.proxy.close()


def cosmos(table: Table, endpoint: str, quick: bool) -> None:
    wire = Wire(endpoint, "bench")
    try:
        saves(table, wire)
        loads(table, wire, 10 if quick else 50)
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
    finally:
        wire.close()


def saves(table: Table, wire: Wire) -> None:
    clock = StepClock()
    metered = Metered(wire.store, wire.meter)
    t0 = time.perf_counter()
    workflow("keys", clock).run("grow-keys", metered, input={})
    writes = [c for c in metered.calls if c.writes]
    steps = step_saves(clock, writes)
    requests = sum(c.delta["requests"] for c in writes)
    table.judge(
        "4",
        f"requests per save ({len(writes)} saves, growing workload)",
        f"{requests / len(writes):.2f}",
        requests / len(writes),
        1,
        unit="",
        note=f"{refreshes(metered.calls)}; {ms_of(step_costs(clock, metered.calls, t0))} a step",
    )
    sent = [steps[n - 1].delta["sent"] for n in SHOWN]
    received = [steps[n - 1].delta["received"] for n in SHOWN]
    table.add("4", "bytes sent by the saves of steps 1 / 50 / 200", " / ".join(map(size, sent)))
    posts = [  # item writes only (not the setup's database and container creation)
        prefer
        for method, path, prefer in wire.transport.log
        if method in ("POST", "PUT", "PATCH") and "/docs" in path
    ]
    minimal = posts.count("return=minimal")
    table.judge(
        "4",
        "bytes received by those saves",
        " / ".join(map(size, received)),
        received[-1] / received[0],
        1.5,
        note="ratio: step 200 : step 1 (the test server honours return=minimal, as the service)",
    )
    table.verdict(
        "4",
        "writes ask for no echo (Prefer: return=minimal)",
        f"{minimal} of {len(posts)}",
        "all",
        minimal == len(posts) > 0,
        note="what the real service honours; the SDK's no_response=True",
    )


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
        1,
        unit="",
        note=f"{size(mean(metered.calls, 'received'))} received a load; "
        + refreshes(metered.calls),
    )


def refreshes(calls: list[Call]) -> str:
    n = sum(c.delta["refreshes"] for c in calls)
    return f"{n} account refresh(es) (GET /) not counted" if n else "no account refresh"


def ms_of(costs: list[float]) -> str:
    return f"{median(costs) * 1000:.1f} ms"
