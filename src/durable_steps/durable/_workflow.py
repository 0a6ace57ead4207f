"""``@durable.workflow``: a typed function as a workflow the engine runs.

Design. A code-first workflow *is* a ``Workflow`` (``Flow`` subclasses it): one step,
named after the workflow, whose function validates the run's stored arguments back
into the function's parameter types, calls the function and stores what it returns.
Everything the engine does for a ``Workflow`` it does for a flow, unchanged: workers
(``durable-steps worker mod:flow``), ``recover``, queues, schedules, child runs,
streams, events, the mailbox, signals, sleeps, versions and ``patched()``, deadlines,
history, fork and upgrade. Inside the function, durable work is ``@durable.step``
calls (or ``call``): on a resumed run the function runs again from its top, and every
call already recorded returns its record without running.

- **The run's state** is ``{"args": {parameter: JSON}}`` when it starts and gains
  ``{"result": JSON}`` when the function returns: plain JSON, as every store keeps.
  A run started by the workflow's name alone (a ``Schedule``, ``runs start``) has its
  input at the top of the state: a parameter missing from ``args`` is taken from
  there (``scheduled_at``, a schedule's ``input``), validated like the others.
- **Inputs are validated before the run is created** (``flow.run``, ``flow.start``,
  ``flow.start_child``): the call is bound to the signature (a missing or unknown
  argument is a ``TypeError`` naming the workflow), and each annotated parameter is
  validated by a Pydantic ``TypeAdapter`` of its annotation, then stored as its JSON.
  A value that does not validate is ``InvalidStateError`` naming the workflow, the
  parameter, the field and the type; nothing is written. Inside the run the stored
  JSON is validated back, so the function gets its models and dataclasses.
- **The result** is typed from the return annotation: stored as JSON, and validated
  back by ``flow.run`` and by the run's handle (``RunHandle[T]``, ``runs.handle``).
- **The store comes second, positionally**: ``flow.run(run_id, store, *args,
  **kwargs)``, as ``Workflow.run(run_id, store)``. Type checkers see the function's own
  parameters after it (PEP 612 allows no keyword-only parameter among them, and a
  keyword ``store=`` would collide with a parameter of that name).

Options of ``Workflow`` are the decorator's: ``name=``, ``queue=``, ``version=``,
``timeout=``, ``max_attempts=``, and ``retries=`` (the step's ``Retry``: the whole
function is retried, its recorded calls replayed).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, overload

from ..runner import children
from ..runner.claim import MAX_ATTEMPTS
from ..runner.queues import Queue
from ..runner.retry import Retry
from ..runner.step import Step, current_step
from ..runner.workflow import Workflow
from ..runs.handle import AsyncRunHandle, RunHandle
from ..seam.errors import InvalidStateError
from ..seam.state import thaw
from ..seam.store import AsyncStore, Store
from ._step import retry_of
from ._types import Signature, adapter, invalid, qualified_name

P = ParamSpec("P")
R = TypeVar("R")

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class Typing:
    """A workflow function's parameters and result, to JSON and back (see the top)."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.name, self.sig = name, Signature(fn, f"workflow {name!r}")
        for p in self.sig.sig.parameters.values():
            if p.kind in _VARIADIC:
                raise TypeError(
                    f"workflow {name!r}: *{p.name} / **{p.name} have no fixed name to store "
                    "them by; declare each parameter (a list or a model for many values)"
                )
        self._adapters: dict[str, Any] | None = None

    def adapters(self) -> dict[str, Any]:
        """Each annotated parameter's and the result's (``"return"``) TypeAdapter."""
        if self._adapters is None:
            self._adapters = {
                name: adapter(kind, f"workflow {self.name!r}: {name}")
                for name, kind in self.sig.hints().items()
                if kind is not Any
            }
        return self._adapters

    def dump(self, run_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments as the run stores them, validated (see the top)."""
        try:
            bound = self.sig.sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"workflow {self.name!r}: {exc}") from None
        bound.apply_defaults()
        adapters = self.adapters()
        stored = {}
        for name, given in bound.arguments.items():
            ta = adapters.get(name)
            stored[name] = (
                given
                if ta is None
                else ta.dump_python(self._valid(ta, given, name, run_id), mode="json")
            )
        return {"args": stored}

    def load(self, run_id: str, state: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The function's arguments from the run's state, as their types."""
        stored = thaw(state.get("args", {}))
        adapters = self.adapters()
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in self.sig.sig.parameters.values():
            if p.name in stored:
                value = stored[p.name]
            elif p.name in state and p.name not in ("args", "result"):
                value = thaw(state[p.name])  # a run started by name: a Schedule's input
            else:
                continue  # a parameter added since the run began: its default
            ta = adapters.get(p.name)
            if ta is not None:
                value = self._valid(ta, value, p.name, run_id)
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(value)
            else:
                kwargs[p.name] = value
        return args, kwargs

    def _valid(self, ta: Any, value: Any, name: str, run_id: str) -> Any:
        from pydantic import ValidationError

        try:
            return ta.validate_python(value)
        except ValidationError as exc:
            raise invalid(
                exc,
                f"workflow {self.name!r}: parameter {name!r}",
                self.sig.hints().get(name),
                run_id,
                "pass a value of the declared type; nothing was started",
            ) from None

    def result_of(self, value: Any) -> dict[str, Any]:
        """The step's update: what the function returned, as JSON."""
        ta = self.adapters().get("return")
        return {"result": value if ta is None else ta.dump_python(value, mode="json")}

    def result(self, run_id: str, state: Mapping[str, Any]) -> Any:
        """The function's result from a completed run's final state, as its type."""
        if "result" not in state:
            raise invalid_result(self.name, run_id)
        value = thaw(state["result"])
        ta = self.adapters().get("return")
        if ta is None:
            return value
        from pydantic import ValidationError

        try:
            return ta.validate_python(value)
        except ValidationError as exc:
            raise invalid(
                exc,
                f"the result of workflow {self.name!r}",
                self.sig.hints().get("return"),
                run_id,
                "the return type changed since the run ended: keep it compatible",
            ) from None


def invalid_result(name: str, run_id: str) -> InvalidStateError:
    return InvalidStateError(
        f"run {run_id!r} has no result of workflow {name!r} in its final state: it is a run "
        "of another workflow (use handle_for(store, run_id) for its state)",
        run_id=run_id,
    )


class Child(Generic[R]):
    """A child run started by ``flow.start_child``: ``result()`` (or ``await
    result_async()``) waits for it without holding a worker (``await_child``)."""

    __slots__ = ("_typing", "run_id")

    def __init__(self, typing: Typing, run_id: str) -> None:
        self._typing, self.run_id = typing, run_id

    def result(self) -> R:
        """The child's result (the parent waits, suspended, until it ends)."""
        return self._typing.result(self.run_id, children.await_child(self.run_id))  # type: ignore[no-any-return]

    async def result_async(self) -> R:
        """``result`` in an async workflow."""
        state = await children.await_child_async(self.run_id)
        return self._typing.result(self.run_id, state)  # type: ignore[no-any-return]


class Flow(Workflow, Generic[P, R]):
    """A code-first workflow (see the top): a ``Workflow`` of one step that calls ``fn``."""

    fn: Callable[P, Any]
    typing: Typing

    def __init__(
        self,
        fn: Callable[P, Any],
        *,
        name: str | None = None,
        queue: Queue | None = None,
        version: str | None = None,
        timeout: float | None = None,
        max_attempts: int | None = MAX_ATTEMPTS,
        retries: Retry | int | None = None,
    ) -> None:
        flow_name = qualified_name(fn) if name is None else name
        typing = Typing(fn, flow_name)
        body = _async_body(fn, typing) if inspect.iscoroutinefunction(fn) else _body(fn, typing)
        retry = retry_of(retries, f"workflow {flow_name!r}")
        super().__init__(
            flow_name,
            [Step(flow_name, body, retry=retry)],
            max_attempts=max_attempts,
            version=version,
            timeout=timeout,
            queue=queue,
        )
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "typing", typing)
        object.__setattr__(self, "__doc__", fn.__doc__)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """The function itself, outside any run (a unit test's way in)."""
        return self.fn(*args, **kwargs)

    def run(  # type: ignore[override]  # the function's parameters, not input=
        self, run_id: str, store: Store, /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Run (or resume) ``run_id`` here until it ends; the function's result."""
        if inspect.iscoroutinefunction(self.fn):
            raise TypeError(
                f"workflow {self.name!r} is async: 'await {self.name}.run_async(run_id, "
                "async_store, ...)' runs it (or start() it for a worker); nothing was run"
            )
        state = super().run(run_id, store, input=self.typing.dump(run_id, args, kwargs))
        return self.typing.result(run_id, state)  # type: ignore[no-any-return]

    async def run_async(  # type: ignore[override]
        self, run_id: str, store: AsyncStore, /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """``run`` on an async store."""
        state = await super().run_async(run_id, store, input=self.typing.dump(run_id, args, kwargs))
        return self.typing.result(run_id, state)  # type: ignore[no-any-return]

    def start(  # type: ignore[override]
        self, run_id: str, store: Store, /, *args: P.args, **kwargs: P.kwargs
    ) -> RunHandle[R]:
        """Create the run for the workers (``Workflow.start``: a run that exists already
        is not started twice); its handle."""
        super().start(run_id, store, input=self.typing.dump(run_id, args, kwargs))
        return self.handle(run_id, store)

    async def start_async(  # type: ignore[override]
        self, run_id: str, store: AsyncStore, /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncRunHandle[R]:
        """``start`` on an async store."""
        await super().start_async(run_id, store, input=self.typing.dump(run_id, args, kwargs))
        return self.handle_async(run_id, store)

    def handle(self, run_id: str, store: Store) -> RunHandle[R]:
        """The handle of an existing run of this workflow."""
        return RunHandle(store, run_id, self.typing.result)

    def handle_async(self, run_id: str, store: AsyncStore) -> AsyncRunHandle[R]:
        """``handle`` on an async store."""
        return AsyncRunHandle(store, run_id, self.typing.result)

    def start_child(self, run_id: str, /, *args: P.args, **kwargs: P.kwargs) -> Child[R]:
        """Inside a running workflow: start a run of this one as its child
        (``start_child``, durable); ``.result()`` waits for it."""
        children.start_child(self, run_id, self.typing.dump(run_id, args, kwargs))
        return Child(self.typing, run_id)

    async def start_child_async(
        self, run_id: str, /, *args: P.args, **kwargs: P.kwargs
    ) -> Child[R]:
        """``start_child`` in an async workflow."""
        await children.start_child_async(self, run_id, self.typing.dump(run_id, args, kwargs))
        return Child(self.typing, run_id)


def _body(fn: Callable[..., Any], typing: Typing) -> Callable[[Mapping[str, Any]], Any]:
    def body(state: Mapping[str, Any]) -> dict[str, Any]:
        args, kwargs = typing.load(current_step().run_id, state)
        return typing.result_of(fn(*args, **kwargs))

    return body


def _async_body(fn: Callable[..., Any], typing: Typing) -> Callable[[Mapping[str, Any]], Any]:
    async def body(state: Mapping[str, Any]) -> dict[str, Any]:
        args, kwargs = typing.load(current_step().run_id, state)
        return typing.result_of(await fn(*args, **kwargs))

    return body


@overload
def workflow(fn: Callable[P, Coroutine[Any, Any, R]], /) -> Flow[P, R]: ...


@overload
def workflow(fn: Callable[P, R], /) -> Flow[P, R]: ...


@overload
def workflow(
    *,
    name: str | None = None,
    queue: Queue | None = None,
    version: str | None = None,
    timeout: float | None = None,
    max_attempts: int | None = MAX_ATTEMPTS,
    retries: Retry | int | None = None,
) -> _Decorator: ...


def workflow(fn: Any = None, /, **options: Any) -> Any:
    """Make ``fn`` a workflow (see the top): ``@durable.workflow`` or
    ``@durable.workflow(name=..., queue=..., version=..., timeout=...)``."""
    if fn is None:
        return _Decorator(options)
    return Flow(fn, **options)


class _Decorator:
    """``@durable.workflow(...)`` with options: a decorator typed as the bare one."""

    __slots__ = ("options",)

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Flow[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Flow[P, R]: ...

    def __call__(self, fn: Any, /) -> Any:
        return Flow(fn, **self.options)
