"""``runs show``'s attempts: when each attempt of the running step began and how it
ended, as the engine recorded them (``Checkpoint.attempt_log``, ``seam.attempts``)."""

from __future__ import annotations

from ..seam.checkpoint import Checkpoint
from .common import say, when

_HOW = {
    "completed": "completed",
    "waiting": "suspended to wait",
    "released": "released: its worker stopped and gave the run back",
    "cancelled": "cancelled",
    "lost": "ended without a record: a crash or a lost lease",
}


def show_attempts(cp: Checkpoint) -> None:
    """The attempts of the running step (the last one, for a completed run), as the
    engine recorded them: when each began and how it ended."""
    step = cp.step if cp.status == "completed" else cp.step + 1
    log = cp.attempts_of(step)
    if not log:
        return
    say((f"attempts of step {step}", "bold"))
    for a in log:
        if a.how == "failed":
            how = f"failed: {a.error_type}: {a.error_message}"
        elif a.how is None:
            how = "cancelled while it ran" if cp.status == "cancelled" else "running"
        else:
            how = _HOW[a.how]
        end = a.seen if a.how == "lost" else a.ended
        until = f" to {when(end)}" + (" (its last save)" if a.how == "lost" else "")
        say(f"  {a.number}  from {when(a.began)}{until if end else ''}  {how}")
