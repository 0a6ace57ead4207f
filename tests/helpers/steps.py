"""Step functions for the tests of a run's life on every backend (``api`` in conftest):
side effects counted per step, and step bodies that may block."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import durable_steps as ds
from durable_steps import Step

if TYPE_CHECKING:
    from ..conftest import Api


def blocking(api: Api, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A step function that may block (wait for an event, use the store through the sync
    facade): itself under run(), run in a worker thread under run_async, so that the
    event loop (and with it the async store and the heartbeat) stays free."""
    if not api.is_async:
        return fn

    async def in_a_thread(state: Any) -> Any:
        return await asyncio.to_thread(fn, state)

    return in_a_thread


class Effects:
    """Side effects counted per step, as a payment or an e-mail would be."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def step(self, name: str, body: Callable[[Any], Any] | None = None, **kw: Any) -> Step:
        def fn(state: Any) -> Any:
            self.log.append(f"{name}:{ds.current_step().attempt}")
            return body(state) if body else {name: True}

        return Step(name, fn, **kw)
