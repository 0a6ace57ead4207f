"""AsyncFileStore: the FileStore for asyncio code, its I/O off the event loop."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from itertools import islice

from ...seam.store import Checkpoint, RunInfo, check_filters
from .store import FileStore


class AsyncFileStore:
    """FileStore for asyncio: every read, write and fsync runs in a worker thread,
    so the event loop never waits on the disk. Same files, same locks: sync and
    async code can share one store directory."""

    def __init__(
        self,
        path: str | os.PathLike[str] = ".durable",
        *,
        max_state_bytes: int | None = None,
    ) -> None:
        self.sync = FileStore(path, max_state_bytes=max_state_bytes)

    def __repr__(self) -> str:
        return f"AsyncFileStore({str(self.sync.path)!r})"

    async def load(self, run_id: str) -> Checkpoint | None:
        return await asyncio.to_thread(self.sync.load, run_id)

    async def save(self, checkpoint: Checkpoint) -> Checkpoint:
        return await asyncio.to_thread(self.sync.save, checkpoint)

    async def load_head(self, run_id: str) -> Checkpoint | None:
        return await asyncio.to_thread(self.sync.load_head, run_id)

    async def save_head(self, checkpoint: Checkpoint) -> Checkpoint:
        return await asyncio.to_thread(self.sync.save_head, checkpoint)

    async def delete(self, run_id: str, *, etag: str | None = None) -> bool:
        return await asyncio.to_thread(self.sync.delete, run_id, etag=etag)

    async def run_info(self, run_id: str) -> RunInfo | None:
        return await asyncio.to_thread(self.sync.run_info, run_id)

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        updated_before: float | None = None,
        due_before: float | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[RunInfo]:
        """The sync listing, pulled in chunks of ``_CHUNK`` runs per worker-thread call
        (the directory read included): a stream, never the whole list. Bad filters raise
        here, before any I/O."""
        check_filters(status, limit)
        return _chunked(
            lambda: self.sync.list_runs(
                status=status,
                workflow=workflow,
                updated_before=updated_before,
                due_before=due_before,
                limit=limit,
            )
        )

    async def close(self) -> None:
        """Close the files kept open between saves, as ``FileStore.close`` does (the
        store stays usable). In a worker thread: closing waits for a save in
        progress on the same stripe, which must not block the event loop."""
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncFileStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


_CHUNK = 100


async def _chunked(start: Callable[[], Iterator[RunInfo]]) -> AsyncIterator[RunInfo]:
    listing = await asyncio.to_thread(start)
    try:
        while chunk := await asyncio.to_thread(lambda: list(islice(listing, _CHUNK))):
            for info in chunk:
                yield info
    finally:
        close = getattr(listing, "close", None)
        if close is not None:
            close()
