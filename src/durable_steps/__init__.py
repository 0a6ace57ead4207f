"""durable-steps: checkpoint after every step, resume where a crashed run stopped."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from . import durable  # code-first workflows: @durable.step, @durable.workflow
from .runner.children import await_child, await_child_async, start_child, start_child_async
from .runner.drivers import run, run_async
from .runner.events import set_event, set_event_async
from .runner.journal import call, call_async
from .runner.mailbox import receive, receive_async
from .runner.patches import patched
from .runner.queues import Queue
from .runner.retry import Retry
from .runner.signals import wait_for_signal
from .runner.step import Step, StepContext, current_step, running_steps
from .runner.streams import (
    StreamReset,
    close_stream,
    close_stream_async,
    write_stream,
    write_stream_async,
)
from .runner.tasks import track_tasks
from .runner.timers import sleep, sleep_until
from .runner.typed import Recorded, typed_as
from .runner.workflow import Workflow
from .runs.cancel import cancel_run, cancel_run_async
from .runs.events import get_event, get_event_async, get_events, get_events_async
from .runs.fork import fork_run, fork_run_async
from .runs.handle import AsyncRunHandle, RunHandle, handle_for, handle_for_async
from .runs.history import load_at, load_at_async, run_history, run_history_async
from .runs.mailbox import (
    PendingMessage,
    pending_messages,
    pending_messages_async,
    send_message,
    send_message_async,
)
from .runs.results import wait_for_result, wait_for_result_async
from .runs.resume import resume_run, resume_run_async
from .runs.signals import send_signal, send_signal_async
from .runs.stream_index import (
    StreamInfo,
    list_streams,
    list_streams_async,
    stream_info,
    stream_info_async,
)
from .runs.streams import read_stream, read_stream_async
from .runs.upgrade import upgrade_run, upgrade_run_async
from .seam.attempts import Attempt
from .seam.callindex import CallEntry
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
    StreamNotFoundError,
    TooManyAttemptsError,
)
from .seam.history import StepRecord
from .seam.lease import owner_label
from .seam.store import AsyncStore, Store
from .stores.config import async_store_for, async_store_from_env, store_for, store_from_env
from .stores.file.async_store import AsyncFileStore
from .stores.file.store import FileStore
from .stores.memory import AsyncMemoryStore, MemoryStore
from .workers.overview import Fleet, QueueInfo, ScheduleInfo, WorkerInfo, fleet
from .workers.recovery import Recovered, recover, recover_async
from .workers.schedules import Schedule

if TYPE_CHECKING:
    from .stores.cosmos.store import AsyncCosmosStore, CosmosStore

logging.getLogger("durable_steps").addHandler(logging.NullHandler())

try:
    __version__ = version("durable-steps")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [  # noqa: RUF022 - grouped by purpose, as readers look for them; a test pins the set
    # -- Defining and running a run, here
    "Workflow",
    "Step",
    "StepContext",
    "Retry",
    "Queue",
    "run",
    "run_async",
    "current_step",
    "running_steps",
    "track_tasks",
    # -- Code-first: decorated functions (@durable.workflow, @durable.step)
    "durable",
    # -- Inside a step: durable operations
    "call",
    "call_async",
    "Recorded",
    "typed_as",
    "sleep",
    "sleep_until",
    "patched",
    "wait_for_signal",
    "receive",
    "receive_async",
    "write_stream",
    "write_stream_async",
    "close_stream",
    "close_stream_async",
    "StreamReset",
    "set_event",
    "set_event_async",
    # -- Child runs
    "start_child",
    "start_child_async",
    "await_child",
    "await_child_async",
    # -- Reaching a run from outside (durable_steps.runs): a handle, or the free functions
    "RunHandle",
    "AsyncRunHandle",
    "handle_for",
    "handle_for_async",
    "wait_for_result",
    "wait_for_result_async",
    "cancel_run",
    "cancel_run_async",
    "send_signal",
    "send_signal_async",
    "send_message",
    "send_message_async",
    "pending_messages",
    "pending_messages_async",
    "PendingMessage",
    "read_stream",
    "read_stream_async",
    "list_streams",
    "list_streams_async",
    "stream_info",
    "stream_info_async",
    "StreamInfo",
    "get_event",
    "get_event_async",
    "get_events",
    "get_events_async",
    # -- A run's life: history, fork, resume, versions
    "run_history",
    "run_history_async",
    "load_at",
    "load_at_async",
    "StepRecord",
    "Attempt",
    "CallEntry",
    "fork_run",
    "fork_run_async",
    "resume_run",
    "resume_run_async",
    "upgrade_run",
    "upgrade_run_async",
    # -- Workers: recovery and schedules
    "recover",
    "recover_async",
    "Recovered",
    "Schedule",
    # -- The fleet as an operator sees it (workers, queues, schedules)
    "fleet",
    "Fleet",
    "WorkerInfo",
    "QueueInfo",
    "ScheduleInfo",
    "owner_label",
    # -- Stores: the interface, the built-in ones, and opening one by name
    "Store",
    "AsyncStore",
    "Checkpoint",
    "RunInfo",
    "FileStore",
    "AsyncFileStore",
    "MemoryStore",
    "AsyncMemoryStore",
    "CosmosStore",
    "AsyncCosmosStore",
    "store_for",
    "store_from_env",
    "async_store_for",
    "async_store_from_env",
    # -- Values encoded at rest (docs/security.md)
    "ValueCodec",
    "Compression",
    "Keyring",
    # -- Errors (the tree is drawn at the top of seam/errors.py)
    "DurableError",
    "ConfigurationError",
    "MissingExtraError",
    "StoreError",
    "ConflictError",
    "CorruptCheckpointError",
    "CodecError",
    "InvalidRunIdError",
    "InvalidStateError",
    "StateTooLargeError",
    "StepMismatchError",
    "NondeterminismError",
    "StepNotKeptError",
    "LeaseLostError",
    "RunLeasedError",
    "RunNotFoundError",
    "StreamNotFoundError",
    "RunCancelledError",
    "RunFailedError",
    "TooManyAttemptsError",
    "SignalTimeoutError",
    "MessageTimeoutError",
    # -- Control flow: a run that waits
    "RunWaiting",
    # -- The package
    "__version__",
]


def __getattr__(name: str) -> Any:
    # The Cosmos stores load azure-cosmos: import them only when asked for. Without
    # the [cosmos] extra they are stand-ins whose use raises MissingExtraError (an
    # ImportError with the pip command), so `import *` and hasattr() still work.
    if name in ("CosmosStore", "AsyncCosmosStore"):
        from .stores.cosmos.backend import cosmos_class

        value = globals()[name] = cosmos_class(name)
        return value
    raise AttributeError(f"module 'durable_steps' has no attribute {name!r}")
