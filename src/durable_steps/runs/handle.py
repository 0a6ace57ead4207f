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

Design: one implementation, two drivers (the runner's programs and drivers). What a
handle does is written once, in ``_Handle``, as programs of the engine's requests
(``runner.requests``; the free functions' own programs, ``_await``, ``_cancel``, ...);
``RunHandle`` runs each against a blocking store (``_blocking``) and ``AsyncRunHandle``
awaits it on an async one (``_awaited``). Both are typed from the one program --
``_blocking`` keeps its parameters and returns its result type, ``_awaited`` a coroutine
of it -- so ``flow.start(...).result()`` is the workflow's return type to mypy. Only
what is not one program (reading a stream: an iterator of each kind; the history and
an upgrade, whose free functions reach the store directly) delegates twice.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator, Mapping
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from ..runner.errors import not_found
from ..runner.requests import Info, Request, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.typed import typed_as
from ..runner.workflow import Workflow
from ..seam.checkpoint import RunInfo
from ..seam.history import StepRecord
from ..seam.rules import check_run_id
from ..seam.store import AsyncStore, Store
from .cancel import _cancel
from .events import _events
from .fork import _fork
from .history import run_history, run_history_async
from .mailbox import _send
from .results import _await
from .resume import resume_program
from .signals import _deliver
from .streams import read_stream, read_stream_async
from .upgrade import upgrade_run, upgrade_run_async

T = TypeVar("T")
S = TypeVar("S", Store, AsyncStore)
V = TypeVar("V")
R = TypeVar("R")
P = ParamSpec("P")
H = TypeVar("H", bound="_Handle[Any, Any]")

Program = Generator[Request, Any, V]
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


class _Handle(Generic[T, S]):
    """A run, its store, and what a caller does to it as programs (see the top)."""

    __slots__ = ("_result", "run_id", "store")

    def __init__(self, store: S, run_id: str, result: Result[T]) -> None:
        self.run_id = check_run_id(run_id)
        self.store: S = store
        self._result = result

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.run_id!r})"

    def _result_of(
        self, /, timeout: float | None = None, *, interval: float = INTERVAL
    ) -> Program[T]:
        """The run's result once it completed (``wait_for_result``: ``RunFailedError``,
        ``RunCancelledError``, ``TimeoutError`` after ``timeout`` seconds)."""
        state = yield from _await(self.run_id, timeout, interval)
        return self._result(self.run_id, state)

    def _info(self, /) -> Program[RunInfo]:
        """The run as the store lists it (status, step, lease, ...), without its state."""
        info: RunInfo | None = yield Info(self.run_id)
        if info is None:
            raise not_found(self.run_id, "there is nothing to look at")
        return info

    def _status(self, /) -> Program[str | None]:
        """``running``, ``waiting``, ``completed``, ``failed`` or ``cancelled``."""
        info = yield from self._info()
        return info.status

    def _cancel(self, /, reason: str | None = None) -> Program[bool]:
        """``cancel_run``: True if this call cancelled it."""
        return (yield from _cancel(self.run_id, reason))

    def _signal(self, /, name: str, payload: Any = None) -> Program[None]:
        """``send_signal``: deliver the signal ``wait_for_signal(name)`` waits for."""
        yield from _deliver(self.run_id, name, payload)

    def _send(
        self, /, topic: str, payload: Any, *, idempotency_key: str | None = None
    ) -> Program[int]:
        """``send_message`` to the run's mailbox: the message's number in its topic."""
        return (yield from _send(self.run_id, topic, payload, idempotency_key))

    def _events(self, /) -> Program[dict[str, Any]]:
        """``get_events``: the run's events, by key."""
        return (yield from _events(self.run_id))

    def _fork(
        self,
        /,
        new_run_id: str,
        *,
        at_step: int | None = None,
        update: Mapping[str, Any] | None = None,
        at_call: int | None = None,
    ) -> Program[Self]:
        """``fork_run``: a new run from this one after step ``at_step``, or -- a code-first
        run, whose history is its calls -- after its first ``at_call`` recorded calls
        (``at_call`` alone); its handle (run it, or let a worker take it)."""
        yield from _fork(self.run_id, new_run_id, at_step, update, at_call)
        return type(self)(self.store, new_run_id, self._result)

    def _resume(self, /) -> Program[None]:
        """``resume_run``: a failed or stopped run made runnable again."""
        yield from resume_program(self.run_id)


def _named(method: Callable[..., Any], op: Callable[..., Any]) -> None:
    functools.update_wrapper(method, op)
    method.__name__ = op.__name__.strip("_").removesuffix("_of")
    method.__qualname__ = method.__name__


def _blocking(op: Callable[Concatenate[H, P], Program[R]]) -> Callable[Concatenate[H, P], R]:
    """The program ``op`` as a method run against the handle's blocking store."""

    def method(self: H, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return execute(op(self, *args, **kwargs), blocking_io(self.store))

    _named(method, op)
    return method


def _awaited(
    op: Callable[Concatenate[H, P], Program[R]],
) -> Callable[Concatenate[H, P], Coroutine[Any, Any, R]]:
    """The program ``op`` as a coroutine method on the handle's async store."""

    async def method(self: H, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await execute_on(op(self, *args, **kwargs), self.store)

    _named(method, op)
    return method


class RunHandle(_Handle[T, Store]):
    """A run on a blocking store (see the top)."""

    __slots__ = ()

    result = _blocking(_Handle._result_of)
    info = _blocking(_Handle._info)
    status = _blocking(_Handle._status)
    cancel = _blocking(_Handle._cancel)
    signal = _blocking(_Handle._signal)
    send = _blocking(_Handle._send)
    events = _blocking(_Handle._events)
    fork = _blocking(_Handle._fork)
    resume = _blocking(_Handle._resume)

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

    def history(self) -> list[StepRecord]:
        """``run_history``: the run's completed steps as the store keeps them."""
        return run_history(self.store, self.run_id)

    def upgrade(self, workflow: Workflow) -> bool:
        """``upgrade_run``: the run moved to ``workflow``'s version."""
        return upgrade_run(self.store, self.run_id, workflow)


class AsyncRunHandle(_Handle[T, AsyncStore]):
    """A run on an async store: ``RunHandle``'s methods, awaited."""

    __slots__ = ()

    result = _awaited(_Handle._result_of)
    info = _awaited(_Handle._info)
    status = _awaited(_Handle._status)
    cancel = _awaited(_Handle._cancel)
    signal = _awaited(_Handle._signal)
    send = _awaited(_Handle._send)
    events = _awaited(_Handle._events)
    fork = _awaited(_Handle._fork)
    resume = _awaited(_Handle._resume)

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

    async def history(self) -> list[StepRecord]:
        """``RunHandle.history``."""
        return await run_history_async(self.store, self.run_id)

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
