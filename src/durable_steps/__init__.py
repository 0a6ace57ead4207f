"""durable-steps: checkpoint after every step, resume where a crashed run stopped."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from .runner.cancel import cancel_run, cancel_run_async
from .runner.children import await_child, await_child_async, start_child, start_child_async
from .runner.drivers import run, run_async

# -- talking to a running run: streams and events (runner.streams, runner.events) --
from .runner.events import (
    get_event,
    get_event_async,
    get_events,
    get_events_async,
    set_event,
    set_event_async,
)
from .runner.fork import fork_run, fork_run_async
from .runner.history import load_at, load_at_async, run_history, run_history_async
from .runner.journal import call, call_async
from .runner.mailbox import (
    PendingMessage,
    pending_messages,
    pending_messages_async,
    receive,
    receive_async,
    send_message,
    send_message_async,
)
from .runner.patches import patched
from .runner.queues import Queue
from .runner.results import wait_for_result, wait_for_result_async
from .runner.resume import resume_run, resume_run_async
from .runner.retry import Retry
from .runner.signals import send_signal, send_signal_async, wait_for_signal
from .runner.step import Step, StepContext, current_step, running_steps
from .runner.stream_index import (
    StreamInfo,
    list_streams,
    list_streams_async,
    stream_info,
    stream_info_async,
)
from .runner.streams import (
    StreamReset,
    close_stream,
    close_stream_async,
    read_stream,
    read_stream_async,
    write_stream,
    write_stream_async,
)
from .runner.tasks import track_tasks
from .runner.timers import sleep, sleep_until
from .runner.typed import Recorded, typed_as
from .runner.upgrade import upgrade_run, upgrade_run_async
from .runner.workflow import Workflow
from .seam.checkpoint import Checkpoint, RunInfo
from .seam.codec import Compression, Keyring, ValueCodec  # the codec (docs/security.md)
from .seam.errors import (
    CodecError,
    ConfigurationError,
    ConflictError,
    CorruptCheckpointError,
    DurableError,
    InvalidRunIdError,
    InvalidStateError,
    LeaseLostError,
    MessageTimeoutError,
    MissingExtraError,
    NondeterminismError,
    RunCancelledError,
    RunFailedError,
    RunLeasedError,
    RunNotFoundError,
    RunWaiting,
    SignalTimeoutError,
    StateTooLargeError,
    StepMismatchError,
    StepNotKeptError,
    StoreError,
    TooManyAttemptsError,
)
from .seam.history import StepRecord
from .seam.store import AsyncStore, Store
from .stores.config import async_store_for, async_store_from_env, store_for, store_from_env
from .stores.file.async_store import AsyncFileStore
from .stores.file.store import FileStore
from .stores.memory import AsyncMemoryStore, MemoryStore
from .workers.recovery import Recovered, recover, recover_async
from .workers.schedules import Schedule

if TYPE_CHECKING:
    from .stores.cosmos.store import AsyncCosmosStore, CosmosStore

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
    "CodecError",
    "Compression",
    "ConfigurationError",
    "ConflictError",
    "CorruptCheckpointError",
    "CosmosStore",
    "DurableError",
    "FileStore",
    "InvalidRunIdError",
    "InvalidStateError",
    "Keyring",
    "LeaseLostError",
    "MemoryStore",
    "MessageTimeoutError",
    "MissingExtraError",
    "NondeterminismError",
    "PendingMessage",
    "Queue",
    "Recorded",
    "Recovered",
    "Retry",
    "RunCancelledError",
    "RunFailedError",
    "RunInfo",
    "RunLeasedError",
    "RunNotFoundError",
    "RunWaiting",
    "Schedule",
    "SignalTimeoutError",
    "StateTooLargeError",
    "Step",
    "StepContext",
    "StepMismatchError",
    "StepNotKeptError",
    "StepRecord",
    "Store",
    "StoreError",
    "StreamInfo",
    "StreamReset",
    "TooManyAttemptsError",
    "ValueCodec",
    "Workflow",
    "__version__",
    "async_store_for",
    "async_store_from_env",
    "await_child",
    "await_child_async",
    "call",
    "call_async",
    "cancel_run",
    "cancel_run_async",
    "close_stream",
    "close_stream_async",
    "current_step",
    "fork_run",
    "fork_run_async",
    "get_event",
    "get_event_async",
    "get_events",
    "get_events_async",
    "list_streams",
    "list_streams_async",
    "load_at",
    "load_at_async",
    "patched",
    "pending_messages",
    "pending_messages_async",
    "read_stream",
    "read_stream_async",
    "receive",
    "receive_async",
    "recover",
    "recover_async",
    "resume_run",
    "resume_run_async",
    "run",
    "run_async",
    "run_history",
    "run_history_async",
    "running_steps",
    "send_message",
    "send_message_async",
    "send_signal",
    "send_signal_async",
    "set_event",
    "set_event_async",
    "sleep",
    "sleep_until",
    "start_child",
    "start_child_async",
    "store_for",
    "store_from_env",
    "stream_info",
    "stream_info_async",
    "track_tasks",
    "typed_as",
    "upgrade_run",
    "upgrade_run_async",
    "wait_for_result",
    "wait_for_result_async",
    "wait_for_signal",
    "write_stream",
    "write_stream_async",
]


def __getattr__(name: str) -> Any:
    # The Cosmos stores load azure-cosmos: import them only when asked for. Without
    # the [cosmos] extra they are stand-ins whose use raises MissingExtraError (an
    # ImportError with the pip command), so `import *` and hasattr() still work.
    if name in ("CosmosStore", "AsyncCosmosStore"):
        from .stores.config import cosmos_class

        value = globals()[name] = cosmos_class(name)
        return value
    raise AttributeError(f"module 'durable_steps' has no attribute {name!r}")
