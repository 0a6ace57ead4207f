"""``DurableSaver``: LangGraph's ``BaseCheckpointSaver`` on a durable-steps store, and
the two drivers that carry the saver's programs (``_programs``) out -- one with blocking
calls of a ``Store``, one with awaits of an ``AsyncStore``."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.base import Checkpoint as LgCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ... import ConflictError
from ...backend import AsyncStore, Checkpoint, Codec, Store, ThreadedStore, evolve
from ._copy import copy_thread
from ._layout import WORKFLOW
from ._programs import TOUCH, Programs
from ._requests import (
    Append,
    DeleteRun,
    ListThreads,
    Program,
    Put,
    Read,
    Request,
    Touch,
)


class DurableSaver(BaseCheckpointSaver[str]):
    """LangGraph's checkpointer on a durable-steps store -- ``FileStore``, ``MemoryStore``,
    ``CosmosStore``, any registered backend, or their async twins::

        graph = builder.compile(checkpointer=DurableSaver(store))

    Given a blocking ``Store`` it serves both ``invoke``/``stream`` and
    ``ainvoke``/``astream`` (the async methods run its calls in threads); given an
    ``AsyncStore``, only the async ones. ``serde``: LangGraph's serializer for values
    (default: ``JsonPlusSerializer()``, which never pickles; a serializer that would
    pickle a value is refused for it). The store's codec (compression, encryption)
    applies to everything written.
    """

    def __init__(
        self, store: Store | AsyncStore, *, serde: SerializerProtocol | None = None
    ) -> None:
        super().__init__(serde=serde or JsonPlusSerializer(pickle_fallback=False))
        self.store: Store | None = store if isinstance(store, Store) else None
        self.astore: AsyncStore = ThreadedStore(store) if isinstance(store, Store) else store
        self._programs = Programs(self.serde, self._codec)

    # -- the drivers ------------------------------------------------------------------

    def _run(self, program: Program) -> Any:
        store = self.store
        if store is None:
            raise TypeError(
                "DurableSaver on an AsyncStore has only the async methods: run the graph "
                "with ainvoke/astream, or give DurableSaver the blocking store"
            )
        value: Any = None
        failure: BaseException | None = None
        while True:
            try:
                request = program.send(value) if failure is None else program.throw(failure)
            except StopIteration as stop:
                return stop.value
            value, failure = None, None
            try:
                value = _sync(store, request)
            except ConflictError as exc:
                failure = exc

    async def _arun(self, program: Program) -> Any:
        value: Any = None
        failure: BaseException | None = None
        while True:
            try:
                request = program.send(value) if failure is None else program.throw(failure)
            except StopIteration as stop:
                return stop.value
            value, failure = None, None
            try:
                value = await _async(self.astore, request)
            except ConflictError as exc:
                failure = exc

    # -- BaseCheckpointSaver -------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = self._run(self._programs.get_tuple(config))
        return result

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = await self._arun(self._programs.get_tuple(config))
        return result

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._run(self._programs.listing(config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in await self._arun(self._programs.listing(config, filter, before, limit)):
            yield found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: LgCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        stored: RunnableConfig = self._run(
            self._programs.put(config, checkpoint, metadata, new_versions)
        )
        return stored

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: LgCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        stored: RunnableConfig = await self._arun(
            self._programs.put(config, checkpoint, metadata, new_versions)
        )
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run(self._programs.put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._arun(self._programs.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._programs.delete_thread(str(thread_id)))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._programs.delete_thread(str(thread_id)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint, pending write and value of a thread, under another thread id
        (sealed anew for it when the store has a codec); the source is only read, and a
        record the target has already is kept."""
        self._run(copy_thread(self._codec, str(source_thread_id), str(target_thread_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(copy_thread(self._codec, str(source_thread_id), str(target_thread_id)))

    def _codec(self) -> Codec | None:
        """The store's codec as it is now (a store's codec may be set after it is made)."""
        return self.astore.codec

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A channel's next version: the step number, fixed width (versions compare as
        text), then a random part, so that two branches of a thread (a resume from an
        earlier checkpoint) never give one (channel, version) two values -- as
        LangGraph's own savers make them, in 21 characters instead of 49 (a checkpoint
        names the version of every channel, and every node's last seen ones)."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:012d}.{random.getrandbits(32):08x}"


def _new_head(request: Touch) -> Checkpoint:
    return Checkpoint(
        run_id=request.run_id,
        step=-1,
        state={"thread_id": request.thread_id},
        status="completed",
        workflow=WORKFLOW,
    )


def _stale(head: Checkpoint) -> bool:
    return head.updated_at is None or time.time() - head.updated_at >= TOUCH


def _touch(store: Store, request: Touch) -> None:
    with contextlib.suppress(ConflictError):  # another writer's, meanwhile: as good
        head = store.load_head(request.run_id)
        if head is None:
            store.save(_new_head(request))
        elif _stale(head):
            store.save_head(evolve(head, updated_at=None))


async def _atouch(store: AsyncStore, request: Touch) -> None:
    with contextlib.suppress(ConflictError):
        head = await store.load_head(request.run_id)
        if head is None:
            await store.save(_new_head(request))
        elif _stale(head):
            await store.save_head(evolve(head, updated_at=None))


def _sync(store: Store, request: Request) -> Any:  # noqa: PLR0911 - a case per request
    match request:
        case Read(run_id, kind, after, limit):
            return store.read_items(run_id, kind, after=after, limit=limit)
        case Append(run_id, item, kind, quiet):
            try:
                store.append_item(run_id, kind, item.key, item.value)
            except ConflictError:
                if not quiet:
                    raise
                return False
            return True
        case Put(run_id, item, kind):
            return store.put_item(run_id, kind, item.key, item.value)
        case Touch():
            return _touch(store, request)
        case DeleteRun(run_id):
            return store.delete(run_id)
        case ListThreads():
            return [
                run.state.get("thread_id", info.run_id)
                for info in store.list_runs(workflow=WORKFLOW)
                if (run := store.load(info.run_id)) is not None
            ]
    raise AssertionError(request)  # pragma: no cover


async def _async(store: AsyncStore, request: Request) -> Any:  # noqa: PLR0911 - as _sync
    match request:
        case Read(run_id, kind, after, limit):
            return await store.read_items(run_id, kind, after=after, limit=limit)
        case Append(run_id, item, kind, quiet):
            try:
                await store.append_item(run_id, kind, item.key, item.value)
            except ConflictError:
                if not quiet:
                    raise
                return False
            return True
        case Put(run_id, item, kind):
            return await store.put_item(run_id, kind, item.key, item.value)
        case Touch():
            return await _atouch(store, request)
        case DeleteRun(run_id):
            return await store.delete(run_id)
        case ListThreads():
            threads = []
            async for info in store.list_runs(workflow=WORKFLOW):
                if (run := await store.load(info.run_id)) is not None:
                    threads.append(run.state.get("thread_id", info.run_id))
            return threads
    raise AssertionError(request)  # pragma: no cover
