"""``@durable.step``: a function whose every call inside a run is a durable call.

Design. The decorator returns a plain function (no class, no ``__call__`` lookup)
that asks one thing first: is a step running here (``current_step()`` has a
journal)? Outside a run it calls the function and returns what it returns: the
decorated function is still just the function in a unit test or a script. Inside a
run it is exactly the engine's ``call`` (``call_async`` for an async function), so
replay, retries, numbering by task, streams and the record's save are the engine's:

- its **name** is the function's qualified name (``name=`` overrides it);
- its **identity** adds its arguments: a stable key of the bound arguments
  (``_types.Signature.key``: canonical JSON, hashed; or ``key=``, a function of the
  arguments, for arguments that have no JSON form or a better identity -- a tool
  call's id) and an occurrence counter per (name, key) within the step attempt, so
  that two identical calls stay two calls. Where the engine's ``call`` takes a
  ``key=`` the identity is that key, by which a call replays whatever task or order
  makes it; where it does not, the key is part of the call's name, so a replay that
  asks for other arguments at a recorded place is a ``StepMismatchError`` instead
  of another call's result;
- its **result** is typed from the return annotation (``returns=`` of ``call``: a
  Pydantic model, a dataclass, ``list[Plan]``; plain JSON annotations cost nothing);
- ``retries=`` (a ``Retry``, or an int: that many retries after the first try, one
  second's backoff doubling) and ``timeout=`` (seconds per try: a ``TimeoutError``,
  retried like any other error; an async function is cancelled, a sync one is left
  running in its thread, since Python cannot stop a thread -- prefer async functions
  where a timeout matters).

An async function's wrapper is a plain function that returns ``call_async``'s
coroutine, so the call takes its place in the numbering when it is called, in the
caller's task, as ``call_async`` does: ``asyncio.gather(search(a), search(b))``
numbers the two in the order written. A sync function decorated as a step and called
inside an async step is refused by ``call`` (it would block the event loop during
its save): declare it ``async def``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from ..runner.identity import RESERVED
from ..runner.journal import call, call_async
from ..runner.retry import Retry
from ..runner.step import current_step
from ._types import Signature, qualified_name, returns_of

P = ParamSpec("P")
R = TypeVar("R")

_KEYED = "key" in inspect.signature(call).parameters
"""Whether the engine's ``call`` takes an identity key (see the top)."""

_counts: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], int]] = weakref.WeakKeyDictionary()
"""Per step attempt (its journal): how many calls of each (name, key) it made."""


def retry_of(retries: Retry | int | None, what: str) -> Retry | None:
    """``retries=`` as the engine's ``Retry`` (an int: that many retries after the first)."""
    if retries is None or isinstance(retries, Retry):
        return retries
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise TypeError(f"{what}: retries= takes a Retry or an int >= 0, not {retries!r}")
    return Retry(attempts=retries + 1) if retries else None


@overload
def step(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def step(
    *,
    name: str | None = None,
    retries: Retry | int | None = None,
    timeout: float | None = None,
    key: Callable[..., str] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def step(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    retries: Retry | int | None = None,
    timeout: float | None = None,
    key: Callable[..., str] | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Make ``fn`` a durable step (see the top): ``@durable.step`` or
    ``@durable.step(name=..., retries=..., timeout=..., key=...)``."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return _durable(fn, name=name, retries=retries, timeout=timeout, key=key)

    return decorate if fn is None else decorate(fn)


def _durable(
    fn: Callable[P, R],
    *,
    name: str | None,
    retries: Retry | int | None,
    timeout: float | None,
    key: Callable[..., str] | None,
) -> Callable[P, R]:
    if not callable(fn):
        raise TypeError(f"@durable.step decorates a function, not {fn!r}")
    step_name = qualified_name(fn) if name is None else name
    what = f"durable step {step_name!r}"
    retry = retry_of(retries, what)
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise ValueError(f"{what}: timeout= is seconds > 0, not {timeout!r}")
    if key is not None and not callable(key):
        raise TypeError(f"{what}: key= is a function of the step's arguments, not {key!r}")
    sig = Signature(fn, step_name)
    is_async = inspect.iscoroutinefunction(fn)
    typed: list[Any] = []  # the return type, resolved at the first call in a run

    def identity(journal: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        found = key(*args, **kwargs) if key is not None else sig.key(args, kwargs)
        if not isinstance(found, str):
            raise TypeError(f"{what}: key= must return a str, not {found!r}")
        counts = _counts.get(journal)
        if counts is None:
            counts = _counts[journal] = {}
        n = counts.get((step_name, found), 0)
        counts[(step_name, found)] = n + 1
        return found if n == 0 else f"{found}#{n}"  # the n+1th call with these arguments

    target = _target(fn, sig, timeout, is_async)

    def options(journal: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
        """The call's name and ``call``'s options: its identity as ``key=`` (named, so two
        steps given the same arguments stay apart), or in its name (see the top)."""
        if not typed:
            typed.append(returns_of(sig))
        ident = identity(journal, args, kwargs)
        if _KEYED:
            return step_name, {"retry": retry, "returns": typed[0], "key": f"{step_name}:{ident}"}
        return f"{step_name}({ident})", {"retry": retry, "returns": typed[0]}

    if is_async:

        def durable_async(*args: P.args, **kwargs: P.kwargs) -> Any:
            journal = _journal()
            if journal is None:
                return fn(*args, **kwargs)
            called, opts = options(journal, args, kwargs)
            run, a, kw = target(args, kwargs)
            return call_async(called, run, *a, **opts, **kw)

        wrapper: Callable[..., Any] = durable_async
        _mark_coroutine(wrapper)
    else:

        def durable_sync(*args: P.args, **kwargs: P.kwargs) -> Any:
            journal = _journal()
            if journal is None:
                return fn(*args, **kwargs)
            if journal.driven.is_async:
                raise TypeError(
                    f"{what} is a plain function called in an async step, where its save "
                    "would block the event loop: declare it 'async def' and await it"
                )
            called, opts = options(journal, args, kwargs)
            run, a, kw = target(args, kwargs)
            return call(called, run, *a, **opts, **kw)

        wrapper = durable_sync
    functools.update_wrapper(wrapper, fn)
    wrapper.durable_name = step_name  # type: ignore[attr-defined]
    return wrapper


Target = Callable[
    [tuple[Any, ...], dict[str, Any]], tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
]


def _target(
    fn: Callable[..., Any], sig: Signature, timeout: float | None, is_async: bool
) -> Target:
    """What ``call`` runs for the arguments of one call: the function itself with them
    where it can (``call`` then looks at one function once, never at a new object per
    call); a function whose parameters share a name with ``call``'s own (``key``,
    ``retry``, ``returns``) or take any keyword, behind a closure (``call`` passes it
    nothing); with a timeout, the function run within it."""
    timed = None if timeout is None else _timed_async if is_async else _timed
    direct = not any(
        p.name in RESERVED or p.kind is p.VAR_KEYWORD for p in sig.sig.parameters.values()
    )

    def target(
        args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
        if timed is not None:
            return timed, (fn, timeout, args, kwargs), {}
        if direct:
            return fn, args, kwargs
        return (lambda: fn(*args, **kwargs)), (), {}

    return target


def _journal() -> Any:
    """The running step attempt's journal, or None outside a run."""
    try:
        return current_step().journal
    except RuntimeError:
        return None


def _mark_coroutine(fn: Callable[..., Any]) -> None:
    """Tell ``inspect.iscoroutinefunction`` (and so frameworks that look) that ``fn``'s
    calls are awaited, as the function it wraps (Python 3.12+ can say so)."""
    mark = getattr(inspect, "markcoroutinefunction", None)
    if mark is not None:
        mark(fn)


async def _timed_async(
    fn: Callable[..., Any], timeout: float, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    async with asyncio.timeout(timeout):
        return await fn(*args, **kwargs)


_pool: list[concurrent.futures.ThreadPoolExecutor] = []


def _timed(
    fn: Callable[..., Any], timeout: float, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``fn`` in a thread (the call's context with it), its result within ``timeout``."""
    if not _pool:
        _pool.append(concurrent.futures.ThreadPoolExecutor(thread_name_prefix="durable-step"))
    context = contextvars.copy_context()
    future = _pool[0].submit(context.run, fn, *args, **kwargs)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(
            f"{qualified_name(fn)} did not return within {timeout} s (it goes on in its "
            "thread; its result will not be recorded)"
        ) from None
