"""Durable calls inside a step: each model or tool call recorded as it returns.

An agent is a loop of unknown length inside one step. ``call(name, fn, *args)``
runs ``fn(*args)`` and saves its result -- a checkpoint of its own -- before
returning it; when the step runs again (a crash, a lost lease, a resumed wait), a
call already recorded returns its recorded result without running ``fn``, and the
first unrecorded call runs. ``await call_async(...)`` is the same under
``run_async`` (``fn`` plain or async), and also inside a coroutine of a ``run``
step (its save then blocks that coroutine's loop for the moment it takes).

Design. Each step attempt has a ``Journal``: the step's records as the checkpoint
holds them (``Checkpoint.calls``, one per call, sleep or wait) and their numbering.
Every durable operation of the step takes the next index *of its scope* when it is
made -- the task (or thread) that makes it, named by its place in its parent
(``tasks``): so calls gathered with ``asyncio.gather`` or a ``TaskGroup`` each replay
their own records whatever the timing -- and checks the record there: a record of
another kind or name means the step's code changed, or is not deterministic between
calls: ``NondeterminismError`` naming both, before anything runs (``identity``). A
call given a ``key`` is recorded and replayed by its key, whatever task or order makes
it (``identity``; it takes its place in the numbering all the same, where an earlier
version's record of it, unkeyed, is found). ``call_async`` takes its index when it is
called (``gather(call_async(a), call_async(b))`` numbers them in the order written,
in the caller's scope). The records (``task`` only outside the step's own scope):

    {"i": 3, "name": "llm", "at": 1733..., "result": <JSON>}          a finished call
    {"i": 3, "name": "llm", "attempt": 2, "first": 1, "round": 1}     a call being retried
    {"i": 4, "name": "sleep", "kind": "sleep", "wake_at": 1733...}    a sleep (``timers``)
    {"i": 5, "name": "approval", "kind": "wait", "deadline": null}    a wait (``signals``)
    {"i": 0, "task": "1", "name": "llm", "at": 1733..., "result": ...} task 1's first call
    {"key": "tool:call_7", "i": 0, "name": "lookup", "at": ..., "result": ...} a keyed call

each with ``"step_attempt"``, the attempt of the step that recorded it (records of
earlier versions have none), and a finished call with ``"t0"``, when its last try
began (``at`` is when it returned): the start travels in the record the result is
saved in anyway, so it costs no write of its own (history's call index keeps both).

A call is a small program (``_call``) that yields what it needs -- ``Invoke`` the
function, ``SaveRecord`` a record, ``Sleep`` between retries -- carried out by
``_do_sync`` or ``_do_async``, so its semantics are written once. ``SaveRecord`` runs the
run's own ``record`` program through the driver, so a call's save takes turns with
the heartbeat and lands on top of the run's latest write like any other; the
lease keeper merges the records of calls that save concurrently.

- A call that raises records nothing: the exception propagates into the step,
  which may catch it, and the call runs again on the step's next attempt. With
  ``retry=Retry(...)`` it is retried in place, after the next attempt is recorded
  (so a crash between attempts counts, as for steps); a new round of retries
  begins when the step itself starts a new round.
- A result follows the state's rules (``InvalidStateError`` before anything is
  recorded) and is returned as recorded: a plain copy, the same on every replay.
- Inside ``fn``, ``current_step()`` is the call's: its ``idempotency_key`` is the
  same on every retry of that call and different for every call, and its
  ``attempt`` counts the starts of that call -- its retries and the step's attempts
  that reached it: every attempt since the one that recorded the durable operation
  before it (``Journal.since``; steps are deterministic between durable operations,
  so an attempt that went past one went on to the next unless it died in between);
  a keyed call, whose place is not fixed, counts the step's attempts instead.
- Once the run's lease is lost or the run is cancelled, no other call starts; nor
  once a record could not be saved (the store failed, the record is over the size
  limit). Either reaches the step as ``StepInterrupted``, a BaseException that
  ``except Exception`` does not catch, and the runner raises the error itself when
  the step ends (``Journal.failed``).
- When the step completes, its records are dropped (``checkpoints.after_step``) --
  after ``Journal.unasked`` found each asked for (``identity``: else the run fails
  with ``NondeterminismError`` and the records stay).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator, Mapping
from dataclasses import replace
from typing import Any, NamedTuple, NoReturn, Protocol, TypeVar

from ..seam import metering
from ..seam.checkpoint import Checkpoint
from ..seam.errors import NondeterminismError, StepInterrupted, StopRequested
from ..seam.rules import check_name
from ..seam.state import KEYED, call_key, freeze, thaw
from . import clock
from .identity import Asked, check_key, divergence, labels, reserved
from .requests import Request, Sleep, execute, execute_async
from .retry import NEVER_RETRIED, ONCE, Retry
from .step import StepContext, _current, current_step
from .tasks import Scopes, join
from .telemetry import CallSpan, Observer, log
from .typed import call_result, declared

T = TypeVar("T")


class Invoke(NamedTuple):
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    context: StepContext
    span: CallSpan


class SaveRecord(NamedTuple):
    journal: Journal
    record: Mapping[str, Any]
    span: CallSpan | None = None
    """The call's span, ended with the bytes the record took (a result's record)."""


class Recorder(Protocol):
    """What a journal needs of its run (``run.RunProgram``): its id and checkpoint, its
    observer, and the program that saves a record."""

    run_id: str
    cp: Checkpoint
    obs: Observer
    stop: Callable[[], bool]
    """Whether the worker running the run is stopping (``stopping``)."""

    def record(
        self, record: Mapping[str, Any], still: Callable[[], object]
    ) -> Generator[Request, Any, Checkpoint]: ...


class Lost(Protocol):
    @property
    def lost(self) -> BaseException | None: ...


class StepDriver(Protocol):
    """What a journal needs of the driver running its step (``drivers``): whether it is
    async, its lease keeper (the run lost?), how it carries out a request, and whether a
    cancellation was held back during a save."""

    is_async: bool

    @property
    def io(self) -> Callable[[Any], Any]:
        """The store's I/O alone (``store_io``): what a stream's append goes through, and
        another run's loads and saves (``children``)."""

    @property
    def keep(self) -> Lost: ...

    def do(self, op: Request) -> Any: ...

    @property
    def cancelled(self) -> bool: ...


class Journal:
    """The durable operations of one step attempt (see the top), numbered by scope
    (``tasks``), or named by their keys."""

    __slots__ = (
        "__weakref__", "_by_key", "asked", "closed", "driver", "failed", "lenient", "markers",
        "records", "run", "scopes", "step_name",
    )  # fmt: skip

    def __init__(
        self,
        run: Recorder,
        records: tuple[Mapping[str, Any], ...],
        step_name: str = "",
        *,
        lenient: bool = False,
    ) -> None:
        self.run, self.records, self.step_name, self.lenient = run, records, step_name, lenient
        self.driver: StepDriver | None = None
        """Set by the driver that runs the step (``drivers``)."""
        self._by_key: dict[tuple[str, int], Mapping[str, Any]] | None = None
        self.scopes = Scopes(run.run_id, self._where)
        self.closed = False
        """Set by the driver when the step's function has returned or raised: a call
        still running then (a task it did not wait for) records nothing."""
        self.failed: BaseException | None = None
        """What ended this journal: a record's save that failed, or the run lost. No
        other call starts then, and the runner raises it when the step ends."""
        self.markers: list[Mapping[str, Any]] = []
        """Records of ``patched`` answers not saved yet: saved before the next record
        (``patches`` says why that is soon enough)."""
        self.asked = Asked()
        """What this attempt asked of the record (``identity``)."""

    def _where(self) -> str:
        return f"run {self.run.run_id!r}: step {self.run.cp.step + 1}" + (
            f" {self.step_name!r}" if self.step_name else ""
        )

    def take(
        self, kind: str, name: str, *, foreign: bool = False, key: str | None = None
    ) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
        """The key fields of the next operation of the caller's scope (``{"i": 3}``, or
        ``{"i": 0, "task": "1"}`` in a task the step created; ``{"key": k, "i": 0}`` for
        a call given a key), and what is recorded there, checked against what is asked
        (``foreign``: returned as it is, for the caller to judge -- ``patches``)."""
        place = None
        if key is None:
            scope, i = self.scopes.take(current_step(), kind, name)
            where: dict[str, Any] = {"i": i, "task": scope} if scope else {"i": i}
        else:
            place = self.scopes.place(current_step(), name)
            self.asked.take_key(key, name, self._where())
            where = {"key": key, "i": 0}
        if self._by_key is None:
            self._by_key = {call_key(r): r for r in self.records}
        record = self._by_key.get(call_key(where))
        if key is not None and record is None and place is not None:
            where, record = self._unkeyed(where, place, kind, name)
        if foreign:
            return where, record
        self.asked.note(where, kind, name)
        if record is None:
            self.stopping()
        elif (record.get("kind", "call"), record["name"]) != (kind, name):
            was = f"{record.get('kind', 'call')} {record['name']!r}"
            spot = (
                f"its call keyed {key!r}"
                if key is not None
                else f"its durable operation {where['i']}"
                + (f" of task {where['task']}" if "task" in where else "")
            )
            what = (
                f"{self._where()} made {was} as {spot} last time, and now asks for {kind} {name!r}"
            )
            if self.lenient:
                log.info("%s: run anew, its record replaced (the step replays leniently)", what)
                return where, None
            self.diverged(f"{what}; nothing was run")
        return where, record

    def _unkeyed(
        self, where: dict[str, Any], place: tuple[str, int], kind: str, name: str
    ) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
        """A keyed call with no record under its key: the record of an earlier version,
        which had no keys, at its place -- of its kind and name -- is its own, and it
        goes on there as that version would (``identity``)."""
        assert self._by_key is not None
        scope, i = place
        old = self._by_key.get(place)
        if old is None or "key" in old or (old.get("kind", "call"), old["name"]) != (kind, name):
            return where, None
        return ({"i": i, "task": scope} if scope else {"i": i}), old

    def diverged(self, what: str) -> NoReturn:
        """End the step attempt with ``NondeterminismError``: through ``StepInterrupted``
        (agent code catching ``Exception`` cannot go on), and the runner fails the run
        with its record kept (``run``)."""
        error = self.divergence(what)
        self.failed = self.failed or error
        raise StepInterrupted(self.failed)

    def divergence(self, what: str) -> NondeterminismError:
        """The ``NondeterminismError`` of this step, ``what`` saying how it departed."""
        return divergence(
            what,
            run_id=self.run.run_id,
            step=self.run.cp.step + 1,
            step_name=self.step_name,
            records=self.records,
            asked=self.asked.asked,
        )

    # -- stop at the next call ------------------------------------------------------------

    def stopping(self) -> None:
        """A worker that is stopping (SIGTERM) lets no new durable operation start: the
        step ends here as a stopped run (``StopRequested`` through ``StepInterrupted``, so
        agent code catching ``Exception`` cannot go on), what it recorded stays recorded
        and the runner releases the lease -- a step of many calls stops within one call's
        time, not at its end. A recorded operation replays as usual: it starts nothing."""
        if self.failed is None and self.run.stop():
            self.failed = StopRequested(
                f"{self._where()} stopped before its next durable operation: the worker is "
                "stopping; what the step recorded stays, and the next worker replays it",
                run_id=self.run.run_id,
            )
        if isinstance(self.failed, StopRequested):
            raise StepInterrupted(self.failed)

    def unasked(self, *, suspended: bool = False) -> NondeterminismError | None:
        """The error of the recorded operations this attempt never asked for (after the
        step returned, or ``suspended``): its code changed, or is not deterministic
        between calls -- None if there are none, or if the step replays leniently (then
        they are logged, and dropped with the step's records when it completes).

        When the step suspends, other tasks of it may not have reached their recorded
        calls yet (timing): only the scopes that suspended (slept or waited) are judged
        then; the records stay, and the step's completion judges them all."""
        unasked = self.asked.unasked(self.records, self.scopes.made, suspended=suspended)
        if not unasked:
            return None
        names = ", ".join(labels(unasked[:5]))
        what = (
            f"{self._where()} {'suspended' if suspended else 'completed'} without asking for "
            f"{len(unasked)} recorded operation(s) {names}"
        )
        if self.lenient:
            if not suspended:
                log.info("%s: dropped (the step replays leniently)", what)
            return None
        return self.divergence(what)

    def recorded(self, key: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """The record of ``key`` was saved by this attempt (``since`` looks at it)."""
        if self._by_key is not None:
            self._by_key[call_key(key)] = record

    def since(self, key: Mapping[str, Any], attempt: int) -> int:
        """The first step attempt that reached the durable operation of ``key``, which
        ``attempt`` (the step's) reaches now unrecorded: the one that recorded the
        operation before it in its task -- or the next one after a sleep or a wait, which
        end their attempt -- or, with none before it, the step's first."""
        scope, i = call_key(key)
        by_key = self._by_key or {}
        for j in range(i - 1, -1, -1):
            before = by_key.get((scope, j))
            if before is None:
                continue  # a call that raised records nothing: look further back
            at = before.get("step_attempt")
            if at is None:
                return attempt  # recorded by an earlier version: count this start alone
            return at + 1 if before.get("kind") in ("sleep", "wait") else at  # type: ignore[no-any-return]
        return 1

    @property
    def driven(self) -> StepDriver:
        """The driver running the step (set before its function runs)."""
        assert self.driver is not None, "a journal is driven once its step runs"
        return self.driver

    def check(self) -> None:
        """No other call starts once the run is lost (lease taken, cancelled, deleted)
        or a record could not be saved, and none is recorded once its step has ended."""
        if self.failed is None:
            self.failed = self.driven.keep.lost
        if self.failed is not None:
            raise StepInterrupted(self.failed)
        if self.closed:
            raise RuntimeError(
                f"run {self.run.run_id!r}: a call returned after its step had ended (a task "
                "the step did not wait for); it was not recorded. Await every call before "
                "the step returns (a TaskGroup cancels the rest when one fails)"
            )


def _journal(what: str) -> Journal:
    journal = current_step().journal
    if not isinstance(journal, Journal) or journal.driver is None:
        raise RuntimeError(f"{what}() is only available inside a step run by run() or run_async()")
    return journal


def call(
    name: str,
    fn: Callable[..., T],
    /,
    *args: Any,
    key: str | None = None,
    retry: Retry | None = None,
    returns: Any = None,
    **kwargs: Any,
) -> T:
    """``fn(*args, **kwargs)``, run once and recorded: when the step runs again, the
    recorded result is returned without running ``fn`` (see the top). ``key``: the
    call's identity within its step, whatever task or order makes it (``keys``);
    ``returns``: the result's type, when ``fn``'s annotation does not say it
    (``typed``). ``key``, ``retry`` and ``returns`` are never passed to ``fn``."""
    journal = _journal("call")
    if journal.driven.is_async:
        raise TypeError(
            f"call({name!r}, ...) inside a step run by run_async(): use "
            f"'await call_async({name!r}, ...)', which does not block the event loop"
        )
    reserved(name, fn, key=key, retry=retry, returns=returns)
    program = _call(journal, name, fn, args, kwargs, retry=retry, returns=returns, key=key)
    return execute(program, _do_sync)  # type: ignore[no-any-return]


def call_async(
    name: str,
    fn: Callable[..., Awaitable[T] | T],
    /,
    *args: Any,
    key: str | None = None,
    retry: Retry | None = None,
    returns: Any = None,
    **kwargs: Any,
) -> Coroutine[Any, Any, T]:
    """``call`` for coroutines: ``await call_async(name, fn, *args)``, ``fn`` plain or
    async. It takes its place in its task's numbering when it is called, so calls
    started together (``asyncio.gather(call_async(...), ...)``) are numbered in the
    order they were written; calls of tasks the step created, within each task. A
    call given a ``key`` replays by its key, whatever its place."""
    journal = _journal("call_async")
    reserved(name, fn, key=key, retry=retry, returns=returns)
    program = _call(journal, name, fn, args, kwargs, retry=retry, returns=returns, key=key)
    try:
        first = next(program)  # the index is taken now; a recorded call returns at once
    except StopIteration as done:
        return _returning(done.value)
    do = _do_async if journal.driven.is_async else _do_blocking
    return _rest(program, first, do)


async def _returning(value: T) -> T:
    return value


async def _rest(program: Generator[Any, Any, T], request: Any, do: Any) -> T:
    """``execute_async`` of a program that has made its first request already."""
    while True:
        try:
            value, error = await do(request), None
        except BaseException as exc:  # handed to the program, which decides
            value, error = None, exc
        try:
            request = program.send(value) if error is None else program.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _call(
    journal: Journal,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    retry: Retry | None,
    returns: Any = None,
    key: str | None = None,
) -> Generator[Invoke | SaveRecord | Sleep, Any, Any]:
    """One call: replayed from its record, or run (and retried) and recorded."""
    check_name(name, "call name")
    if not callable(fn):
        raise TypeError(f"call({name!r}, fn, ...): fn must be callable, not {fn!r}")
    typed = declared(fn, returns)
    where, record = journal.take("call", name, key=check_key(name, key))
    try:
        return (
            yield from _run_call(
                journal, name, fn, args, kwargs,
                key=where, record=record, typed=typed, retry=retry,
            )
        )  # fmt: skip
    except BaseException:
        journal.asked.release(where)
        raise


def _run_call(
    journal: Journal,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    key: dict[str, Any],
    record: Mapping[str, Any] | None,
    typed: Any,
    retry: Retry | None,
) -> Generator[Invoke | SaveRecord | Sleep, Any, Any]:
    """``_call`` once its place is taken: ``key`` its record's key fields."""
    i = key["i"]
    ctx = current_step()
    obs = journal.run.obs
    inner, outer = _scopes(ctx, key)

    def back(result: Any) -> Any:  # as the caller gets it: the declared type, if any
        value = thaw(result)
        return value if typed is None else typed.load(value, f"call {i} {name!r}", ctx.run_id)

    if record is not None and "result" in record:
        journal.asked.replayed.add(inner)  # what its function recorded inside is not asked now
        obs.call_replayed(ctx.index, i, name, ctx.attempt)
        return back(record["result"])
    policy = retry or ONCE
    attempt, first = _starts(journal, ctx, key, record)
    while True:
        journal.check()
        span = obs.call(ctx.index, i, name, attempt)
        try:
            inside = replace(
                ctx, call=(i, name), attempt=attempt, task=inner, call_scope=outer,
            )  # fmt: skip
            t0 = time.time()  # when this (last) try began: carried by its result's record
            value = yield Invoke(fn, args, kwargs, inside, span)
        except BaseException as exc:
            span.ended(exc)
            used = attempt - first + 1
            if isinstance(exc, NEVER_RETRIED) or not policy.retries(exc, used):
                raise
            attempt += 1
            retrying = freeze(
                {**key, "name": name, "attempt": attempt, "first": first,
                 "round": ctx.first_attempt, "step_attempt": ctx.attempt},
                "", ctx.run_id, 0, "call record",
            )  # fmt: skip
            yield SaveRecord(journal, retrying)
            journal.recorded(key, retrying)
            yield Sleep(policy.delay(used))
            continue
        try:  # a result that is not JSON fails the call (no retry: it would not become JSON)
            value = call_result(typed, value, name, ctx.run_id)
            result = freeze(value, f"[call {i} {name!r}]", ctx.run_id, 1, "call result")
            journal.check()
        except BaseException as exc:
            span.ended(exc)
            raise
        done = {**key, "name": name, "t0": t0, "at": time.time(), "step_attempt": ctx.attempt}
        done["result"] = result
        record = freeze(done, "", ctx.run_id, 0, "call result")
        yield SaveRecord(journal, record, span)
        journal.recorded(key, record)
        return back(result)


def _scopes(ctx: StepContext, key: Mapping[str, Any]) -> tuple[str, str]:
    """The scope of the operations made inside a call's function, and the one of its
    caller as its idempotency key names it: ``c3`` in the caller's task -- or, for a
    keyed call, one named by its key, whatever task made it."""
    if "key" in key:
        return KEYED + key["key"], KEYED + key["key"]
    return join(ctx.task, f"c{key['i']}"), ctx.task


def _starts(
    journal: Journal, ctx: StepContext, key: Mapping[str, Any], record: Mapping[str, Any] | None
) -> tuple[int, int]:
    """The attempt of an unfinished call starting now, and the first of its round."""
    if record is not None:  # attempts recorded: the last one was started in that step
        since = record.get("step_attempt", ctx.attempt - 1)  # attempt, and in each since
        attempt = record["attempt"] + max(1, ctx.attempt - since)
        return attempt, record["first"] if record.get("round") == ctx.first_attempt else attempt
    if "key" in key:  # its place is not fixed: counted by the step's attempts, which
        return ctx.attempt, ctx.attempt  # differ from every earlier one's (stream resets)
    # Started by each step attempt that reached it; its retries count from here.
    attempt = max(1, ctx.attempt - journal.since(key, ctx.attempt) + 1)
    return attempt, attempt


@contextlib.contextmanager
def _in_call(request: Invoke) -> Iterator[None]:
    """The call's context current (its idempotency key), and its span."""
    token = _current.set(request.context)
    try:
        with request.span.current():
            yield
    finally:
        _current.reset(token)


def _do_sync(request: Invoke | SaveRecord | Sleep) -> Any:
    if isinstance(request, Invoke):
        with _in_call(request):
            value = request.fn(*request.args, **request.kwargs)
        if inspect.isawaitable(value):
            getattr(value, "close", lambda: None)()  # no "never awaited" warning
            raise TypeError(
                f"call({request.context.call[1]!r}, ...) got an async function: await "  # type: ignore[index]
                "call_async(...) instead"
            )
        return value
    if isinstance(request, SaveRecord):
        return _recorded(request)
    return clock.sleep(request.seconds)


async def _do_async(request: Invoke | SaveRecord | Sleep) -> Any:
    if isinstance(request, Invoke):
        with _in_call(request):
            value = request.fn(*request.args, **request.kwargs)
            if inspect.isawaitable(value):
                value = await value
        return value
    if isinstance(request, SaveRecord):
        journal, driver = request.journal, request.journal.driven
        with _saving(journal):
            while journal.markers:  # patched() answers first (``patches``)
                marker = journal.markers.pop(0)
                await execute_async(journal.run.record(marker, journal.check), driver.do)
        with _saving(journal), _recording(request):
            saved = await execute_async(
                journal.run.record(request.record, journal.check), driver.do
            )
        if driver.cancelled:
            raise asyncio.CancelledError  # held back while the save finished
        return saved
    return await clock.asleep(request.seconds)


async def _do_blocking(request: Invoke | SaveRecord | Sleep) -> Any:
    """``call_async`` in a coroutine of a ``run`` step: ``fn`` awaited, the save made
    with the run's blocking I/O (it holds the coroutine's loop while it lasts)."""
    if isinstance(request, SaveRecord):
        return _recorded(request)
    return await _do_async(request)


def _recorded(request: SaveRecord) -> Any:
    journal = request.journal
    with _saving(journal):
        while journal.markers:  # patched() answers first (``patches``)
            execute(journal.run.record(journal.markers.pop(0), journal.check), journal.driven.do)
    with _saving(journal), _recording(request):
        return execute(journal.run.record(request.record, journal.check), journal.driven.do)


@contextlib.contextmanager
def _saving(journal: Journal) -> Iterator[None]:
    """Around a record's save: an error there ends the journal (``Journal.failed``) and
    reaches the step as ``StepInterrupted``, which ``except Exception`` does not catch."""
    try:
        yield
    except Exception as exc:
        if journal.closed:
            raise  # a call that outlived its step: no step is there to be told
        journal.failed = journal.failed or exc
        raise StepInterrupted(exc) from exc


@contextlib.contextmanager
def _recording(request: SaveRecord) -> Iterator[None]:
    """Around a record's save: the call's span ended with its outcome and bytes."""
    span = request.span
    if span is None or span.span is None:  # no trace: nothing to count the bytes for
        yield
        return
    with metering.counting() as written:
        try:
            yield
        except BaseException as exc:
            span.ended(exc)
            raise
    span.ended(None, sum(written))


# -- the record of another durable operation (runner.mailbox's receive) ---------------


def save_record(journal: Journal, record: Mapping[str, Any]) -> None:
    """Save ``record`` in ``journal`` from a step run by ``run``, as a call's result is
    saved (the same driver, keeper and store; an error ends the journal)."""
    _recorded(SaveRecord(journal, record))


async def save_record_async(journal: Journal, record: Mapping[str, Any]) -> None:
    """``save_record`` from a coroutine of the step (under ``run_async``, or ``run``)."""
    do = _do_async if journal.driven.is_async else _do_blocking
    await do(SaveRecord(journal, record))
