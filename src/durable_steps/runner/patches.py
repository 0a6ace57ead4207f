"""``patched("change-id")``: a change of a step's code that runs already past that
point do not take (Temporal's ``patched``), recorded so that replays agree.

    if patched("ask-for-sources"):
        sources = call("sources", find_sources, question)   # new code
    answer = call("llm", chat, question)                    # as before

Design. ``patched`` is a durable operation of the step's journal, numbered like a
call (``journal.take("patch", change_id)``). What is recorded at its place says on
which code the run reached it:

- a ``patch`` record of this change: the run reached it on the new code before (it
  crashed later, or waited): True again;
- nothing: the run reaches this point now, on the new code: True, and a ``patch``
  record is kept at that place;
- a record of anything else (a call, a sleep, a wait, another change's patch): the
  run went past this point on the old code, which made its next durable operation
  here: False, and the place is given back (``Scopes.give_back``), so the old code's
  recorded operations that follow replay at their own places.

The answer cannot differ between replays: the first two keep the place empty or
holding the patch record, and the old code's record never moves. A ``patch`` record
makes old code that meets it (a rollback) refuse loudly (``StepMismatchError``, the
journal's rule) instead of replaying another operation's result.

A True answer's record is saved just before the step's next record (its next call's
result: ``journal``), not by a save of its own, so ``patched`` is a plain function in
sync and async steps alike. Until then nothing of the step is recorded after that
place, so a run that crashes meanwhile meets an empty place again: True again. A
step that completes drops its records anyway. A change between steps needs no
``patched``: a completed step is never run again, and steps may be appended.
"""

from __future__ import annotations

from ..seam.rules import check_name
from ..seam.state import freeze
from .journal import _journal
from .step import current_step


def patched(change_id: str) -> bool:
    """True when the run reaches this point on the code of change ``change_id``, False
    when it went past it on the code before (see the top). Inside a step only."""
    journal = _journal("patched")
    check_name(change_id, "change id")
    key, record = journal.take("patch", change_id, foreign=True)
    if record is None:
        ctx = current_step()
        marker = {**key, "name": change_id, "kind": "patch", "step_attempt": ctx.attempt}
        journal.markers.append(freeze(marker, "", ctx.run_id, 0, "patch record"))
        return True
    if (record.get("kind"), record["name"]) == ("patch", change_id):
        return True
    journal.scopes.give_back(key.get("task", ""), key["i"])
    return False
