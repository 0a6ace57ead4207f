"""The timeline tells what happened, from what the engine recorded: a killed run, a
failed-then-resumed run, a completed run's first step and its calls -- on real runs of
real stores (a FileStore, and Cosmos DB's protocol over HTTP), a real process killed
with SIGKILL. And the words for where a run stands: a message wait, a retry, a
release by a stopping worker."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.console import svg, timeline
from durable_steps.runner.drivers import drive

from .conftest import Site


def kinds(events: list[timeline.Event], kind: str, step: int) -> list[timeline.Event]:
    return [e for e in events if e.kind == kind and e.step == step]


def test_a_killed_run_s_attempts_calls_and_first_step_are_drawn_as_they_were(site: Site) -> None:
    """Killed with SIGKILL in its third call, resumed (it then waits for a signal),
    signalled and resumed again: step 1's attempt 1 is lost and ends at its last save,
    never after attempt 2 began; attempt 2 is suspended; attempt 3 completed. Each
    step, the first one too, is as wide as its attempts; step 1's four calls are
    shown from their start to their end, from its history entry."""
    run_id = f"support-{uuid.uuid4().hex[:8]}"
    site.kill_mid_call(run_id, hang_at=2)
    assert "waiting" in site.resume(run_id)
    ds.send_signal(site.store, run_id, "approval", True)
    site.resume(run_id)
    cp = site.store.load(run_id)
    assert cp.status == "completed"
    history = ds.run_history(site.store, run_id)
    events = timeline.events_of(cp, history, time.time())

    one, two, three = kinds(events, timeline.ATTEMPT, 1)
    assert [a.how for a in (one, two, three)] == ["lost", "waiting", "completed"]
    assert one.estimated and one.start is not None and one.at is not None
    assert two.start is not None and one.at <= two.start  # not drawn across attempt 1
    assert "crashed or lost its lease" in one.detail
    idle = kinds(events, timeline.IDLE, 1)
    assert [i.how for i in idle] == ["lost", "waiting"]

    steps = kinds(events, timeline.STEP, 0) + kinds(events, timeline.STEP, 1)
    assert all(s.start is not None and s.at is not None and s.at > s.start for s in steps)
    calls = kinds(events, timeline.CALL, 1)
    assert [c.name for c in calls] == ["llm", "tool", "llm", "tool"]
    assert all(c.start is not None and c.at is not None and c.start <= c.at for c in calls)
    assert [c.attempt for c in calls] == [1, 1, 2, 2]

    picture = svg.render(events, time.time())
    assert picture.count('data-how="lost"') == 1
    assert len(re.findall(r'class="call" data-call="[^"]*" data-step="1" data-timed', picture)) == 4
    zoomed = svg.render(events, time.time(), zoom=1)
    assert 'data-zoom="1"' in zoomed and 'data-step="0"' not in zoomed

    page = site.get(f"/run/{run_id}?zoom=1")
    assert page.status == 200 and 'data-zoom="1"' in page.body and 'data-how="lost"' in page.body


FAILS = {"left": 1}


def flaky(state: Any) -> dict[str, Any]:
    ds.call("lookup", lambda: {"rows": 3})
    if FAILS["left"]:
        FAILS["left"] -= 1
        raise ValueError("the order id is not a number")
    return {"ok": True}


def test_a_failed_then_resumed_run_shows_the_failure_and_the_time_it_sat_failed(
    site: Site,
) -> None:
    """Failed with a ValueError, resumed later: attempt 1 says it failed with that error
    (not "without a record"), the time it sat failed is an idle period of its own, and
    attempt 2 begins after it -- not across it."""
    run_id = f"flaky-{uuid.uuid4().hex[:8]}"
    steps = [ds.Step("flaky", flaky), ds.Step("after", lambda s: {})]
    FAILS["left"] = 1
    with pytest.raises(ValueError, match="not a number"):
        ds.run(run_id, steps, site.store)
    failed = site.store.load(run_id)
    failed_view = timeline.events_of(failed, (), time.time() + 5)
    (only,) = kinds(failed_view, timeline.ATTEMPT, 0)
    assert only.how == "failed" and "ValueError: the order id is not a number" in only.detail
    assert kinds(failed_view, timeline.IDLE, 0)[0].detail.startswith("failed: not running")
    ds.resume_run(site.store, run_id)
    ds.run(run_id, steps, site.store)
    cp = site.store.load(run_id)
    events = timeline.events_of(cp, ds.run_history(site.store, run_id), time.time())
    one, two = kinds(events, timeline.ATTEMPT, 0)
    assert (one.how, two.how) == ("failed", "completed")
    assert "ValueError" in one.detail and "without a record" not in one.detail
    (sat,) = kinds(events, timeline.IDLE, 0)
    assert sat.start == one.at and sat.at == two.start
    assert one.at is not None and two.start is not None and one.at <= two.start


def test_a_long_idle_period_is_compressed_behind_a_visible_break() -> None:
    """Two 2-second attempts four minutes apart: the four minutes are a break a few
    pixels wide that says how long it was, and each attempt keeps a readable width."""
    t = 1_800_000_000.0
    log = (
        ds.Attempt(0, 1, t, t + 2, "failed", "ValueError", "bad"),
        ds.Attempt(0, 2, t + 242, t + 244, "completed"),
    )
    events = timeline.logged(0, log)
    picture = svg.render(events)
    assert re.search(r'class="break" data-gap="240\.0"', picture)
    assert "4.0 min when nothing ran" in picture
    widths = [
        float(w) for w in re.findall(r'class="attempt[^"]*"[^>]*>.*?width="([\d.]+)"', picture)
    ]
    assert len(widths) == 2 and min(widths) > 200  # not slivers at the edges


def test_the_words_for_where_a_run_stands(site: Site) -> None:
    """A run waiting for a message: RunInfo.waiting_for names the message wait, runs
    list's holder says so; a run released by a stopping worker: "next" names the
    attempt that runs next, not "attempt 0"; a waiting run does not speak of retries."""
    run_id = f"inbox-{uuid.uuid4().hex[:8]}"

    def inbox(state: Any) -> dict[str, Any]:
        return {"got": ds.receive("orders")}

    with pytest.raises(ds.RunWaiting):
        ds.run(run_id, [ds.Step("inbox", inbox)], site.store)
    info = site.store.run_info(run_id)
    assert info is not None and (info.waiting_for, info.receiving) == ("message:orders", "orders")
    listed = {i.run_id: i for i in site.store.list_runs()}[run_id]
    assert listed.waiting_for == "message:orders" and listed.receiving == "orders"
    waiting = site.store.load(run_id)
    assert waiting.next_words() == "next: step 0, attempt 2"
    live = site.get(f"/run/{run_id}/live")
    assert "until a message comes on orders" in live.body and "its signal" not in live.body

    # A worker told to stop while step a runs gives the run back before step b.
    stopped, stopping = f"stop-{uuid.uuid4().hex[:8]}", [False]

    def a(state: Any) -> dict[str, Any]:
        stopping[0] = True
        return {}

    w = ds.Workflow(f"w-{stopped}", [ds.Step("a", a), ds.Step("b", lambda s: {})])
    with pytest.raises(ds.DurableError, match="the worker is stopping"):
        drive(w.program(stopped, None, 60.0, None, lambda: stopping[0]), site.store)
    cp = site.store.load(stopped)
    assert (cp.step, cp.status, cp.attempt) == (0, "running", 0)
    assert cp.next_words() == "next: step 1, attempt 1 (not started yet: a worker takes it)"

    # ... and one told to stop inside a step gives it back at its next call.
    inside, stopping[0] = f"inside-{uuid.uuid4().hex[:8]}", False

    def b(state: Any) -> dict[str, Any]:
        ds.call("first", lambda: 1)
        stopping[0] = True
        ds.call("second", lambda: 2)
        return {}

    w = ds.Workflow(f"w-{inside}", [ds.Step("b", b)])
    with pytest.raises(ds.DurableError, match="stop"):
        drive(w.program(inside, None, 60.0, None, lambda: stopping[0]), site.store)
    cp = site.store.load(inside)
    assert [(a.number, a.how) for a in cp.attempts_of(0)] == [(1, "released")]
    assert cp.next_words() == (
        "next: step 0, attempt 1 (its worker stopped and gave the run back: a worker runs it again)"
    )
    (released,) = kinds(timeline.events_of(cp, (), time.time()), timeline.ATTEMPT, 0)
    assert released.how == "released" and "gave the run back" in released.detail


def test_an_attempt_cancelled_while_it_ran_stays_cancelled_after_a_resume(site: Site) -> None:
    """cancel_run while step 0 runs (its next save finds the run cancelled), then
    resume_run and run again: attempt 1 ended cancelled -- not "lost" (a crash) as an
    open record would be read by the next claim."""
    run_id = f"cancel-{uuid.uuid4().hex[:8]}"
    cancelling = [True]

    def step(state: Any) -> dict[str, Any]:
        if cancelling[0]:
            cancelling[0] = False
            ds.cancel_run(site.store, run_id, reason="the customer withdrew")
        ds.call("lookup", lambda: 1)
        return {}

    with pytest.raises(ds.RunCancelledError):
        ds.run(run_id, [ds.Step("s", step)], site.store)
    cancelled = site.store.load(run_id)
    (open_one,) = kinds(timeline.events_of(cancelled, (), time.time()), timeline.ATTEMPT, 0)
    assert open_one.how == "cancelled"
    ds.resume_run(site.store, run_id)
    ds.run(run_id, [ds.Step("s", step)], site.store)
    history = ds.run_history(site.store, run_id)
    assert [(a.number, a.how) for a in history[0].attempt_log] == [
        (1, "cancelled"),
        (2, "completed"),
    ]


def test_the_running_step_s_bar_begins_with_its_own_first_attempt() -> None:
    """Step 0 ran from T to T+10 (history), step 1 runs since T+10: step 1's bar begins
    where step 0's ends, not at step 0's first attempt."""
    t = 1_800_000_000.0
    done = ds.StepRecord(
        0, "a", t + 10, 1, 5, attempt_log=(ds.Attempt(0, 1, t, t + 10, "completed"),)
    )
    run = ds.Checkpoint(
        run_id="r", step=0, state={}, steps=("a",), owner="w", lease_expires=t + 99,
        attempt_log=([0, 1, t, t + 10, "completed"], [1, 1, t + 10, None, None]),
    )  # fmt: skip
    picture = svg.render(timeline.events_of(run, [done], t + 20), t + 20)
    x = {
        cls: float(at)
        for cls, at in re.findall(
            r'<g class="step (done|current)[^"]*"[^>]*>.*?<rect x="([\d.]+)"', picture
        )
    }
    assert x["current"] > x["done"] + 100


def test_a_page_knows_the_status_it_was_made_for_and_the_live_fragment_the_new_one(
    site: Site,
) -> None:
    """The run page marks the status it was made for (``#status[data-status]``); the
    live fragment carries the run's status now, which the page's script compares to
    load itself anew when it changed: once the run completed, the page offers no
    Signal, Message or Cancel."""
    run_id = f"inbox-{uuid.uuid4().hex[:8]}"

    def inbox(state: Any) -> dict[str, Any]:
        return {"got": ds.receive("orders")}

    with pytest.raises(ds.RunWaiting):
        ds.run(run_id, [ds.Step("inbox", inbox)], site.store)
    page = site.get(f"/run/{run_id}")
    assert 'id="status" data-status="waiting"' in page.body
    assert 'data-action="signal"' in page.body and 'data-action="cancel"' in page.body
    ds.send_message(site.store, run_id, "orders", {"id": 7})
    ds.run(run_id, [ds.Step("inbox", inbox)], site.store)
    live = site.get(f"/run/{run_id}/live")
    assert 'data-status="completed"' in live.body
    again = site.get(f"/run/{run_id}")
    assert 'id="status" data-status="completed"' in again.body
    for action in ("signal", "message", "cancel"):
        assert f'data-action="{action}"' not in again.body
