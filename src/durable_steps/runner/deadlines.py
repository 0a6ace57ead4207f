"""Run deadlines: a run not finished by its deadline is cancelled.

``Workflow(timeout=)`` (seconds) gives every run of the workflow a deadline, and
``start(..., timeout=)`` one run: the deadline (``Checkpoint.deadline``, epoch
seconds) is fixed when the run begins -- by ``start``, or by its first claim when it
was started without one (``runs start`` of a workflow whose code the CLI does not
import) -- and never moves.

Who enforces it:

- the runner, at its saves (each step's, each call's record) and at its claim: a
  run past its deadline is saved as ``cancelled`` with reason ``"deadline"``, its
  lease released, and ``RunCancelledError`` raised -- the step in progress is not
  saved, no other step or call starts. A save that *completes* the run is let
  through: its work is done.
- the worker: its look (``Store.takeable``) also answers runs past their deadline
  that nobody runs -- waiting for a signal or a timer, started and not taken, held
  by a dead worker -- and the claim of each cancels it. So a run is cancelled
  whether it is running, waiting or not yet taken.

A run another live worker holds is cancelled by that worker's next save; a step
that makes no call and no save for a long time is cancelled when it ends (a call is
the place to stop: see the worker's stop at the next call).
"""

from __future__ import annotations

from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import RunCancelledError
from . import checkpoints, clock
from . import errors as run_errors

REASON = "deadline"


def check_timeout(timeout: object, what: str) -> float | None:
    """A timeout in seconds as given to ``Workflow`` or ``start``: positive, or None."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"{what} must be a positive number of seconds or None, not {timeout!r}")
    return float(timeout)


def begun(cp: Checkpoint, timeout: float | None) -> Checkpoint:
    """``cp`` with its deadline fixed now from ``timeout``, unless it has one already."""
    if timeout is None or cp.deadline is not None:
        return cp
    return evolve(cp, deadline=clock.now() + timeout)


def passed(cp: Checkpoint) -> bool:
    """Whether ``cp`` is of an unfinished run past its deadline."""
    return (
        cp.deadline is not None
        and cp.status in ("running", "waiting")
        and clock.now() >= cp.deadline
    )


def expired(cp: Checkpoint) -> Checkpoint:
    """The run as it stands, cancelled for its deadline, its lease released."""
    return evolve(checkpoints.released(cp, "cancelled"), status="cancelled", cancel_reason=REASON)


def error(run_id: str) -> RunCancelledError:
    return run_errors.cancelled(run_id, REASON)
