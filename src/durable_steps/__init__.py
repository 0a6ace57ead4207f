"""durable-steps: checkpoint after every step, resume where a crashed run stopped."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from ._aio import AsyncFileStore, AsyncMemoryStore
from ._config import async_store_from_env, store_from_env
from ._drive import run, run_async
from ._errors import (
    ConfigurationError,
    ConflictError,
    CorruptCheckpointError,
    DurableError,
    InvalidRunIdError,
    InvalidStateError,
    LeaseLostError,
    MissingExtraError,
    RunLeasedError,
    RunNotFoundError,
    RunWaiting,
    StateTooLargeError,
    StepMismatchError,
    StoreError,
)
from ._file import FileStore
from ._memory import MemoryStore
from ._recovery import Recovered, Workflow, recover, recover_async
from ._retry import Retry
from ._signals import send_signal, send_signal_async, wait_for_signal
from ._step import Step, StepContext, current_step
from ._store import AsyncStore, Checkpoint, RunInfo, Store

if TYPE_CHECKING:
    from ._cosmos import AsyncCosmosStore, CosmosStore

logging.getLogger("durable_steps").addHandler(logging.NullHandler())

try:
    __version__ = version("durable-steps")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "AsyncCosmosStore",
    "AsyncFileStore",
    "AsyncMemoryStore",
    "AsyncStore",
    "Checkpoint",
    "ConfigurationError",
    "ConflictError",
    "CorruptCheckpointError",
    "CosmosStore",
    "DurableError",
    "FileStore",
    "InvalidRunIdError",
    "InvalidStateError",
    "LeaseLostError",
    "MemoryStore",
    "MissingExtraError",
    "Recovered",
    "Retry",
    "RunInfo",
    "RunLeasedError",
    "RunNotFoundError",
    "RunWaiting",
    "StateTooLargeError",
    "Step",
    "StepContext",
    "StepMismatchError",
    "Store",
    "StoreError",
    "Workflow",
    "__version__",
    "async_store_from_env",
    "current_step",
    "recover",
    "recover_async",
    "run",
    "run_async",
    "send_signal",
    "send_signal_async",
    "store_from_env",
    "wait_for_signal",
]


def __getattr__(name: str) -> Any:
    # The Cosmos stores load azure-cosmos: import them only when asked for. Without
    # the [cosmos] extra they are stand-ins whose use raises MissingExtraError (an
    # ImportError with the pip command), so `import *` and hasattr() still work.
    if name in ("CosmosStore", "AsyncCosmosStore"):
        from ._config import cosmos_class

        value = globals()[name] = cosmos_class(name)
        return value
    raise AttributeError(f"module 'durable_steps' has no attribute {name!r}")
