"""Changing a run from outside its owner: a signal's delivery, a cancellation.

``update_run(run_id, change, ...)`` reads the run's head -- its checkpoint but its
data -- and saves ``change(checkpoint)`` conditionally, on the version it read. A
save that meets a newer version (the owner saved meanwhile) reads again and tries
anew, so it never overwrites one; after ``_TRIES`` tries the change is refused
(``ConflictError``). A missing run raises ``RunNotFoundError``; ``change`` may
raise, or return None: nothing to do.

Such a change touches the run's metadata, never its data: it reads and writes the
head alone (``LoadHead``, ``SaveHead``: a store's ``load_head`` and ``save_head``),
so on Cosmos DB a signal costs one point read of the head and one write of it, and
on the file store's log a record of the head's fields, whatever the state's size. The
checkpoint ``change`` is given has no state to read (``seam.store.NOT_READ``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ..seam.checkpoint import Checkpoint
from ..seam.errors import ConflictError
from .errors import not_found
from .requests import LoadHead, Request, SaveHead, Sleep

_TRIES = 20


def update_run(
    run_id: str,
    change: Callable[[Checkpoint], Checkpoint | None],
    *,
    missing: str,
    doing: str,
    undone: str,
) -> Generator[Request, Any, Checkpoint | None]:
    """The checkpoint as saved (its state not read), or None when ``change`` found
    nothing to do. ``missing``, ``doing``, ``undone``: the words of the errors, as in
    "run 'x' does not exist, so {missing}" and "run 'x' kept changing while {doing}
    (20 tries); {undone}"."""
    for attempt in range(_TRIES):
        cp: Checkpoint | None = yield LoadHead(run_id)
        if cp is None:
            raise not_found(run_id, missing)
        changed = change(cp)
        if changed is None:
            return None
        try:
            saved: Checkpoint = yield SaveHead(changed)
        except ConflictError:
            yield Sleep(0.005 * (attempt + 1))  # the owner saved meanwhile: look again
            continue
        return saved
    raise ConflictError(
        f"run {run_id!r} kept changing while {doing} ({_TRIES} tries); {undone}. Try again",
        run_id=run_id,
    )
