"""The console's parts on their own: the timeline's events and picture, folded values,
the listing's cost and order, the actions' registry and the adapter for what is being
built -- on real checkpoints of real stores where a store is involved."""

from __future__ import annotations

import json
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.console import actions, listing, sources, svg, timeline, values
from durable_steps.console.listing import Filters, Listings

from .conftest import Counting

T = 1_800_000_000.0


def cp(**fields: Any) -> ds.Checkpoint:
    base: dict[str, Any] = {"run_id": "r", "step": 0, "state": {}, "steps": ("retrieve",)}
    return ds.Checkpoint(**{**base, **fields})


def call(i: int, at: float, name: str = "llm", **more: Any) -> dict[str, Any]:
    return {"i": i, "name": name, "at": at, "result": {"n": i}, **more}


def attempts(events: list[timeline.Event]) -> list[timeline.Event]:
    return [e for e in events if e.kind == timeline.ATTEMPT]


def test_a_crash_is_a_new_attempt_placed_in_the_widest_gap() -> None:
    """Attempt 2 of a step, no error recorded: attempt 1 ended in a crash, placed (as an
    estimate) in the widest gap between recorded calls; attempt 2 runs to now while its
    worker holds the lease."""
    calls = (call(0, T), call(1, T + 1), call(2, T + 31), call(3, T + 32))
    run = cp(calls=calls, attempt=2, owner="w", lease_expires=T + 99, updated_at=T + 32)
    one, two = attempts(timeline.events_of(run, now=T + 40))
    assert (one.start, one.at, one.estimated) == (T, T + 16, True)
    assert one.detail == "ended without a record: a crash or a lost lease"
    assert (two.start, two.at, two.detail) == (T + 16, T + 40, "running: held by w")


def test_a_recorded_failure_is_a_boundary_and_splits_the_crashes_around_it() -> None:
    """Attempts 1 (crash), 2 (failed at its recorded time), 3 (crash), 4 (failed for
    good): the failure's time is exact; each crash sits in the widest gap on its side."""
    calls = (call(0, T), call(1, T + 10), call(2, T + 11), call(3, T + 30), call(4, T + 31))
    error = {"type": "E", "message": "m", "step": 1, "attempt": 2, "at": T + 20}
    run = cp(calls=calls, attempt=4, error=error, status="failed", updated_at=T + 40)
    events = attempts(timeline.events_of(run, now=T + 50))
    assert [e.at for e in events] == [T + 5, T + 20, T + 25, T + 40]
    assert [e.detail for e in events[1:]] == [
        "failed; retried",
        "ended without a record: a crash or a lost lease",
        "failed for good: its retries are used up",
    ]


def test_history_plugs_in_as_steps_with_times() -> None:
    """Completed steps without history have no times; with history's entries
    (run_history's StepRecord) each becomes a bar from the previous step's completion to
    its own."""
    run = cp(step=1, steps=("a", "b"), status="completed", updated_at=T + 9)
    bare = [e for e in timeline.events_of(run) if e.kind == timeline.STEP]
    assert [e.at for e in bare] == [None, None]
    kept = [ds.StepRecord(0, "a", T + 1, 1, 10), ds.StepRecord(1, "b", T + 9, 3, 20)]
    steps = [e for e in timeline.events_of(run, kept) if e.kind == timeline.STEP]
    assert [(e.start, e.at, e.attempt) for e in steps] == [(None, T + 1, 1), (T + 1, T + 9, 3)]
    picture = svg.render(timeline.events_of(run, kept))
    assert 'data-step="1"' in picture and "completed at" in picture and "3 attempt(s)" in picture
    assert "completed earlier" not in picture


def test_the_picture_escapes_names_and_marks_estimates() -> None:
    """Names from a run are escaped in the SVG; an estimated boundary is dashed; calls
    of a task get a lane of their own."""
    calls = (call(0, T, name="<b>x</b>"), call(0, T + 5, task="1"), call(1, T + 50))
    picture = svg.render(timeline.events_of(cp(calls=calls, attempt=2), now=T + 60), T + 60)
    assert "<b>" not in picture and "&lt;b&gt;x&lt;/b&gt;" in picture
    assert 'class="boundary"' in picture
    assert "calls of task 1" in picture
    assert picture.count('class="call"') == 3


def test_a_fold_sends_a_page_of_entries_or_a_chunk_of_text() -> None:
    """A large array folds 100 entries at a time; a long string 16,384 characters at a
    time; short values are shown in place; a path that is not there is PathError."""
    state = {"items": [{"n": n, "text": "x" * 500} for n in range(250)], "s": "y" * 40_000}
    first = values.node("state", state, ("items",))
    assert (first.count, len(first.entries), first.next_offset) == (250, 100, 100)
    last = values.node("state", state, ("items",), 200)
    assert (len(last.entries), last.next_offset) == (50, None)
    inner = values.node("state", state, ("items", 3))
    assert inner.entries[0].inline == "3"
    text = values.node("state", state, ("s",), 16_384)
    assert (len(text.text or ""), text.next_offset) == (16_384, 32_768)
    with pytest.raises(values.PathError):
        values.node("state", state, ("items", 250))
    assert values.parse_path(json.dumps(["items", 3])) == ("items", 3)
    with pytest.raises(values.PathError):
        values.parse_path('[{"a": 1}]')


@pytest.fixture
def many(durable_store: ds.Store) -> Counting:
    for n in range(230):
        durable_store.save(ds.Checkpoint(f"run-{n:04d}", -1, {}, workflow="w" if n % 2 else "v"))
    return Counting(durable_store)


def test_pages_read_only_what_they_show(many: Counting) -> None:
    """In the store's order, page 1 reads one page (and one run to know there is more);
    page 3 reads only its own runs more; pages do not overlap."""
    listings = Listings(many)
    f = Filters(size=50)
    first = listings.page(f, 0, max_age=0)
    assert (len(first.rows), first.more, many.yielded) == (50, True, 51)
    listings.page(f, 1)
    third = listings.page(f, 2)
    assert many.yielded == 151
    assert not {r.run_id for r in first.rows} & {r.run_id for r in third.rows}


def test_a_sort_reads_every_match_once_then_pages_are_free(many: Counting) -> None:
    """Sorted by run id, descending, workflow w: every run of w is read once (the store
    filters the workflow), sorted; the last page costs nothing more."""
    listings = Listings(many)
    f = Filters.parse({"workflow": "w", "sort": "run_id", "dir": "desc", "size": "25"})
    first = listings.page(f, 0, max_age=0)
    assert [r.run_id for r in first.rows[:2]] == ["run-0229", "run-0227"]
    assert (first.total, many.yielded) == (115, 115)
    last = listings.page(f, 4)
    assert (len(last.rows), last.more, many.yielded) == (15, False, 115)


def test_filters_the_store_lacks_are_applied_to_what_it_yields(many: Counting) -> None:
    """A run id prefix and an unknown filter value are applied by the console; a bad
    age or status is FilterError saying what to type."""
    page = Listings(many).page(Filters.parse({"prefix": "run-01"}), 0, max_age=0)
    assert len(page.rows) == 50 and all(r.run_id.startswith("run-01") for r in page.rows)
    with pytest.raises(listing.FilterError, match=r"e\.g\. 30m, 12h, 7d or 2w"):
        Filters.parse({"older": "7 days"})
    with pytest.raises(listing.FilterError, match="is not one of running"):
        Filters.parse({"status": "done"})


def test_each_action_is_offered_where_it_applies_and_refused_with_the_librarys_message() -> None:
    """A failed run is offered signal, message, resume, fork and cancel; a completed one
    fork alone; resuming a completed run is refused with resume_run's own message."""
    assert [a.name for a in actions.offered(cp(status="failed"))] == [
        "signal",
        "message",
        "resume",
        "fork",
        "cancel",
    ]
    assert [a.name for a in actions.offered(cp(status="completed"))] == ["fork"]
    with ds.MemoryStore() as store:
        ds.run("done", [ds.Step("a", lambda s: {})], store)
        with pytest.raises(actions.Refused, match="'done' cannot be resumed: it has completed"):
            actions.perform(actions.ACTIONS["resume"], store, "done", {})


def test_a_payload_that_is_not_json_is_refused_before_any_call() -> None:
    with pytest.raises(actions.Refused, match=r"payload \(JSON\): not JSON"):
        actions.values(actions.ACTIONS["signal"], {"name": "approval", "payload": "{ok"})
    with pytest.raises(actions.Refused, match="signal: required"):
        actions.values(actions.ACTIONS["signal"], {"payload": "1"})


def test_panels_say_what_is_not_there_and_survive_a_failing_source() -> None:
    """A source with no rows shows its empty-state text; one that raises shows the error
    in its panel instead of failing the page."""
    assert sources.panel("streams", list).empty == sources.EMPTY["streams"]

    def broken() -> list[Any]:
        raise OSError("the stream store is down")

    shown = sources.panel("events", broken)
    assert shown.error == "could not read the events: OSError: the stream store is down"
    assert sources.panel("events", lambda: [("a", 1)]).rows == [("a", 1)]
