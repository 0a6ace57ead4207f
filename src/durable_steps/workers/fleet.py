"""The worker's loop on asyncio: async workflows run as tasks on
the worker's event loop, sync ones in threads, in one process.

A workflow with an ``async def`` step (``runs_async``) is driven by ``run_async``
on the worker's async store -- hundreds of agent runs awaiting their model calls
cost one event loop, not hundreds of threads. A workflow of plain steps runs as
before, each run in a thread of a pool of ``--concurrency`` threads (made only when
such a workflow is served). Both kinds share the slots: at most ``concurrency`` runs
in progress, whatever their kind.

Looks (which runs to take) are blocking store calls made in a thread
(``asyncio.to_thread``), so a slow listing never stalls the runs on the loop; their
schedule is ``rest_after``'s. Leases, heartbeats and cancellation are the
drivers' (a heartbeat task per async run, a thread per sync one), as with ``run`` and
``run_async``; timers are resumed at their time (``wakes``).

Stopping: ``stop`` (a ``threading.Event``: set by a signal handler, or by a test)
is asked by every run before each step and each new durable operation
(``journal.Journal.stopping``), so a run stops at its next call, sleep or wait,
releases its lease and ends with ``StopRequested``; the loop starts nothing new and
returns once every run has ended.

Wake-ups (``wakeups``): where the store can tell a worker that a run became takeable
(FileStore, on this machine), a datagram moves the next look to now -- no sooner than
the last look's duration after it ended, so a burst of starts makes one look per look's
time; the poll every ``--interval`` stays, as the fallback and for other stores.

The loop's structure is kept open for what comes after (queues, schedules): a look
asks ``take`` for the runs it may start now (``Taker``), and ``slots`` is the one
place that says how many may start.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..runner.clock import now
from ..runner.workflow import Workflow
from ..seam.errors import CodecError, StopRequested
from ..seam.store import AsyncStore, Store, ThreadedStore
from .deaths import LocalWorkers
from .discovery import Look
from .recovery import Recovered, known_workflows, recover_one, recover_one_async
from .schedules import Ticker
from .wakeups import Wakeup

_monotonic = time.monotonic  # when looks are due; tests replace it with a fake clock
_POLL = 0.2
"""The longest the loop waits without looking at ``stop`` (a signal is seen promptly)."""


def runs_async(workflow: Workflow) -> bool:
    """Whether the worker drives this workflow's runs on its event loop: one of its
    steps is a coroutine function (or a partial of one)."""
    return any(_coroutine(step.fn) for step in workflow.steps)


def _coroutine(fn: object) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 # an object whose __call__ is async
    )


async def _wait(fs: Iterable[asyncio.Future[Any]], timeout: float) -> set[asyncio.Future[Any]]:
    """The runs among ``fs`` that end within ``timeout`` (tests replace it)."""
    done, _ = await asyncio.wait(list(fs), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    return done


class Fleet:
    """The runs one worker process has in progress, and how it starts them."""

    def __init__(
        self,
        store: Store,
        astore: AsyncStore,
        workflows: Iterable[Workflow],
        *,
        concurrency: int,
        lease: float,
        owner: str | None,
        echo: Callable[[Recovered | str], None],
        stop: threading.Event,
    ) -> None:
        self.store, self.astore = store, astore
        self.known = known_workflows(workflows)
        self.is_async = {name: runs_async(w) for name, w in self.known.items()}
        self.concurrency, self.lease, self.owner = concurrency, lease, owner
        self.echo, self.stop = echo, stop
        self.running: dict[asyncio.Future[Recovered], str] = {}
        self.undecodable: set[str] = set()
        """Runs this worker cannot decode (a key it lacks, or another key under the
        same id): said once, then left for a worker that can -- nothing was written."""
        self.wakes: list[float] = []
        """(Monotonic) wake times of runs this worker put to sleep."""
        self.claims = Claims(stop.is_set)
        self.wakeup = Wakeup()
        self.pool: ThreadPoolExecutor | None = None
        if not all(self.is_async.values()):
            self.pool = ThreadPoolExecutor(concurrency, thread_name_prefix="durable-steps-run")

    @property
    def slots(self) -> int:
        """How many runs may start now."""
        return self.concurrency - len(self.running)

    def start(self, run_id: str, name: str) -> None:
        w, stopping = self.known[name], self.claims.timed()
        job: asyncio.Future[Recovered]
        if self.is_async[name]:
            job = asyncio.ensure_future(
                recover_one_async(
                    self.astore, w, run_id, lease=self.lease, owner=self.owner, stop=stopping
                )
            )
        else:
            one = functools.partial(recover_one, self.store, w, run_id, lease=self.lease)
            one = functools.partial(one, owner=self.owner, stop=stopping)
            job = asyncio.get_running_loop().run_in_executor(self.pool, one)
        self.running[job] = run_id

    async def reap(self, timeout: float, *, woken: bool = False) -> None:
        """Wait up to ``timeout`` for runs to end; a line for each that did. ``woken``:
        a wake-up datagram (``wakeups``) ends the wait too."""
        if not self.running:
            await (self.wakeup.sleep(timeout) if woken else asyncio.sleep(timeout))
            return
        waiter = asyncio.ensure_future(self.wakeup.event.wait()) if woken else None
        try:
            done = await _wait([*self.running, *([waiter] if waiter else [])], timeout)
        finally:
            if waiter is not None:
                waiter.cancel()
        for job in done:
            if job is waiter:
                continue
            run_id = self.running.pop(job)
            try:
                outcome = job.result()
            except StopRequested as stopped:
                self.echo(f"run {run_id}: released {_where(stopped)} (stopping)")
                continue
            if isinstance(outcome.error, CodecError):
                self._cannot_decode(run_id, outcome.error)
                continue
            self.echo(outcome)
            wake_at = getattr(outcome.error, "wake_at", None)
            if outcome.outcome == "waiting" and wake_at is not None:
                # (a hair after it: the look asks the wall clock what is due)
                self.wakes.append(_monotonic() + max(0.0, wake_at - now()) + 0.01)

    def _cannot_decode(self, run_id: str, error: CodecError) -> None:
        if run_id not in self.undecodable:
            self.undecodable.add(run_id)
            self.echo(
                f"run {run_id}: cannot be decoded by this worker (key {error.key_id!r}); "
                f"left for a worker that has that key, and not taken again here: {error}"
            )

    def close(self) -> None:
        self.wakeup.close()
        if self.pool is not None:
            self.pool.shutdown(wait=True)


def _where(stopped: StopRequested) -> str:
    return "at its next call" if "durable operation" in str(stopped) else "at a step boundary"


async def serve_async(
    store: Store,
    workflows: Iterable[Workflow],
    *,
    once: bool,
    concurrency: int,
    interval: float,
    lease: float,
    owner: str | None,
    echo: Callable[[Recovered | str], None],
    stop: threading.Event,
    astore: Callable[[], AsyncStore] | None = None,
    ticker: Ticker | None = None,
) -> None:
    """The worker loop (see the module docstring and ``loop.serve``). ``ticker``
    starts the due ticks of the worker's schedules before each look. ``astore`` makes
    the async store async runs use (by default the blocking one, in threads); it is
    closed on the way out."""
    loop = asyncio.get_running_loop()
    # Async stores that wrap a blocking one (AsyncFileStore) do their I/O in the default
    # executor: give it room for the runs in progress.
    loop.set_default_executor(
        ThreadPoolExecutor(min(64, concurrency + 4), thread_name_prefix="durable-steps-io")
    )
    async_store = astore() if astore is not None else ThreadedStore(store)
    fleet = Fleet(
        store,
        async_store,
        workflows,
        concurrency=concurrency,
        lease=lease,
        owner=owner,
        echo=echo,
        stop=stop,
    )
    deaths = LocalWorkers()
    look = Look(store, fleet.known, owner, lease, deaths)
    if not once:
        await fleet.wakeup.open(store)  # looks at once when a run is started (if it can)
        if owner is None and look.deaths is not None:  # (a stable --owner's runs wait)
            deaths.register()  # this machine's other workers see it die (``deaths``)
    ticks = ticker.poll if ticker is not None and ticker.schedules else None
    try:
        if once:
            await _one_pass(fleet, look, ticks)
        else:
            await _looks(fleet, look, interval, ticks)
        while fleet.running:
            await fleet.reap(_POLL)
    finally:
        deaths.close()
        fleet.close()
        if astore is not None:
            await async_store.close()


async def _one_pass(fleet: Fleet, look: Look, ticks: Callable[[], object] | None) -> None:
    """``--once``: every run to take now, ``concurrency`` at a time."""
    if ticks is not None:
        await asyncio.to_thread(ticks)  # schedules: the due ticks started first
    found = await asyncio.to_thread(look.everything)
    for run_id, name in found:
        if fleet.stop.is_set():
            return
        while fleet.slots <= 0:
            await fleet.reap(_POLL)
        fleet.start(run_id, name)


def rest_after(look: float, claim: float, interval: float) -> float:
    """How long to rest after a look that took ``look`` seconds, so that a started run
    is picked up within ``interval``. A run started just after a look began is missed
    by it: it waits for that look to end, the rest, the next look's listing (which
    costs about what this one did) and its claim (about what the last one did) -- so
    the rest is the interval less two looks and a claim. A store too big for that
    (a look over a third of the interval) gets a rest as long as a look, so that
    listing it takes at most half of the worker's time. And a worker never looks more
    than about four times an interval: when claims are slow (a loaded machine, a busy
    event loop: the last claim waited behind hundreds of runs), looking again at once
    cannot make the next claim faster -- it only loads the store (measured: 130
    looks a second against cosmos-local, which then served the runs slower still)."""
    return max(interval - 2 * look - claim, look, interval / 4)


async def _looks(
    fleet: Fleet, look: Look, interval: float, ticks: Callable[[], object] | None
) -> None:
    """Look, start what was found, rest (``rest_after``), until stopped."""
    next_look, earliest, more = 0.0, 0.0, False
    while not fleet.stop.is_set():
        if ticks is not None:
            await asyncio.to_thread(ticks)  # schedules (at most once a second: ``Ticker``)
        wakes = fleet.wakes
        if fleet.slots > 0 and (fleet.wakeup.heard() or more):
            # A run became takeable, or the last look filled every free slot (more runs
            # may wait, and no start may wake us for them): look now -- but rest at least
            # as long as the last look took (a burst of starts: one look per look's
            # time, not per start).
            next_look = min(next_look, earliest)
        # Look again when the next look is due -- or when a timer comes due before
        # then: one this worker put to sleep, or one the last look saw coming.
        if fleet.slots > 0 and _monotonic() >= min([next_look, *wakes]):
            began = _monotonic()
            busy = set(fleet.running.values()) | fleet.undecodable
            free = fleet.slots
            found, soon = await asyncio.to_thread(look.take, free, busy, interval)
            more = len(found) >= free
            for run_id, name in found:
                fleet.start(run_id, name)
            ended = _monotonic()
            timers = (ended + max(0.0, w - now()) + 0.01 for w in soon)
            rest = rest_after(ended - began, fleet.claims.last, interval)
            next_look = min([ended + rest, *timers])
            earliest = ended + (ended - began)
            wakes[:] = [w for w in wakes if w > ended]  # those looked for
        # Wait for a run to end, but not past the next look: a run in progress must not
        # delay the pickup of a started one. Short slices: a signal is seen promptly.
        until = min(_POLL, max(0.0, min([next_look, *wakes]) - _monotonic()))
        if fleet.slots > 0:
            await fleet.reap(until, woken=_monotonic() < next_look)
        else:
            await fleet.reap(_POLL)  # full: only an end helps


class Claims:
    """What the last pickup cost: from handing a run over to its first step, claim
    included. The runner asks ``stop`` before each step; the first time, the run is
    claimed and its step about to start."""

    def __init__(self, stop: Callable[[], bool]) -> None:
        self.stop, self.last = stop, 0.0

    def timed(self) -> Callable[[], bool]:
        """The ``stop`` of one run handed over now, noting when it is first asked."""
        handed, asked = _monotonic(), False

        def stopping() -> bool:
            nonlocal asked
            if not asked:
                asked, self.last = True, _monotonic() - handed
            return self.stop()

        return stopping


def serve_in_loop(store: Store, workflows: Iterable[Workflow], **options: Any) -> None:
    """``serve_async`` on an event loop of its own (the worker's main thread)."""
    asyncio.run(serve_async(store, workflows, **options))
