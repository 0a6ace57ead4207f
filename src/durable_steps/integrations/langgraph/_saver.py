"""``DurableSaver``: LangGraph's ``BaseCheckpointSaver`` on a durable-steps store. Each
method, blocking or async, is one program (``_reads``, ``_writes``, ``_prune``,
``_copy``) carried out by one of the two drivers of ``_requests``."""

from __future__ import annotations

import random
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

from ...backend import AsyncStore, Codec, Store, ThreadedStore
from ._copy import copy_thread
from ._memory import Memory
from ._prune import Removals
from ._requests import Program, run_async, run_blocking


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
        self._programs = Removals(self.serde, self._codec, Memory())

    # -- the drivers ------------------------------------------------------------------

    def _run(self, program: Program) -> Any:
        if self.store is None:
            program.close()
            raise TypeError(
                "DurableSaver on an AsyncStore has only the async methods: run the graph "
                "with ainvoke/astream, or give DurableSaver the blocking store"
            )
        return run_blocking(program, self.store)

    async def _arun(self, program: Program) -> Any:
        return await run_async(program, self.astore)

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

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Each thread's latest checkpoint per namespace kept (``"keep_latest"``), or the
        whole thread deleted (``"delete"``); what the kept checkpoints need stays. Needs
        a store with ``delete_items`` (every built-in store has it)."""
        self._run(self._programs.prune(list(thread_ids), strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._arun(self._programs.prune(list(thread_ids), strategy))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Every checkpoint (with its writes) whose metadata names one of ``run_ids``, in
        every thread; what the checkpoints that stay need stays."""
        self._run(self._programs.delete_for_runs(list(run_ids)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(self._programs.delete_for_runs(list(run_ids)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint, pending write and value of a thread, under another thread id
        (sealed anew for it when the store has a codec); the source is only read, and a
        record the target has already is kept."""
        self._run(self._copy(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(self._copy(source_thread_id, target_thread_id))

    def _copy(self, source: str, target: str) -> Program:
        return copy_thread(self._codec, str(source), str(target), self._programs.touch)

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
