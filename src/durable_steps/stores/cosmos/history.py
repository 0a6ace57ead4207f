"""A Cosmos DB run's history: its segments, kept, read back as programs.

Each save's update is a delta segment already (``segments``). With history on (the
store's ``history="steps"``, the default; ``seam.history``) ``plan`` keeps them: the
data is inline in the head only until the run's first step completes (nothing before
it is history; so every step's update is a segment), a save that completes
a step always writes one and marks it ``hist`` (the step, its name, time, attempts and
the update's bytes), and a fold keeps the generations it supersedes, its snapshot
naming the chain's tip before it (``back``). Storage is then the segments the saves
wrote; a state that only grows is never folded for growing, so it holds each update once.

Reading: one projected single-partition query of every segment's links and marker (no
data), walked from the head's tip back through ``prev`` and ``back``
(``segments.history_chain``) -- so an orphan of a failed save, which no link reaches,
is never taken for history. ``load_at`` then reads the one generation it needs up to
the version wanted (one more query), and the journal of the next step as it stood
before its completing save (a query of that version's generation), or the run's
current one. Before the first step (``load_at(run, -1)``) is the version before the
first marked one: with history the data leaves the head once the first step records a
call (``plan``), so a run whose first step made calls keeps its input and that
journal. ``prune`` keeps every segment this walk reaches (``removal``).
"""

from __future__ import annotations

from typing import Any

from ...seam.checkpoint import Checkpoint
from ...seam.encoded import opened
from ...seam.errors import corrupt_error
from ...seam.history import (
    StepRecord,
    checkpoint_at,
    latest,
    latest_at,
    not_kept,
    with_calls,
)
from ...seam.rules import check_run_id
from . import segments
from .heads import HeadPrograms
from .programs import QUERY, Program, SdkCall
from .sdk import AzureError, translate


class HistoryPrograms(HeadPrograms):
    """``run_history`` and ``load_at`` as programs."""

    def _kept(self, run_id: str) -> Program[tuple[dict[str, Any], list[dict[str, Any]]] | None]:
        """The head and the versions history reaches, oldest first ([] when the data is
        inline: a run saved without history)."""
        check_run_id(run_id)
        head = yield from self._head(run_id)
        if head is None:
            return None
        where = f"{self._where} item {run_id!r}"
        try:
            chain = segments.chain_of(head)
        except (TypeError, ValueError) as exc:
            raise corrupt_error(run_id, where, str(exc)) from None
        if chain is None:
            return head, []
        try:
            found = yield SdkCall(QUERY, segments.history_links(run_id))
        except AzureError as exc:
            raise translate(exc, self._where) from exc
        return head, segments.history_chain(chain, found)

    def _history(self, run_id: str) -> Program[list[StepRecord] | None]:
        kept = yield from self._kept(run_id)
        if kept is None:
            return None
        entries = _entries(kept[1])
        if not entries:  # no marker: a run saved without history keeps its latest
            return latest((yield from self._load_head(run_id)))
        return [entry for _, entry in entries]

    def _load_at(self, run_id: str, step: int) -> Program[Checkpoint | None]:
        cp = yield from self._stored_at(run_id, step)
        return None if cp is None else opened(self.codec, cp)

    def _stored_at(self, run_id: str, step: int) -> Program[Checkpoint | None]:
        """``load_at``'s checkpoint, its values as stored."""
        kept = yield from self._kept(run_id)
        if kept is None:
            return None
        head, versions = kept
        entries = _entries(versions)
        if not entries:
            return latest_at((yield from self._load(run_id)), step)
        if step == -1:  # before the first step: the version its completing save followed
            first = entries[0][0]
            if entries[0][1].step != 0 or first == 0:
                raise not_kept(run_id, step, ())
            state, calls = yield from self._data_of(run_id, versions[first - 1])
            fields = {**head, "step": -1, "updated_at": None, "status": "running"}
            return checkpoint_at(run_id, fields, state, calls)
        at = next((n for n, (_, e) in enumerate(entries) if e.step == step), None)
        if at is None:
            raise not_kept(run_id, step, (e.step for _, e in entries))
        n, entry = entries[at]
        state, _ = yield from self._data_of(run_id, versions[n])
        if at + 1 < len(entries):  # the next step's journal before its completing save
            m = entries[at + 1][0]
            calls = [] if m - 1 == n else (yield from self._data_of(run_id, versions[m - 1]))[1]
        else:
            current = yield from self._load(run_id)
            calls = [] if current is None or current.step != step else list(current.calls)
        fields = {**head, "step": step, "updated_at": entry.at}
        if step != head.get("step"):
            fields["status"] = "running"
        return checkpoint_at(run_id, fields, state, calls)

    def _data_of(
        self, run_id: str, item: dict[str, Any]
    ) -> Program[tuple[dict[str, Any], list[Any]]]:
        """The state and journal of one version in history: its generation read up to it."""
        chain = segments.up_to(item)
        try:
            found = yield SdkCall(QUERY, segments.of_generation(run_id, chain))
        except AzureError as exc:
            raise translate(exc, self._where) from exc
        return segments.rebuild(run_id, chain, found, f"{self._where} item {run_id!r}")


def _entries(versions: list[dict[str, Any]]) -> list[tuple[int, StepRecord]]:
    """The completed steps along the chain (the index of each one's version), each step
    once: a marker of a step at or below the one before (a save on a version its store
    did not know) is not a completion."""
    out: list[tuple[int, StepRecord]] = []
    last = -1
    for n, item in enumerate(versions):
        hist = item.get("hist")
        if not isinstance(hist, dict) or type(hist.get("step")) is not int:
            continue
        if hist["step"] <= last:
            continue
        last = hist["step"]
        at, attempts, size = hist.get("at"), hist.get("attempts"), hist.get("size")
        out.append(
            (
                n,
                with_calls(
                    StepRecord(
                        last,
                        str(hist.get("name", "")),
                        at if isinstance(at, int | float) else None,
                        attempts if type(attempts) is int else None,
                        size if type(size) is int else None,
                    ),
                    hist.get("calls"),
                ),
            )
        )
    return out
