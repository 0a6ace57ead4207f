"""Awaiting a run: ``wait_for_result(store, run_id, timeout=None, interval=1.0)``.

Polls the run's metadata -- ``Info``, which a store answers without reading the
state (the file log's last record, Cosmos DB's head item) -- every
``interval`` seconds until the run ends, and reads the state once, at the end:
the final state of a completed run; ``RunFailedError`` (with the recorded error's
type and message) for a failed one, ``RunCancelledError`` for a cancelled one,
``RunNotFoundError`` for one that does not exist, ``TimeoutError`` after
``timeout`` seconds. A waiting run is not an end: it is polled on.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ..runner.clock import now
from ..runner.errors import cancelled, not_found
from ..runner.requests import Info, Load, Request, Sleep, execute
from ..runner.store_io import blocking_io, execute_on
from ..runner.timers import seconds_of
from ..seam.checkpoint import RunInfo
from ..seam.errors import RunFailedError
from ..seam.rules import check_run_id
from ..seam.state import thaw
from ..seam.store import AsyncStore, Store


def wait_for_result(
    store: Store, run_id: str, *, timeout: float | None = None, interval: float = 1.0
) -> dict[str, Any]:
    """The final state of run ``run_id`` once it completed (see the top)."""
    return execute(_await(run_id, timeout, interval), blocking_io(store))


async def wait_for_result_async(
    store: AsyncStore, run_id: str, *, timeout: float | None = None, interval: float = 1.0
) -> dict[str, Any]:
    """``wait_for_result`` for async stores."""
    return await execute_on(_await(run_id, timeout, interval), store)


def _await(
    run_id: str, timeout: float | None, interval: float
) -> Generator[Request, Any, dict[str, Any]]:
    check_run_id(run_id)
    interval = seconds_of(interval, "wait_for_result(interval=...)")
    if interval == 0:
        raise ValueError("wait_for_result(interval=...) must be more than 0 seconds")
    if timeout is not None:
        timeout = seconds_of(timeout, "wait_for_result(timeout=...)")
    deadline = None if timeout is None else now() + timeout
    while True:
        info: RunInfo | None = yield Info(run_id)
        if info is None:
            raise not_found(run_id, "it has no result to wait for (start it first)")
        if info.status == "completed":
            cp = yield Load(run_id)
            if cp is None:  # deleted between the two reads
                continue
            return thaw(cp.state)  # type: ignore[no-any-return]
        if info.status in ("failed", "cancelled"):
            yield from _ended(run_id)
        left = None if deadline is None else deadline - now()
        if left is not None and left <= 0:
            raise TimeoutError(
                f"run {run_id!r} did not finish within {timeout} s (it is {info.status}); "
                "wait again, or look at it with 'durable-steps runs show'"
            )
        yield Sleep(interval if left is None else min(interval, left))


def _ended(run_id: str) -> Generator[Request, Any, None]:
    """Raise what a failed or cancelled run ended with (read once, with its error)."""
    cp = yield Load(run_id)
    if cp is None:
        return
    if cp.status == "cancelled":
        raise cancelled(run_id, cp.cancel_reason)
    if cp.status == "failed":
        error = dict(cp.error or {})
        kind, message = error.get("type"), error.get("message")
        raise RunFailedError(
            f"run {run_id!r} failed in step {error.get('step')} ({kind}: {message}); see "
            f"'durable-steps runs show {run_id}', fix the cause and run it again to resume",
            run_id=run_id,
            error_type=kind,
            error_message=message,
        )
    # else it was run again meanwhile: poll on
