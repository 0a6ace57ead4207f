"""The bytes a save wrote: stores report them, the runner's telemetry reads them.

A store calls ``wrote(n)`` inside ``save`` with the bytes it wrote (or sent); the
runner wraps a save in ``counting()`` to collect them (they land on the save, step
and call spans and in the DEBUG line). Countings nest: a report reaches every one
that is open. Outside ``counting()`` a report is dropped. The hook lives in the seam
so that stores report without importing the runner.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_written: ContextVar[tuple[list[int], ...]] = ContextVar("durable_steps_written", default=())


def wrote(n: int) -> None:
    """Called by a store inside ``save`` with the bytes it wrote or sent."""
    for holder in _written.get():
        holder.append(n)


@contextlib.contextmanager
def counting() -> Iterator[list[int]]:
    """Around a save: the byte counts its store reports, in a list that fills as it goes."""
    holder: list[int] = []
    token = _written.set((*_written.get(), holder))
    try:
        yield holder
    finally:
        _written.reset(token)
