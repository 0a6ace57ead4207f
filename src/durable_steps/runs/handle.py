"""A run handle: everything a caller does to one run, on the object that names it.

``RunHandle[T]`` (a blocking store) and ``AsyncRunHandle[T]`` (an async store) carry
the store, the run id and how the run's final state becomes its typed result -- the
free functions take the first two on every call; a handle takes them once, as
Temporal's and DBOS's workflow handles do. Each method is one of the engine's free
functions (``wait_for_result``, ``cancel_run``, ``send_signal``, ``send_message``,
``read_stream``, ``get_events``, ``run_history``, ``fork_run``, ``resume_run``,
``upgrade_run``) or their async twins: the semantics are written once, there; a
handle adds only the result's type.

Where a handle comes from:

- ``flow.start(run_id, ...)`` of a code-first workflow (``durable.workflow``): its
  ``result()`` is the workflow function's return value, typed from its annotation;
- ``handle_for(store, run_id, result_type=...)`` for any existing run: its
  ``result()`` is the run's final state, validated as ``result_type`` when given (a
  Pydantic model or a dataclass of the state's fields), else the state as a dict;
  ``flow.handle(run_id, store=...)`` for a run of a code-first workflow.

The result type is the code's, never the store's: a handle names no class it would
read from a run, so a writable store cannot choose what code runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from ..runner.errors import not_found
from ..runner.typed import typed_as
from ..runner.workflow import Workflow
from ..seam.checkpoint import RunInfo
from ..seam.history import StepRecord
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store
from .cancel import cancel_run, cancel_run_async
from .events import get_events, get_events_async
from .fork import fork_run, fork_run_async
from .history import run_history, run_history_async
from .mailbox import send_message, send_message_async
from .results import wait_for_result, wait_for_result_async
from .resume import resume_run, resume_run_async
from .signals import send_signal, send_signal_async
from .streams import read_stream, read_stream_async
from .upgrade import upgrade_run, upgrade_run_async

T = TypeVar("T")

Result = Callable[[str, dict[str, Any]], T]
"""How a run's final state becomes its result: ``(run_id, state) -> T``."""

INTERVAL = 0.2
"""Seconds between two looks at a run that ``result()`` waits for."""


def _state(run_id: str, state: dict[str, Any]) -> dict[str, Any]:
    return state


def state_as(kind: Any) -> Result[Any]:
    """A run's final state validated as ``kind`` (a model or a dataclass of its fields)."""
    typed = typed_as(kind)

    def result(run_id: str, state: dict[str, Any]) -> Any:
        return typed.load(state, "its final state", run_id)

    return result


class _Handle(Generic[T]):
    __slots__ = ("_result", "run_id")

    def __init__(self, run_id: str, result: Result[T]) -> None:
        self.run_id = check_run_id(run_id)
        self._result = result

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.run_id!r})"


class RunHandle(_Handle[T]):
    """A run on a blocking store (see the top)."""

    __slots__ = ("store",)

    def __init__(self, store: Store, run_id: str, result: Result[T]) -> None:
        super().__init__(run_id, result)
        self.store = store

    def result(self, timeout: float | None = None, *, interval: float = INTERVAL) -> T:
        """The run's result once it completed (``wait_for_result``: ``RunFailedError``,
        ``RunCancelledError``, ``TimeoutError`` after ``timeout`` seconds)."""
        state = wait_for_result(self.store, self.run_id, timeout=timeout, interval=interval)
        return self._result(self.run_id, state)

    def info(self) -> RunInfo:
        """The run as the store lists it (status, step, lease, ...), without its state."""
        info = self.store.run_info(self.run_id)
        if info is None:
            raise not_found(self.run_id, "there is nothing to look at")
        return info

    def status(self) -> str | None:
        """``running``, ``waiting``, ``completed``, ``failed`` or ``cancelled``."""
        return self.info().status

    def cancel(self, reason: str | None = None) -> bool:
        """``cancel_run``: True if this call cancelled it."""
        return cancel_run(self.store, self.run_id, reason=reason)

    def signal(self, name: str, payload: Any = None) -> None:
        """``send_signal``: deliver the signal ``wait_for_signal(name)`` waits for."""
        send_signal(self.store, self.run_id, name, payload)

    def send(self, topic: str, payload: Any, *, idempotency_key: str | None = None) -> int:
        """``send_message`` to the run's mailbox: the message's number in its topic."""
        return send_message(
            self.store, self.run_id, topic, payload, idempotency_key=idempotency_key
        )

    def stream(
        self,
        name: str,
        *,
        after: int | None = None,
        follow: bool = True,
        wait: bool = False,
        timeout: float | None = None,
    ) -> Iterator[tuple[int, Any]]:
        """``read_stream``: ``(offset, chunk)`` of the run's stream ``name``."""
        return read_stream(
            self.store, self.run_id, name, after=after, follow=follow, wait=wait, timeout=timeout
        )

    def events(self) -> dict[str, Any]:
        """``get_events``: the run's events, by key."""
        return get_events(self.store, self.run_id)

    def history(self) -> list[StepRecord]:
        """``run_history``: the run's completed steps as the store keeps them."""
        return run_history(self.store, self.run_id)

    def fork(
        self,
        new_run_id: str,
        *,
        at_step: int,
        update: Mapping[str, Any] | None = None,
        at_call: int | None = None,
    ) -> RunHandle[T]:
        """``fork_run``: a new run from this one after step ``at_step``; its handle (run
        it, or let a worker take it)."""
        fork_run(
            self.store, self.run_id, new_run_id, at_step=at_step, update=update, at_call=at_call
        )
        return RunHandle(self.store, new_run_id, self._result)

    def resume(self) -> None:
        """``resume_run``: a failed or stopped run made runnable again."""
        resume_run(self.store, self.run_id)

    def upgrade(self, workflow: Workflow) -> bool:
        """``upgrade_run``: the run moved to ``workflow``'s version."""
        return upgrade_run(self.store, self.run_id, workflow)


class AsyncRunHandle(_Handle[T]):
    """A run on an async store: ``RunHandle``'s methods, awaited."""

    __slots__ = ("store",)

    def __init__(self, store: AsyncStore, run_id: str, result: Result[T]) -> None:
        super().__init__(run_id, result)
        self.store = store

    async def result(self, timeout: float | None = None, *, interval: float = INTERVAL) -> T:
        """``RunHandle.result``."""
        state = await wait_for_result_async(
            self.store, self.run_id, timeout=timeout, interval=interval
        )
        return self._result(self.run_id, state)

    async def info(self) -> RunInfo:
        """``RunHandle.info``."""
        info = await self.store.run_info(self.run_id)
        if info is None:
            raise not_found(self.run_id, "there is nothing to look at")
        return info

    async def status(self) -> str | None:
        """``RunHandle.status``."""
        return (await self.info()).status

    async def cancel(self, reason: str | None = None) -> bool:
        """``RunHandle.cancel``."""
        return await cancel_run_async(self.store, self.run_id, reason=reason)

    async def signal(self, name: str, payload: Any = None) -> None:
        """``RunHandle.signal``."""
        await send_signal_async(self.store, self.run_id, name, payload)

    async def send(self, topic: str, payload: Any, *, idempotency_key: str | None = None) -> int:
        """``RunHandle.send``."""
        return await send_message_async(
            self.store, self.run_id, topic, payload, idempotency_key=idempotency_key
        )

    def stream(
        self,
        name: str,
        *,
        after: int | None = None,
        follow: bool = True,
        wait: bool = False,
        timeout: float | None = None,
    ) -> AsyncIterator[tuple[int, Any]]:
        """``RunHandle.stream`` (an async iterator)."""
        return read_stream_async(
            self.store, self.run_id, name, after=after, follow=follow, wait=wait, timeout=timeout
        )

    async def events(self) -> dict[str, Any]:
        """``RunHandle.events``."""
        return await get_events_async(self.store, self.run_id)

    async def history(self) -> list[StepRecord]:
        """``RunHandle.history``."""
        return await run_history_async(self.store, self.run_id)

    async def fork(
        self,
        new_run_id: str,
        *,
        at_step: int,
        update: Mapping[str, Any] | None = None,
        at_call: int | None = None,
    ) -> AsyncRunHandle[T]:
        """``RunHandle.fork``."""
        await fork_run_async(
            self.store, self.run_id, new_run_id, at_step=at_step, update=update, at_call=at_call
        )
        return AsyncRunHandle(self.store, new_run_id, self._result)

    async def resume(self) -> None:
        """``RunHandle.resume``."""
        await resume_run_async(self.store, self.run_id)

    async def upgrade(self, workflow: Workflow) -> bool:
        """``RunHandle.upgrade``."""
        return await upgrade_run_async(self.store, self.run_id, workflow)


@overload
def handle_for(store: Store, run_id: str) -> RunHandle[dict[str, Any]]: ...


@overload
def handle_for(store: Store, run_id: str, result_type: type[T]) -> RunHandle[T]: ...


def handle_for(store: Store, run_id: str, result_type: Any = None) -> RunHandle[Any]:
    """A handle of the existing run ``run_id`` (see the top)."""
    return RunHandle(store, run_id, _state if result_type is None else state_as(result_type))


@overload
def handle_for_async(store: AsyncStore, run_id: str) -> AsyncRunHandle[dict[str, Any]]: ...


@overload
def handle_for_async(store: AsyncStore, run_id: str, result_type: type[T]) -> AsyncRunHandle[T]: ...


def handle_for_async(
    store: AsyncStore, run_id: str, result_type: Any = None
) -> AsyncRunHandle[Any]:
    """``handle_for`` for async stores."""
    return AsyncRunHandle(store, run_id, _state if result_type is None else state_as(result_type))
