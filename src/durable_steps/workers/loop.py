"""``durable-steps worker MODULE:ATTR``: recover runs in a loop until told to stop.

The worker imports ATTR from MODULE (a ``Workflow`` or a list of them; the current
directory is importable, as with ``python -m``), opens the store the environment
describes, and repeats: look for the runs of those workflows to take -- running runs
whose lease is free (orphaned, or started with ``Workflow.start``) and waiting runs
that are due (``discovery``: the store filters them) -- start each, at most
``--concurrency`` at a time -- async workflows as tasks on the worker's event loop,
sync ones in threads (``fleet``) -- and print one line per run when it ends; then rest
until the next look, timed so that a run started at any moment is picked up within
``--interval`` while a slot is free (``fleet.rest_after``; runs in progress do not delay
it), or less when a sleeping run's wake time (or a signal's deadline) comes sooner:
a timer is resumed at its time. ``--once`` makes one pass (every candidate,
``--concurrency`` at a time) and exits.

SIGTERM or SIGINT stops it gracefully: no new run starts, and each running run
stops at its next call, sleep or wait (or its next step boundary, whichever comes
first) and releases its lease -- what it recorded stays recorded; a call in progress
is let finish: it cannot be interrupted halfway without being run again --, then the
worker exits 0. A second signal exits at once; leases then expire by themselves
(at once for other processes on this machine, which can see this one is gone).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..runner.workflow import Workflow
from ..seam.errors import ConfigurationError, MissingExtraError
from ..seam.store import AsyncStore, Store
from .fleet import serve_in_loop
from .recovery import Recovered
from .schedules import Schedule, Ticker, split


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
    except MissingExtraError:
        raise  # (it names the extra to install: saying "cannot import" would hide it)
    except ImportError as exc:
        extra = _EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is not None:
            raise MissingExtraError(
                f"{module_name!r} needs {exc.name!r}, which is not installed: pip install "
                f"'durable-steps[{extra}]'",
                variable="MODULE:ATTR",
            ) from exc
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


_EXTRAS = {
    "croniter": "schedules",
    "zstandard": "zstd",
    "cryptography": "encryption",
    "azure": "cosmos",
    "aiohttp": "cosmos",
    "opentelemetry": "otel",
}
"""The optional dependencies a worker's module may miss, by top-level module: the
extra that installs each (pyproject.toml)."""


def _many(value: object) -> bool:
    return isinstance(value, list | tuple | set | frozenset)


def serve(
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
    astore: Callable[[], AsyncStore] | None = None,
) -> None:
    """The worker loop (see the module docstring; ``fleet`` runs it on an event loop
    of its own); returns when stopped or, with ``once``, after one pass. ``astore``
    opens the async store of async workflows (default: ``store`` in threads)."""
    served, schedules = split(workflows)
    serve_in_loop(
        store,
        served,
        ticker=Ticker(store, schedules, min(interval, 1.0)),  # schedules: their ticks
        once=once,
        concurrency=concurrency,
        interval=interval,
        lease=lease,
        owner=owner,
        echo=echo,
        stop=stop or threading.Event(),
        astore=astore,
    )


def on_signals(stop: threading.Event, echo: Callable[[str], None]) -> None:
    """SIGTERM/SIGINT: stop gracefully; a second one: exit at once."""

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            echo("second signal: exiting now; the leases this worker held will expire")
            os._exit(1)
        stop.set()
        echo(
            f"{signal.Signals(signum).name}: stopping; running runs stop at their next "
            "call or step boundary and release their leases"
        )

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
