"""Queues, as a workflow declares them: ``Queue(name, concurrency=, rate=, priority=)``.

A queue bounds how many runs of it run at once across every worker (``concurrency``)
and how many it starts per period (``rate=(n, per_seconds)``); its runs are taken by
priority, higher first (a run's own ``priority=`` at ``start``, else the queue's). A
run started with a ``partition=`` key counts against that partition's limits only, so
each tenant gets a queue of its own.

This module holds only what a queue *is*, so that ``Workflow(queue=)`` and ``start``
(the runner) can name one; the limits are kept by the workers (``workers.queues``),
in a record of the queue held in the store, so they hold across machines.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..seam.rules import check_name


@dataclass(frozen=True)
class Queue:
    """A queue of runs; see the top. ``concurrency`` and ``rate`` None: no limit."""

    name: str
    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    """At most ``n`` runs taken per ``per_seconds`` (each time a worker takes a run of
    the queue, a resumed one included)."""
    priority: int = 0
    """The priority of its runs started without one."""

    def __post_init__(self) -> None:
        check_name(self.name, "queue name")
        if self.concurrency is not None and not (
            _whole(self.concurrency) and self.concurrency >= 1
        ):
            raise ValueError(
                f"queue {self.name!r}: concurrency must be an int of 1 or more (or None: "
                f"no limit), not {self.concurrency!r}"
            )
        rate = self.rate
        if rate is not None and not (
            isinstance(rate, tuple)
            and len(rate) == 2
            and _whole(rate[0])
            and rate[0] >= 1
            and isinstance(rate[1], int | float)
            and not isinstance(rate[1], bool)
            and 0 < rate[1] < float("inf")
        ):
            raise ValueError(
                f"queue {self.name!r}: rate must be (n, per_seconds), n an int of 1 or "
                f"more and per_seconds a positive number, e.g. (10, 60.0); not {rate!r}"
            )
        check_priority(self.priority, f"queue {self.name!r}")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_priority(priority: object, what: str) -> int:
    """A priority: an int within the JSON-safe range every store keeps."""
    if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) >= 2**53:
        raise ValueError(
            f"{what}: priority must be an int (higher is taken first), not {priority!r}"
        )
    return priority


def check_partition(partition: object) -> str:
    """A partition key: text, as a name."""
    return check_name(partition, "queue partition key")
