"""``durable-steps worker MODULE:ATTR``: recover runs in a loop until told to stop.

The worker imports ATTR from MODULE (a ``Workflow`` or a list of them; the current
directory is importable, as with ``python -m``), opens the store the environment
describes, and repeats: list the runs of those workflows to take -- running runs
whose lease is free (orphaned, or started with ``Workflow.start``) and waiting
runs that are due (``recover``'s candidates) -- start each in a thread of its own -- at most
``--concurrency`` at a time -- and print one line per run when it ends; then rest
until the next look, timed so that a run started at any moment is picked up within
``--interval`` while a slot is free (``rest_after``; runs in progress do not delay
it), or less when a sleeping run's wake time (or a signal's deadline) comes sooner:
a timer is resumed at its time. ``--once`` makes one pass (every candidate,
``--concurrency`` at a time) and exits.

SIGTERM or SIGINT stops it gracefully: no new run starts, and each running run
stops at its next step boundary and releases its lease (the step in progress is
let finish: it cannot be interrupted halfway without being run again), then the
worker exits 0. A second signal exits at once; leases then expire by themselves
(at once for other processes on this machine, which can see this one is gone).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from ..runner.clock import now
from ..runner.workflow import Workflow
from ..seam.errors import ConfigurationError, StopRequested
from ..seam.store import Store
from .queues import admitter
from .recovery import Recovered, candidates, known_workflows, recover_one
from .schedules import Schedule, Ticker, split

_monotonic = time.monotonic  # when looks are due; tests replace it with a fake clock


def load_workflows(spec: str) -> list[Workflow | Schedule]:
    """The workflows (and schedules) named by ``MODULE:ATTR``."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(
            f"{spec!r} is not MODULE:ATTR; name the module and the Workflow (or list of "
            "them) in it, e.g. myapp.flows:WORKFLOWS",
            variable="MODULE:ATTR",
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"cannot import {module_name!r} ({exc}); run the worker where the module is "
            "importable (the current directory is), or set PYTHONPATH",
            variable="MODULE:ATTR",
        ) from exc
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ConfigurationError(
                f"{module_name!r} has no attribute {attr!r}", variable="MODULE:ATTR"
            )
        value = getattr(value, part)
    served = Workflow | Schedule  # schedules: served with the workflows
    found = [value] if isinstance(value, served) else list(value) if _many(value) else []
    if not found or not all(isinstance(w, served) for w in found):
        raise ConfigurationError(
            f"{spec} is {type(value).__name__}, not a Workflow or a list of Workflows "
            "(and Schedules)",
            variable="MODULE:ATTR",
        )
    return found


def _many(value: object) -> bool:
    return isinstance(value, list | tuple | set | frozenset)


def serve(  # noqa: PLR0915 # the loop reads as one paragraph; the fleet's rewrite splits it
    store: Store,
    workflows: Iterable[Workflow | Schedule],
    *,
    once: bool,
    concurrency: int,
    interval: float,
    lease: float,
    owner: str | None,
    echo: Callable[[Recovered | str], None],
    stop: threading.Event | None = None,
) -> None:
    """The worker loop (see the module docstring); returns when stopped or, with
    ``once``, after one pass."""
    served, schedules = split(workflows)
    known = known_workflows(served)
    stop = stop or threading.Event()
    ticker = Ticker(store, schedules, min(interval, 1.0))  # schedules: their ticks
    running: dict[Future[Recovered], str] = {}

    claims = _Claims(stop.is_set)

    def start(pool: ThreadPoolExecutor, run_id: str, name: str) -> None:
        job = pool.submit(
            recover_one, store, known[name], run_id, lease=lease, owner=owner, stop=claims.timed()
        )
        running[job] = run_id

    wakes: list[float] = []  # (monotonic) wake times of runs this worker put to sleep

    def reap(timeout: float) -> None:
        done, _ = wait(list(running), timeout=timeout, return_when=FIRST_COMPLETED)
        for job in done:
            run_id = running.pop(job)
            try:
                outcome = job.result()
            except StopRequested:
                echo(f"run {run_id}: released at a step boundary (stopping)")
                continue
            echo(outcome)
            wake_at = getattr(outcome.error, "wake_at", None)
            if outcome.outcome == "waiting" and wake_at is not None:
                # (a hair after it: the listing asks the wall clock what is due)
                wakes.append(_monotonic() + max(0.0, wake_at - now()) + 0.01)

    with ThreadPoolExecutor(concurrency, thread_name_prefix="durable-steps-worker") as pool:
        if once:
            ticker.poll()
            admit = admitter(store, known, lease)  # queues: limits kept in the store
            for run_id, name in candidates(store.listing, known, owner, None, admit=admit):
                if stop.is_set():
                    break
                start(pool, run_id, name)
                while len(running) >= concurrency:
                    reap(0.2)
        next_look = 0.0
        while not once and not stop.is_set():
            ticker.poll()  # schedules
            free = concurrency - len(running)
            # Look again when the next look is due -- or when a timer comes due before
            # then: one this worker put to sleep, or one the last look saw coming.
            if free > 0 and _monotonic() >= min([next_look, *wakes]):
                began = _monotonic()
                busy = set(running.values()).__contains__
                soon: list[float] = []
                look = candidates(
                    store.listing,
                    known,
                    owner,
                    free,
                    busy,
                    wakes=soon,
                    within=interval,
                    admit=admitter(store, known, lease),  # queues: a look's admissions
                )
                for run_id, name in look:
                    start(pool, run_id, name)
                ended = _monotonic()
                timers = (ended + max(0.0, w - now()) + 0.01 for w in soon)
                rest = rest_after(ended - began, claims.last, interval)
                next_look = min([ended + rest, *timers])
                wakes[:] = [w for w in wakes if w > ended]  # those looked for
            # Wait for a run to end, but not past the next look: a run in progress must
            # not delay the pickup of a started one. Short slices: a signal is seen promptly.
            until = min(0.2, max(0.0, min([next_look, *wakes]) - _monotonic()))
            if running:
                reap(until if len(running) < concurrency else 0.2)  # full: only an end helps
            else:
                stop.wait(until)
        while running:
            reap(0.2)


class _Claims:
    """What the last pickup cost: from handing a run to a thread to its first step,
    claim included. The runner asks ``stop`` before each step; the first time, the run
    is claimed and its step about to start."""

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


def rest_after(look: float, claim: float, interval: float) -> float:
    """How long to rest after a look that took ``look`` seconds, so that a started run
    is picked up within ``interval``. A run started just after a look began is missed
    by it: it waits for that look to end, the rest, the next look's listing (which
    costs about what this one did) and its claim (about what the last one did) -- so
    the rest is the interval less two looks and a claim. A store too big for that
    (a look over a third of the interval) gets a rest as long as a look, so that
    listing it takes at most half of the worker's time."""
    return max(interval - 2 * look - claim, look)


def on_signals(stop: threading.Event, echo: Callable[[str], None]) -> None:
    """SIGTERM/SIGINT: stop gracefully; a second one: exit at once."""

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            echo("second signal: exiting now; the leases this worker held will expire")
            os._exit(1)
        stop.set()
        echo(
            f"{signal.Signals(signum).name}: stopping; running runs stop at their next "
            "step boundary and release their leases"
        )

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
