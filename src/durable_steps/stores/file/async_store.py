"""AsyncFileStore: the FileStore for asyncio code, its I/O off the event loop."""

from __future__ import annotations

import os

from ...seam.codec import Codec
from ...seam.store import ThreadedStore
from .store import FileStore


class AsyncFileStore(ThreadedStore[FileStore]):
    """FileStore for asyncio: every read, write, fsync and close runs in a worker thread,
    so the event loop never waits on the disk. Same files, same locks: sync and async
    code can share one store directory."""

    def __init__(
        self,
        path: str | os.PathLike[str] = ".durable",
        *,
        max_state_bytes: int | None = None,
        history: str = "steps",
        keep_last: int | None = None,
        finished_ttl: int | None = None,
        codec: Codec | None = None,
    ) -> None:
        super().__init__(
            FileStore(
                path,
                max_state_bytes=max_state_bytes,
                history=history,
                keep_last=keep_last,
                finished_ttl=finished_ttl,
                codec=codec,
            )
        )

    def __repr__(self) -> str:
        return f"AsyncFileStore({str(self.sync.path)!r})"
