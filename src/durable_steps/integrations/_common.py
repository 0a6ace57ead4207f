"""What the integrations share: the check of a framework's installed release against the
range the extra accepts, the step running here (the unit a framework's work is made
durable in), the number of an agent run within it, and the channel a streamed call hands
its events to the caller through. Only the public ``durable_steps`` surface, as the
integrations themselves."""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from collections import deque
from collections.abc import AsyncIterator
from hashlib import sha256
from typing import Any

from durable_steps import MissingExtraError, StepContext, current_step


def check_release(
    module: str,
    distribution: str,
    installed: str,
    supported: tuple[tuple[int, int], tuple[int, int]],
    install: str,
) -> None:
    """Refuse, at import, a release of ``distribution`` outside ``supported`` (lowest,
    first not supported) -- ``installed`` is its version text -- naming the range and
    ``install``."""
    major, minor = (int(p) for p in re.findall(r"\d+", installed)[:2])
    (lo_major, lo_minor), (hi_major, hi_minor) = supported
    if not (lo_major, lo_minor) <= (major, minor) < (hi_major, hi_minor):
        raise MissingExtraError(
            f"durable_steps.integrations.{module} supports {distribution}>={lo_major}."
            f"{lo_minor},<{hi_major}{f'.{hi_minor}' if hi_minor else ''}, and {installed} is "
            f"installed: {install}"
        )


def step_here() -> StepContext | None:
    """The step running here, if any; ``None`` inside a call's function too (there the
    call is the durable unit, and an agent run inside it is part of that call)."""
    try:
        ctx = current_step()
    except RuntimeError:
        return None
    return ctx if ctx.journal is not None and ctx.call is None else None


_RUNS: dict[tuple[int, str], int] = {}
"""Agent runs started so far in each step attempt (by the identity of its journal,
while it lives) and task scope."""


def nth_run(ctx: StepContext) -> int:
    """The number (from 1) of the agent run starting now in ``ctx``'s step attempt and
    task: the same when the step runs again, so it names the run's calls (their keys)."""
    key = (id(ctx.journal), ctx.task)
    if key not in _RUNS:
        _RUNS[key] = 0
        weakref.finalize(ctx.journal, _RUNS.pop, key, None)
    _RUNS[key] += 1
    return _RUNS[key]


def digest(text: str) -> str:
    """A framework's id as a call key holds it: a short digest, the same for the same id
    (a key is stored in clear, beside values a store's codec encrypts; ids may be long)."""
    return sha256(text.encode()).hexdigest()[:24]


class Channel:
    """Events from a streamed call to the caller that waits for them, in one event loop
    (``pydantic_ai/_live.py``, ``openai_agents/_live.py``)."""

    def __init__(self) -> None:
        self.events: deque[Any] = deque()
        self.ended = False
        self.changed = asyncio.Event()

    def put(self, event: Any) -> None:
        self.events.append(event)
        self.changed.set()

    def end(self, _: object = None) -> None:
        self.ended = True
        self.changed.set()

    async def wait(self) -> None:
        """Until an event is there or the call ended. Waits on an ``asyncio.Event``, not
        in a task: a task here would be numbered in the step's scope by timing."""
        while not self.events and not self.ended:
            self.changed.clear()
            await self.changed.wait()

    async def drain(self) -> AsyncIterator[Any]:
        """Each event as it comes, until the call ended and every event was taken."""
        while True:
            await self.wait()
            while self.events:
                yield self.events.popleft()
            if self.ended:
                return


@contextlib.asynccontextmanager
async def settled(call: asyncio.Future[Any]) -> AsyncIterator[None]:
    """Around a caller's reading of a streamed call (running in ``call``): a reader
    that stops early (closed, cancelled) lets the call finish and record, as a save is
    let finish -- a lost lease or a cancelled run ends it at its next append; any other
    exception (a crash) cancels the call, which then records nothing."""
    try:
        yield
    except (asyncio.CancelledError, GeneratorExit):
        while not call.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(call)
        raise
    except BaseException:
        call.cancel()
        with contextlib.suppress(BaseException):
            await call
        raise
