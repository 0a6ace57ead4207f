"""run_async and the async stores: the same guarantees as the sync API, from asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step

from ..conftest import Cosmos, store_env
from ..helpers.places import Place


@pytest.fixture(params=["file", "memory", "cosmos-local"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The environment of an async store (built by async_store_from_env): memory too."""
    return store_env(request, tmp_path, request.param)


def arun(coro: Any) -> Any:
    return asyncio.run(coro)


def test_factory_builds_the_async_store_of_each_backend(env: dict[str, str]) -> None:
    """async_store_from_env gives the async twin of what store_from_env gives."""

    async def main() -> str:
        async with ds.async_store_from_env(env) as store:
            assert isinstance(store, ds.AsyncStore)
            return type(store).__name__

    expected = {
        "file": "AsyncFileStore",
        "memory": "AsyncMemoryStore",
        "cosmos": "AsyncCosmosStore",
    }
    assert arun(main()) == expected[env["DURABLE_STORE"]]


def test_run_async_resumes_with_async_and_plain_steps(env: dict[str, str], run_id: str) -> None:
    """async and plain steps mix; a failure resumes at the failed step; a done run runs nothing."""
    calls: list[str] = []

    async def a(state: Any) -> dict[str, int]:
        await asyncio.sleep(0)
        calls.append("a")
        return {"a": 1}

    def b(state: Any) -> dict[str, int]:
        calls.append("b")
        if calls.count("b") == 1:
            raise ValueError("b failed")
        return {"b": state["a"] + 1}

    async def main() -> list[Any]:
        async with ds.async_store_from_env(env) as store:
            steps = [Step("a", a), Step("b", b)]
            with pytest.raises(ValueError, match="b failed") as err:
                await ds.run_async(run_id, steps, store)
            assert any("step 1 'b'" in n for n in err.value.__notes__)
            first = await ds.run_async(run_id, steps, store)
            again = await ds.run_async(run_id, steps, store)
            with pytest.raises(ds.StepMismatchError):
                await ds.run_async(run_id, [Step("x", a), Step("b", b)], store)
            return [first, again]

    assert arun(main()) == [{"a": 1, "b": 2}, {"a": 1, "b": 2}]
    assert calls == ["a", "b", "b"]


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_cancelled_step_saves_nothing_and_resumes_there(
    env: dict[str, str], run_id: str, how: str
) -> None:
    """Cancelling during a step (a timeout or task.cancel) keeps earlier checkpoints, saves
    nothing for that step, releases the lease, propagates, and the next run resumes at
    that step at once (attempt 2)."""
    attempts: list[int] = []
    in_slow = asyncio.Event()
    timeouts: list[asyncio.Timeout] = []

    async def slow(state: Any) -> dict[str, bool]:
        attempts.append(ds.current_step().attempt)
        if len(attempts) == 1:
            in_slow.set()
            if timeouts:  # the timeout around the run expires now, inside this step
                timeouts[0].reschedule(asyncio.get_running_loop().time())
            await asyncio.sleep(60)
        return {"slow": True}

    steps = [Step("fast", lambda s: {"fast": True}), Step("slow", slow)]

    async def run_under_a_timeout(store: Any) -> None:
        async with asyncio.timeout(None) as timeout:
            timeouts.append(timeout)
            await ds.run_async(run_id, steps, store)

    async def main() -> Any:
        async with ds.async_store_from_env(env) as store:
            if how == "timeout":
                with pytest.raises(TimeoutError):
                    await run_under_a_timeout(store)
            else:
                task = asyncio.create_task(ds.run_async(run_id, steps, store))
                await in_slow.wait()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            cp = await store.load(run_id)
            assert cp is not None
            assert (cp.step, cp.steps, cp.state) == (0, ("fast",), {"fast": True})
            assert (cp.owner, cp.lease_expires) == (None, None)
            return await ds.run_async(run_id, steps, store)

    assert arun(main()) == {"fast": True, "slow": True}
    assert attempts == [1, 2]


def test_a_cancellation_during_a_save_lets_it_finish_then_propagates(
    tmp_path: Path, run_id: str
) -> None:
    """run_async cancelled while AsyncFileStore writes step a's checkpoint in its worker
    thread: the write is let finish, the lease released, then CancelledError propagates
    -- so an immediate re-run neither meets a false conflict nor runs step a again."""
    store = ds.AsyncFileStore(tmp_path)
    writing, finish = threading.Event(), threading.Event()
    save = store.sync.save

    def slow_save(cp: ds.Checkpoint) -> ds.Checkpoint:
        if cp.step == 0 and not finish.is_set():
            writing.set()  # step a's result is on its way to the disk
            assert finish.wait(30)
        return save(cp)

    store.sync.save = slow_save  # type: ignore[method-assign]
    ran: list[str] = []

    def step(name: str) -> Step:
        return Step(name, lambda s: ran.append(name) or {name: True})

    steps = [step("a"), step("b")]

    async def main() -> Any:
        task = asyncio.create_task(ds.run_async(run_id, steps, store))
        assert await asyncio.to_thread(writing.wait, 30)
        task.cancel()
        await asyncio.sleep(0)  # the cancellation reaches the run while it saves
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        cp = await store.load(run_id)  # what the store holds is known: a's result, released
        assert cp is not None
        assert (cp.step, cp.owner, cp.lease_expires) == (0, None, None)
        return await ds.run_async(run_id, steps, store)

    assert arun(main()) == {"a": True, "b": True}
    assert ran == ["a", "b"]


class HeldSave(ds.AsyncMemoryStore):
    """An async store whose next save (of a checkpoint or of a head) waits until
    ``finish`` is set; ``saving`` is set once it started."""

    def __init__(self) -> None:
        super().__init__()
        self.saving, self.finish = asyncio.Event(), asyncio.Event()

    async def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        self.saving.set()
        await self.finish.wait()
        return await super().save(checkpoint)

    async def save_head(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        self.saving.set()
        await self.finish.wait()
        return await super().save_head(checkpoint)


@pytest.mark.parametrize("what", ["start", "signal", "cancel"])
def test_start_signal_and_cancel_cancelled_during_their_save_let_it_land_then_raise(
    what: str, run_id: str
) -> None:
    """A change from outside, cancelled while its save is under way: the save lands
    (its outcome is known) and then the caller gets CancelledError, not a result."""
    store = HeldSave()
    wf = ds.Workflow("held", [Step("w", lambda s: ds.wait_for_signal("go"))])

    async def main() -> ds.Checkpoint | None:
        if what != "start":
            store.finish.set()
            await wf.start_async(run_id, store)
            store.finish.clear()
        store.saving.clear()
        change = {
            "start": lambda: wf.start_async(run_id, store),
            "signal": lambda: ds.send_signal_async(store, run_id, "go", 1),
            "cancel": lambda: ds.cancel_run_async(store, run_id),
        }[what]
        task = asyncio.create_task(change())
        await store.saving.wait()
        task.cancel()
        await asyncio.sleep(0)
        store.finish.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await store.load(run_id)

    cp = arun(main())
    assert cp is not None
    landed = {"start": cp.status, "signal": sorted(cp.signals), "cancel": cp.status}[what]
    assert landed == {"start": "running", "signal": ["go"], "cancel": "cancelled"}[what]


class CancelledAsItSaves(ds.AsyncMemoryStore):
    """An async store that cancels ``victim`` just as its save of step 0 completes: the
    task is woken by the cancellation with the save already done."""

    def __init__(self) -> None:
        super().__init__()
        self.victim: asyncio.Task[Any] | None = None

    async def save(self, checkpoint: ds.Checkpoint) -> ds.Checkpoint:
        cp = checkpoint
        saved = await super().save(cp)
        if cp.step == 0 and self.victim is not None:
            # Scheduled before the save's completion wakes the run: it comes first.
            asyncio.get_running_loop().call_soon(self.victim.cancel)
            self.victim = None
        return saved


def test_a_cancellation_that_lands_as_a_save_completes_is_not_lost(run_id: str) -> None:
    """A cancellation that arrives just as a save finishes is still a cancellation: the
    run stops before its next step (lease released) and raises CancelledError."""
    store = CancelledAsItSaves()
    ran: list[str] = []
    steps = [Step(n, lambda s, n=n: ran.append(n) or {n: True}) for n in ("a", "b")]

    async def main() -> Any:
        store.victim = task = asyncio.create_task(ds.run_async(run_id, steps, store))
        with pytest.raises(asyncio.CancelledError):
            await task
        cp = await store.load(run_id)
        assert cp is not None
        assert (cp.step, cp.owner) == (0, None)
        return await ds.run_async(run_id, steps, store)

    assert arun(main()) == {"a": True, "b": True}
    assert ran == ["a", "b"]


@pytest.mark.parametrize("swallows", [False, True])
def test_a_lost_lease_cancels_the_step_and_leaves_the_caller_uncancelled(
    run_id: str, swallows: bool
) -> None:
    """A heartbeat that finds another owner cancels the running step; run_async raises
    LeaseLostError, saves nothing, and leaves no cancellation pending on the caller's task
    (also when the step swallowed the CancelledError and returned)."""
    store = ds.AsyncMemoryStore()
    cancelled: list[bool] = []

    async def step(state: Any) -> dict[str, bool]:
        cp = await store.load(run_id)
        assert cp is not None
        await store.save(replace(cp, owner="thief", lease_expires=time.time() + 600))
        try:
            await asyncio.sleep(20)  # ended by the heartbeat's cancellation (beats every 0.1 s)
        except asyncio.CancelledError:
            cancelled.append(True)
            if not swallows:
                raise
        return {"saved": True}

    async def main() -> int:
        with pytest.raises(ds.LeaseLostError):
            await ds.run_async(run_id, [Step("s", step)], store, lease=0.3)
        await asyncio.sleep(0)  # a pending cancellation would be raised here
        return asyncio.current_task().cancelling()  # type: ignore[union-attr]

    assert arun(main()) == 0
    assert cancelled == [True]  # not the next save's conflict after a full sleep
    cp = store.sync.load(run_id)
    assert cp is not None
    assert (cp.step, cp.owner, cp.state) == (-1, "thief", {})


def test_current_step_is_right_inside_concurrent_tasks(run_id: str) -> None:
    """current_step() is per task (contextvars): interleaved runs each see their own."""
    seen: list[tuple[str, str]] = []

    async def step(state: Any) -> None:
        mine = ds.current_step().run_id
        await asyncio.sleep(0.01)  # let the other runs interleave
        seen.append((mine, ds.current_step().run_id))

    async def main() -> None:
        store = ds.AsyncMemoryStore()
        await asyncio.gather(
            *(
                ds.run_async(f"{run_id}-{i}", [Step("s", step), Step("t", step)], store)
                for i in range(10)
            )
        )

    arun(main())
    assert len(seen) == 20
    assert all(a == b for a, b in seen)


@pytest.mark.parametrize("env", ["file", "cosmos-local"], indirect=True)
def test_hundred_concurrent_runs_all_complete(env: dict[str, str], run_id: str) -> None:
    """100 runs at once in one event loop (asyncio.gather) all complete with the right state."""

    def steps(i: int) -> list[Step]:
        async def fetch(state: Any) -> dict[str, int]:
            await asyncio.sleep(0.01)
            return {"n": i}

        return [
            Step("fetch", fetch),
            Step("double", lambda s: {"d": s["n"] * 2}),
            Step("done", lambda s: {"ok": True}),
        ]

    async def main() -> list[dict[str, Any]]:
        async with ds.async_store_from_env(env) as store:
            return list(
                await asyncio.gather(
                    *(ds.run_async(f"{run_id}-{i}", steps(i), store) for i in range(100))
                )
            )

    results = arun(main())
    assert results == [{"n": i, "d": 2 * i, "ok": True} for i in range(100)]
    store = ds.store_from_env(env)
    for i in range(100):
        cp = store.load(f"{run_id}-{i}")
        assert cp is not None
        assert cp.done
    store.close()


def test_two_tasks_racing_on_one_run(env: dict[str, str], run_id: str) -> None:
    """Two tasks run the same run id at once: one runs it to completion, the other gets
    RunLeasedError and runs nothing (the winner's first step waits until it did)."""
    loser_done = asyncio.Event()
    ran: list[int] = []

    async def step(state: Any) -> dict[str, int]:
        ran.append(len(state))
        if not state:
            await asyncio.wait_for(loser_done.wait(), 60)
        return {f"k{len(state)}": len(state)}

    async def attempt(store: Any) -> Any:
        try:
            return await ds.run_async(run_id, [Step(f"s{i}", step) for i in range(5)], store)
        except ds.ConflictError as exc:
            loser_done.set()
            return exc

    async def main() -> list[Any]:
        async with ds.async_store_from_env(env) as store:
            return list(await asyncio.gather(attempt(store), attempt(store)))

    results = arun(main())
    losers = [r for r in results if isinstance(r, ds.RunLeasedError)]
    finished = [r for r in results if isinstance(r, dict)]
    assert (len(losers), len(finished)) == (1, 1), results
    assert finished[0] == {f"k{i}": i for i in range(5)}
    assert ran == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("env", ["file", "cosmos-local"], indirect=True)
def test_crashed_process_resumes_an_async_run(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """An async run killed by os._exit in step b resumes in a new process: a once, b twice."""
    place = Place(env, tmp_path / "effects")
    assert place.run("async-crash-in-b", run_id, CRASH="1").returncode == 3
    done = place.run("async-crash-in-b", run_id)
    assert done.returncode == 0, done.stderr
    assert place.effects_log() == ["a", "b", "b", "c"]


def test_file_io_runs_off_the_event_loop(tmp_path: Path) -> None:
    """AsyncFileStore's reads, writes and fsyncs run in worker threads, never on the loop."""
    threads: set[int] = set()
    store = ds.AsyncFileStore(tmp_path)
    real_save, real_load = store.sync.save, store.sync.load

    def save(cp: ds.Checkpoint) -> ds.Checkpoint:
        threads.add(threading.get_ident())
        return real_save(cp)

    def load(run_id: str) -> ds.Checkpoint | None:
        threads.add(threading.get_ident())
        return real_load(run_id)

    store.sync.save, store.sync.load = save, load  # type: ignore[method-assign]

    async def main() -> int:
        await ds.run_async("r", [Step("a", lambda s: {"a": 1})], store)
        return threading.get_ident()

    loop_thread = arun(main())
    assert threads
    assert loop_thread not in threads


def test_async_cosmos_is_native_aio_and_closes(cosmos_local: Cosmos, run_id: str) -> None:
    """AsyncCosmosStore uses azure.cosmos.aio, and `async with` closes its client."""
    from azure.cosmos.aio import CosmosClient

    async def main() -> Any:
        async with ds.AsyncCosmosStore(cosmos_local.endpoint, **cosmos_local.kwargs()) as store:
            assert isinstance(store._client, CosmosClient)
            await store.save(ds.Checkpoint(run_id, -1, {}))
            return store

    store = arun(main())
    session = store._client.client_connection.pipeline_client._pipeline._transport.session
    assert session is None or session.closed


class RefusingCredential:
    """An Entra ID credential that has no token (as on a laptop without `az login`)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.exceptions import ClientAuthenticationError

        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")

    async def close(self) -> None:
        pass


class AsyncRefusingCredential(RefusingCredential):
    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:  # type: ignore[override]
        return RefusingCredential.get_token(self, *scopes, **kwargs)


def test_entra_id_without_a_token_says_how_to_get_one() -> None:
    """Without a key and without a token, both stores say: az login, managed identity or
    COSMOS_KEY. (Bearer tokens need https, and the token is asked for before any connection.)"""
    endpoint = "https://127.0.0.1:9/"
    with pytest.raises(ds.StoreError, match=r"run 'az login'.*or set COSMOS_KEY"):
        ds.CosmosStore(endpoint, credential=RefusingCredential())

    async def main() -> None:
        async with ds.AsyncCosmosStore(endpoint, credential=AsyncRefusingCredential()):
            pass

    with pytest.raises(ds.StoreError, match="run 'az login'"):
        arun(main())
