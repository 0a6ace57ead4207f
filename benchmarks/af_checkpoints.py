"""Part 11: Microsoft Agent Framework checkpoints on Cosmos DB, ours against Agent
Framework's own ``CosmosCheckpointStorage`` (``agent-framework-azure-cosmos``, in the
``[bench]`` extra), side by side on the same cosmos-local server in one run.

The workload is a real Agent Framework workflow: one executor that messages itself once
per superstep, each time adding 5 KB to the workflow's shared state (``ctx.set_state``:
a list that grows), 200 supersteps to 1 MB (``--quick``: 40, to 200 KB). Agent Framework
saves a checkpoint after each superstep, through the storage under test. Metered per
save, as part 4 meters ours: the bytes the client sent (a counting proxy in front of the
server, headers included), the requests, and the request units estimated from
Microsoft's RU-per-item-size table for every item written (theirs: one upsert of the
whole checkpoint document; ours: the checkpoint's index item, the chain's new segment,
its head). Not judged against a target: a comparison, and the numbers of
docs/performance.md.
"""

# No `from __future__ import annotations`: Agent Framework reads the handler's annotations,
# which name classes imported inside _workflow (the module imports without the framework).
import asyncio
import json
import uuid
from typing import Any

from .common import Table, size, text
from .cosmos import CountingProxy, Wire, estimated_ru

GROWTH = 5_000
"""Bytes each superstep adds."""


def agent_framework(table: Table, endpoint: str, quick: bool) -> None:
    try:
        import agent_framework  # noqa: F401
    except ImportError:
        table.add("12", "Agent Framework checkpoints", "n/a", note="pip install -e '.[bench]'")
        return
    supersteps = 40 if quick else 200
    ours = _ours(endpoint, supersteps)
    theirs = _theirs(endpoint, supersteps)
    for who, saves in (("durable-steps", ours), ("CosmosCheckpointStorage", theirs)):
        if saves is None:
            table.add("12", f"AF {who}", "n/a", note="agent-framework-azure-cosmos: [bench]")
            continue
        last = saves[-1]
        table.add(
            "12",
            f"AF {who}: sent a checkpoint, superstep 1 / {len(saves) - 1}",
            f"{size(saves[1]['sent'])} / {size(last['sent'])}",
            note=f"{last['requests']} requests; est. {saves[1]['ru']:.1f} / {last['ru']:.1f} RU",
        )
        table.add(
            "12",
            f"AF {who}: a run of {len(saves) - 1} supersteps to {size(GROWTH * (len(saves) - 1))}",
            f"{size(sum(s['sent'] for s in saves))} sent",
            note=f"est. {sum(s['ru'] for s in saves):,.0f} RU; "
            f"{sum(s['requests'] for s in saves)} requests",
        )
    if theirs is not None:
        ratio = sum(s["sent"] for s in theirs) / max(1, sum(s["sent"] for s in ours))
        table.add("12", "AF bytes sent per run: theirs / ours", f"{ratio:.0f}x")


def _workflow(storage: Any, supersteps: int, name: str) -> Any:
    from agent_framework import Executor, WorkflowBuilder, WorkflowContext, handler

    class Grow(Executor):  # type: ignore[misc]
        @handler  # type: ignore[misc]
        async def grow(self, n: int, ctx: WorkflowContext[int]) -> None:
            ctx.set_state("log", [*ctx.get_state("log", []), text(n, GROWTH)])
            if n + 1 < supersteps:
                await ctx.send_message(n + 1)

    start = Grow(id="grow")
    return (
        WorkflowBuilder(
            start_executor=start,
            checkpoint_storage=storage,
            name=name,
            max_iterations=supersteps + 5,
        )
        .add_edge(start, start)
        .build()
    )


class Metered:
    """A checkpoint storage whose saves are metered (the meter's change across each)."""

    def __init__(self, storage: Any, meter: Any) -> None:
        self.storage, self.meter, self.saves = storage, meter, list[dict[str, float]]()

    async def save(self, checkpoint: Any) -> Any:
        before = self.meter()
        saved = await self.storage.save(checkpoint)
        after = self.meter()
        self.saves.append({k: after[k] - before[k] for k in ("sent", "requests", "ru")})
        return saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)


def _ours(endpoint: str, supersteps: int) -> list[dict[str, float]]:
    from durable_steps.integrations.agent_framework import DurableCheckpointStorage

    wire = Wire(endpoint, "bench-af")  # its proxy runs a loop of its own: made outside ours
    try:
        storage = Metered(DurableCheckpointStorage(wire.store), wire.meter)
        asyncio.run(_workflow(storage, supersteps, f"grow-{uuid.uuid4()}").run(0))
        return storage.saves
    finally:
        wire.close()


def _theirs(endpoint: str, supersteps: int) -> list[dict[str, float]] | None:
    try:
        from agent_framework_azure_cosmos import CosmosCheckpointStorage
    except ImportError:
        return None
    from azure.cosmos import CosmosClient, PartitionKey
    from azure.cosmos.aio import CosmosClient as AsyncClient

    from durable_steps.testing import EMULATOR_KEY

    proxy = CountingProxy(endpoint)
    with CosmosClient(
        proxy.endpoint, credential=EMULATOR_KEY, enable_endpoint_discovery=False
    ) as c:
        db = c.create_database_if_not_exists("bench")
        db.create_container_if_not_exists("bench-af-theirs", PartitionKey(path="/workflow_name"))
    meter = {"requests": 0, "ru": 0.0}

    async def run() -> list[dict[str, float]]:
        async with AsyncClient(
            proxy.endpoint, credential=EMULATOR_KEY, enable_endpoint_discovery=False
        ) as client:
            container = client.get_database_client("bench").get_container_client("bench-af-theirs")
            upsert = container.upsert_item

            async def counted(body: dict[str, Any], **kwargs: Any) -> Any:
                meter["requests"] += 1
                meter["ru"] += estimated_ru(len(json.dumps(body).encode()))
                return await upsert(body, **kwargs)

            container.upsert_item = counted
            storage = Metered(
                CosmosCheckpointStorage(container_client=container),
                lambda: {"sent": proxy.sent, **meter},
            )
            await _workflow(storage, supersteps, f"grow-{uuid.uuid4()}").run(0)
            return storage.saves

    try:
        return asyncio.run(run())
    finally:
        proxy.close()
