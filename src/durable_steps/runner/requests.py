"""Programs and their requests: what the runner, a heartbeat or a signal asks a driver
to do.

The semantics of a run (``run``), of keeping its lease (``lease_keeper``) and of
delivering a signal (``signals``) are generators free of I/O: each yields a
``Request`` -- ``Load``, ``Save``, ``Call`` a step, ``Sleep``, ``Info`` (a run's
metadata), ``LoadHead`` and ``SaveHead`` (a run's checkpoint without its data) -- and
is resumed with its result, or has its exception thrown in. ``execute`` and ``execute_async``
run such a program to its end, doing each request with a given function:
``store_io``'s for loads, saves and sleeps against a blocking or an async store,
the drivers' (``drivers``, for ``run`` and ``run_async``) for steps, heartbeats and
the lease too. So each piece of semantics is written once, and sync and async code
cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from ..seam.checkpoint import Checkpoint

if TYPE_CHECKING:
    from ..seam.state import FrozenState
    from .step import Step, StepContext

T = TypeVar("T")

StoreMethod = Literal[
    "load",
    "save",
    "load_head",
    "save_head",
    "run_info",
    "load_at",
    "append_item",
    "put_item",
    "read_items",
]
"""The methods of ``Store`` (and, awaited, of ``AsyncStore``) that requests name."""


class StoreCall(NamedTuple):
    """A request as one call of a store's method: the one place that maps the request
    vocabulary onto the store's surface, for blocking and async stores alike."""

    method: StoreMethod
    args: tuple[Any, ...]
    kwargs: dict[str, Any] | None = None
    writes: bool = False
    """A write: an async driver lets it finish when cancelled, so its outcome is known."""


# Requests are made several times per step: NamedTuples, which cost a fraction of a
# frozen dataclass to make.


class Load(NamedTuple):
    run_id: str

    def store_call(self) -> StoreCall:
        return StoreCall("load", (self.run_id,))


class Save(NamedTuple):
    checkpoint: Checkpoint
    guard: Callable[[], object] | None = None
    """Called by a run's driver under its save lock, just before the save: raising
    there keeps the checkpoint from being saved (a call that outlived its step)."""

    def store_call(self) -> StoreCall:
        return StoreCall("save", (self.checkpoint,), writes=True)


class Call(NamedTuple):
    step: Step
    context: StepContext
    state: FrozenState


class Sleep(NamedTuple):
    seconds: float


class LoadHead(NamedTuple):
    """The run's checkpoint but its data (``seam.store.HeadStore``), or None."""

    run_id: str

    def store_call(self) -> StoreCall:
        return StoreCall("load_head", (self.run_id,))


class SaveHead(NamedTuple):
    """Save a checkpoint read by ``LoadHead`` (its state not read): every field but its
    data, on top of the stored version, whose state and journal stay."""

    checkpoint: Checkpoint

    def store_call(self) -> StoreCall:
        return StoreCall("save_head", (self.checkpoint,), writes=True)


class Info(NamedTuple):
    """The run's ``RunInfo`` (its metadata, not its state), or None."""

    run_id: str

    def store_call(self) -> StoreCall:
        return StoreCall("run_info", (self.run_id,))


# -- history --


class LoadAt(NamedTuple):
    """The checkpoint after a kept step (``Store.load_at``), or None: no such run."""

    run_id: str
    step: int

    def store_call(self) -> StoreCall:
        return StoreCall("load_at", (self.run_id, self.step))


# -- per-run items (streams, events: ``streams``, ``events``; ``seam.items``) ------------


class AppendItem(NamedTuple):
    """Create an item of the run (create-only: an existing key is ``ConflictError``)."""

    run_id: str
    kind: str
    key: str
    value: Any

    def store_call(self) -> StoreCall:
        return StoreCall("append_item", (self.run_id, self.kind, self.key, self.value), writes=True)


class PutItem(NamedTuple):
    """Create or replace an item of the run."""

    run_id: str
    kind: str
    key: str
    value: Any

    def store_call(self) -> StoreCall:
        return StoreCall("put_item", (self.run_id, self.kind, self.key, self.value), writes=True)


class ReadItems(NamedTuple):
    """The run's items of a kind after a key, in key order, at most ``limit``."""

    run_id: str
    kind: str
    after: str | None = None
    limit: int | None = None

    def store_call(self) -> StoreCall:
        return StoreCall(
            "read_items", (self.run_id, self.kind), {"after": self.after, "limit": self.limit}
        )


ItemRequest = AppendItem | PutItem | ReadItems
StoreRequest = Load | Save | Info | LoadHead | SaveHead | LoadAt | ItemRequest
"""The requests a store answers, each turned into its call by ``store_call``."""
Request = StoreRequest | Call | Sleep
R = TypeVar("R")


def execute(program: Generator[R, Any, T], do: Callable[[R], Any]) -> T:
    """Run ``program`` to its end, doing each request with ``do``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = program.send(value) if error is None else program.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = do(request)
        except BaseException as exc:  # handed to the program, which decides
            error = exc


async def execute_async(program: Generator[R, Any, T], do: Callable[[R], Awaitable[Any]]) -> T:
    """``execute`` for asyncio."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = program.send(value) if error is None else program.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await do(request)
        except BaseException as exc:
            error = exc
