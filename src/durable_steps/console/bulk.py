"""One action on many runs: cancel, resume or signal the runs an operator selected.

An operator selects runs in the runs list (a checkbox per row, or "every run on this
page") and picks an action. The console asks first, naming the count ("Cancel 12
runs?") and listing them; only the confirmation acts. Each run is then acted on alone,
with the same call as the single action (``actions.ACTIONS``), in the order given: one
run's refusal -- it completed meanwhile, it was deleted -- is that run's result and
does not stop the others. The answer is a row per run: done (the library's words) or
refused (its error's message). The JSON API (``api``) answers the same rows.

At most ``MAX_RUNS`` runs per request: a larger selection is refused before any call,
so that no request runs for minutes; act on a narrower filter, page by page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from durable_steps import Store

from . import actions

BULK = ("cancel", "resume", "signal")
"""The actions offered on a selection of runs."""
TITLES = {"cancel": "Cancel runs", "resume": "Resume runs", "signal": "Send a signal"}
MAX_RUNS = 500


@dataclass(frozen=True)
class Outcome:
    """What one run's action came to."""

    run_id: str
    ok: bool
    text: str

    def json(self) -> dict[str, Any]:
        key = "result" if self.ok else "error"
        return {"run_id": self.run_id, "ok": self.ok, key: self.text}


def selection(run_ids: Iterable[str]) -> list[str]:
    """The selected runs, each once, in the order given; ``actions.Refused`` when there
    are none or too many."""
    chosen = list(dict.fromkeys(r for r in run_ids if r))
    if not chosen:
        raise actions.Refused("no run is selected: tick the runs to act on")
    if len(chosen) > MAX_RUNS:
        raise actions.Refused(
            f"{len(chosen)} runs are selected; act on at most {MAX_RUNS} at once "
            "(narrow the filters, then act page by page)"
        )
    return chosen


def action_for(name: str) -> actions.Action:
    """The bulk action ``name``; ``KeyError`` naming the ones there are."""
    if name not in BULK:
        raise KeyError(f"there is no bulk action {name!r}; the actions are {', '.join(BULK)}")
    return actions.ACTIONS[name]


def question(action: actions.Action, run_ids: list[str], given: Mapping[str, Any]) -> str:
    """The confirmation's question, with the count ("Cancel 3 runs?")."""
    n = len(run_ids)
    runs = f"{n} run" + ("" if n == 1 else "s")
    what = {
        "cancel": f"Cancel {runs}? None of them starts another step or call.",
        "resume": f"Resume {runs} from their last checkpoints, for the workers?",
        "signal": f"Deliver signal {given.get('name') or '(its name below)'} to {runs}? "
        "Each run receives it once.",
    }
    return what[action.name]


def perform(
    action: actions.Action, store: Store, run_ids: list[str], given: dict[str, Any]
) -> list[Outcome]:
    """The action on each run, alone (see the top)."""
    out = []
    for run_id in run_ids:
        try:
            out.append(Outcome(run_id, True, actions.perform(action, store, run_id, given)))
        except actions.Refused as exc:
            out.append(Outcome(run_id, False, str(exc)))
    return out
