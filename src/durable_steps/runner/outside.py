"""Changing a run from outside its owner: a signal's delivery, a cancellation.

``update_run(run_id, change, ...)`` loads the run and saves ``change(checkpoint)``
conditionally, on the version it loaded. A save that meets a newer version (the
owner saved meanwhile) loads again and tries anew, so it never overwrites one;
after ``_TRIES`` tries the change is refused (``ConflictError``). A missing run
raises ``RunNotFoundError``; ``change`` may raise, or return None: nothing to do.

Such a change touches the run's metadata, never its state: the state is handed to
the store as the very one stored (``seam.state``'s ``stored_as``), so a store writes
the run's head (Cosmos DB) or a record without the state (the file journal), not
the whole state again.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ..seam.errors import ConflictError
from ..seam.state import frozen_state
from ..seam.store import Checkpoint, evolve
from .claim import not_found
from .requests import Load, Request, Save, Sleep

_TRIES = 20


def update_run(
    run_id: str,
    change: Callable[[Checkpoint], Checkpoint | None],
    *,
    missing: str,
    doing: str,
    undone: str,
) -> Generator[Request, Any, Checkpoint | None]:
    """The checkpoint as saved (its state as loaded), or None when ``change`` found
    nothing to do. ``missing``, ``doing``, ``undone``: the words of the errors, as in
    "run 'x' does not exist, so {missing}" and "run 'x' kept changing while {doing}
    (20 tries); {undone}"."""
    for attempt in range(_TRIES):
        cp: Checkpoint | None = yield Load(run_id)
        if cp is None:
            raise not_found(run_id, missing)
        changed = change(cp)
        if changed is None:
            return None
        unchanged = frozen_state(cp.state, run_id, stored_as=cp.etag)
        try:
            saved: Checkpoint = yield Save(evolve(changed, state=unchanged))
        except ConflictError:
            yield Sleep(0.005 * (attempt + 1))  # the owner saved meanwhile: look again
            continue
        return evolve(saved, state=cp.state)
    raise ConflictError(
        f"run {run_id!r} kept changing while {doing} ({_TRIES} tries); {undone}. Try again",
        run_id=run_id,
    )
