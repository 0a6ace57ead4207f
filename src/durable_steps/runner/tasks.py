"""Concurrency inside a step: each task replays its own durable operations.

A step may make calls concurrently: ``asyncio.gather``, a ``TaskGroup``, tasks
created in a loop. Numbering its operations in the order they start across the
step would be wrong: on replay recorded calls return at once, the branches
interleave differently, and a branch would get another's result. So every durable
operation (``call``, ``sleep``, ``wait_for_signal``) is numbered within its
*scope*, and scopes are named by their place in their parent:

- the step's own task (or, under ``run``, its thread) is the scope ``""``;
- the k-th task created by a task of scope S -- by any means: ``gather``,
  ``TaskGroup``, ``create_task``, ``wait_for`` -- is ``S.k`` (``k`` under the root);
- inside the function of call i made in scope S, operations and tasks belong to
  ``S.ci`` (``ci`` under the root): what a call does inside (a nested call, a
  library's own task) never shifts its caller's numbering, and replaying the call,
  which does not run its function, shifts nothing either.

A journal record is keyed by ``(task, i)`` (``seam.state.call_key``). The order in
which one task creates tasks and makes calls is fixed when the step's code is
deterministic (on replay, its recorded calls return what they returned), so each
branch finds its own records whatever the timing.

How a task learns its scope: a task factory, installed on the event loop by
``run_async`` before a step runs (chained to any factory the loop had, left in
place afterwards: it changes nothing outside a step), gives every task created
inside a step its scope, in the task's context, when it is created. Tasks the
runner makes for itself (a heartbeat, a save) are made outside any scope
(``untracked``), so they shift nothing.

Each scope is used by one task (or thread): the first to make an operation in it
(the root: the step's own). Refused loudly, at that first operation and before
anything runs (``StepMismatchError``), never answered with another scope's record:

- a call from a thread the step started, with the step's context copied into it:
  threads run in no order that can be replayed. Make the call in the step (a
  thread's work can run inside a call's function: ``call("x", fn)``). A ``sleep`` or a
  ``wait_for_signal`` there (a blocking function run with ``asyncio.to_thread``) is
  numbered in the scope it carries: it has no result to mix up;
- an operation from a task that carries a scope it was not created with: the loop's
  task factory was replaced.

A ``run`` step that runs a coroutine (``asyncio.run``, Pydantic AI's ``run_sync``):
the coroutine's main task takes over the step thread's scope at its first durable
operation -- or earlier, at ``track_tasks()`` -- if it is then the only task of its
loop (else its operations are refused, as above), and the factory is installed on
that loop from then on. Pydantic AI's ``Durable`` calls ``track_tasks`` as an agent
run starts.

Not made deterministic: which branch finishes first. ``asyncio.wait(...,
FIRST_COMPLETED)``, ``as_completed`` and timeouts decide by timing, and on replay
recorded calls finish at once: when the step must take the same branch again, make
the decision a call of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from ..seam.errors import StepMismatchError
from .step import StepContext, _current

T = TypeVar("T")
Executor = asyncio.Task[Any] | int
"""Who makes an operation: an asyncio task, or a thread (its ident) with no loop running."""
_MARK = "_durable_steps_scopes"


def join(scope: str, part: str) -> str:
    return f"{scope}.{part}" if scope else part


class Scopes:
    """The numbering of one step attempt's durable operations, by scope (see the top)."""

    __slots__ = ("_children", "_mains", "_next", "_owners", "run_id", "where")

    def __init__(self, run_id: str, where: Callable[[], str]) -> None:
        self.run_id, self.where = run_id, where
        """Names the run and step in errors: "run 'x': step 2 'agent'"."""
        self._next: dict[str, int] = {}
        self._children: dict[str, int] = {}
        self._owners: dict[str, Executor] = {}
        self._mains: dict[str, asyncio.Task[Any]] = {}
        """A thread's scope lent to the main task of a loop run in that thread."""

    def own(self, scope: str, owner: Executor | None = None) -> None:
        """Give ``scope`` to ``owner`` (default: the caller's task or thread)."""
        self._owners[scope] = executor() if owner is None else owner

    def take(self, ctx: StepContext, kind: str, name: str) -> tuple[str, int]:
        """The scope and index of the next operation made in ``ctx``, checked to come
        from the task or thread that owns the scope."""
        scope = ctx.task
        self._check(scope, kind, name)
        i = self._next.get(scope, 0)
        self._next[scope] = i + 1
        return scope, i

    def place(self, ctx: StepContext, name: str) -> tuple[str, int] | None:
        """A keyed call's place, as an unkeyed call would take it (where a record of an
        earlier version, which had no keys, is): None where numbering cannot be trusted
        (it replays by its key all the same). From a thread the step started it is
        refused as an unkeyed call is (its save would race the step's)."""
        why = self._why_not(ctx.task, executor())
        if why == "thread":
            raise self._refused("call", name, _WHY["thread"])
        if why is not None:
            return None
        i = self._next.get(ctx.task, 0)
        self._next[ctx.task] = i + 1
        return ctx.task, i

    def give_back(self, scope: str, i: int) -> None:
        """Undo ``take`` of index ``i`` in ``scope``, the last one taken there: an operation
        that turned out not to be one (``patches``: a ``patched`` of old code's run)."""
        if self._next.get(scope) == i + 1:
            self._next[scope] = i

    def made(self, scope: str) -> int:
        """How many operations were made in ``scope`` so far."""
        return self._next.get(scope, 0)

    def child(self, parent: StepContext) -> StepContext:
        """The context of the next task created in ``parent``'s scope."""
        scope = parent.task
        k = self._children.get(scope, 0)
        self._children[scope] = k + 1
        return replace(parent, task=join(scope, str(k)))

    def _check(self, scope: str, kind: str, name: str) -> None:
        why = self._why_not(scope, executor())
        if why is None or (why == "thread" and kind != "call"):
            return  # a sleep or a wait in a thread the owner waits for: no result to mix up
        raise self._refused(kind, name, _WHY[why])

    def lend(self, scope: str, task: asyncio.Task[Any]) -> None:
        """``task``, the main task of a loop that the thread owning ``scope`` runs, makes
        the operations of ``scope`` while the thread waits for it."""
        main = self._mains.get(scope)
        if main is None or main.done():
            self._mains[scope] = task

    def adopt(self, scope: str) -> None:
        """``track_tasks``: the caller takes ``scope`` over, if it may (see the top)."""
        me = executor()
        if self._why_not(scope, me) is None and isinstance(me, asyncio.Task):
            install(me.get_loop())

    def _why_not(self, scope: str, me: Executor) -> str | None:
        """None when ``me`` may make operations in ``scope``, else why not (``_WHY``)."""
        owner = self._owners.setdefault(scope, me)
        if owner is me or owner == me:
            return None
        if isinstance(owner, int) and isinstance(me, asyncio.Task) and owner == _thread():
            # A coroutine run by the step's thread (which waits for its loop meanwhile).
            main = self._mains.get(scope)
            if main is me:
                return None
            if (main is None or main.done()) and asyncio.all_tasks(me.get_loop()) == {me}:
                self._mains[scope] = me
                install(me.get_loop())
                return None
            return "crowded"
        if isinstance(me, int) or isinstance(owner, int) or owner.get_loop() is not me.get_loop():
            return "thread"
        return "unseen"

    def _refused(self, kind: str, name: str, why: str) -> StepMismatchError:
        what = "call" if kind == "call" else kind
        return StepMismatchError(
            f"{self.where()} made {what} {name!r} {why}. Nothing was run",
            run_id=self.run_id,
        )


_WHY = {
    "crowded": "from an asyncio task of an event loop that the step's thread started "
    "after other tasks were already running there, so durable-steps cannot tell them "
    "apart on replay. Call durable_steps.track_tasks() at the start of the coroutine "
    "the step runs, before it creates tasks, or run the step with run_async()",
    "thread": "from a thread the step started (its context copied there): threads run "
    "in no order that can be replayed, so a call there could get another thread's "
    "record. Make durable calls in the step's own thread or task; run a thread's work "
    "inside a call's function instead (call('name', fn))",
    "unseen": "from an asyncio task that durable-steps did not see created (the event "
    "loop's task factory was replaced), so it cannot be told apart from its siblings "
    "on replay. Keep the task factory that run_async() installs (chain yours to it: "
    "loop.get_task_factory())",
}


def track_tasks() -> None:
    """Name the tasks this coroutine creates from now on, so that their durable calls
    replay to them: for a coroutine that a ``run`` step runs on an event loop of its own
    (``asyncio.run``), called before it creates tasks that make durable calls. Under
    ``run_async``, and outside a step, it does nothing: it is done already, or not
    needed. Integrations (Pydantic AI's ``Durable``) call it at the start of a run."""
    ctx = _current.get()
    if ctx is not None and ctx.journal is not None:
        ctx.journal.scopes.adopt(ctx.task)


def executor() -> Executor:
    """The task running here, or this thread when no event loop runs in it."""
    # Asked once per step: a thread without a loop (run()'s) is told apart without the
    # RuntimeError that current_task() raises there, which cost a step ~1 µs.
    task = None if asyncio._get_running_loop() is None else asyncio.current_task()
    return _thread() if task is None else task


def _thread() -> int:
    return threading.get_ident()


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Give tasks created inside a step on ``loop`` their scope (see the top). Idempotent;
    a factory the loop had goes on making the tasks."""
    previous = loop.get_task_factory()
    if getattr(previous, _MARK, False):
        return
    loop.set_task_factory(_factory(previous))


def _factory(previous: Any) -> Any:
    def make(loop: asyncio.AbstractEventLoop, coro: Any, kwargs: dict[str, Any]) -> Any:
        if previous is None:
            return asyncio.Task(coro, loop=loop, **kwargs)
        return previous(loop, coro, **kwargs)

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        context: contextvars.Context | None = kwargs.get("context")
        parent = _current.get() if context is None else context.get(_current)
        if parent is None or parent.journal is None:
            return make(loop, coro, kwargs)
        if not _in_task():
            # Made by a thread that is about to run the loop (run_until_complete): the
            # loop's main task, to which the thread lends its scope while it waits -- as
            # when the task was made before the factory was installed.
            task = make(loop, coro, kwargs)
            parent.journal.scopes.lend(parent.task, task)
            return task
        child = parent.journal.scopes.child(parent)
        context = contextvars.copy_context() if context is None else context.copy()
        context.run(_current.set, child)
        return make(loop, coro, {**kwargs, "context": context})

    setattr(factory, _MARK, True)
    return factory


def _in_task() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no loop runs in this thread
        return False


def untracked(coro: Awaitable[T]) -> asyncio.Future[T]:
    """A task of the runner's own (a heartbeat, a save): in no step's scope, so that
    creating it shifts no numbering, and what it does is no step's operation."""
    if not asyncio.iscoroutine(coro):
        return asyncio.ensure_future(coro)  # already a future: no task is made
    context = contextvars.copy_context()
    context.run(_current.set, None)
    return asyncio.get_running_loop().create_task(coro, context=context)
