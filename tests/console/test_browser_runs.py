"""The console in a real browser (Playwright driving Debian's Chromium, one per module)
over real runs on the FileStore and cosmos-local: a streaming run whose process was
SIGKILLed mid-answer, followed live while another process resumes it; a run that
failed, resumed from the page and completed; a run forked from the page. Every wait
is Playwright's: for a condition on the page, with a bound."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import durable_steps as ds

from .conftest import STREAM_CHILD, Site

expect: Any = pytest.importorskip("playwright.sync_api").expect


def test_a_killed_streaming_run_is_followed_live_as_another_process_resumes_it(
    site: Site, page: Any
) -> None:
    """A process streaming the model's answer is SIGKILLed after three tokens: the page
    shows the run still running (its lease held by a process that is gone) and the
    three tokens on an open stream. Another process resumes it while the page is open:
    the page shows, without a reload, the reset marker for the killed call's tokens,
    the whole answer after it and the stream closed; reloaded, the run is completed."""
    run_id = f"writer-{uuid.uuid4().hex[:8]}"
    site.kill_mid_call(run_id, hang_at=3, child=STREAM_CHILD)
    page.goto(site.url(f"/run/{run_id}"))
    expect(page.locator("#status")).to_have_text("running")
    stream = page.locator(".stream[data-name=answer]")
    expect(stream.locator("[data-offset='2']")).to_have_text("left ")
    expect(stream.locator(".stream-state")).to_have_text("open: followed live")
    expect(page.locator(".stream[data-name=log]")).to_have_attribute("data-done", "closed")
    assert "completed" in site.resume(run_id, child=STREAM_CHILD)
    reset = stream.locator("[data-offset='3']")
    expect(reset).to_have_class("reset")
    expect(reset).to_contain_text("entries 0 to 2 were written by an interrupted attempt")
    expect(stream).to_have_attribute("data-done", "closed")
    expect(stream.locator("[data-offset='10']")).to_have_text("Tuesday.")
    expect(stream.locator(".length")).to_have_text("11")
    page.reload()
    expect(page.locator("#status")).to_have_text("completed")
    assert site.store.load(run_id).state["answer"] == "Your order left the warehouse on Tuesday."


FAILING = {"on": True}


def _charge(state: Any) -> dict[str, Any]:
    if FAILING["on"]:
        raise ValueError("card declined: insufficient funds")
    return {"charged": True}


BILLING = ds.Workflow(
    "billing", [ds.Step("price", lambda s: {"amount": 42}), ds.Step("charge", _charge)]
)


def test_a_failed_run_resumed_from_the_page_runs_again_and_completes(site: Site, page: Any) -> None:
    """A run failed by a ValueError: its page says failed with the error and offers
    Resume; confirmed, the run is running again in the store; run again (the cause
    fixed), it completes, and its page shows it completed with both steps kept."""
    run_id = f"billing-{uuid.uuid4().hex[:8]}"
    FAILING["on"] = True
    with pytest.raises(ValueError, match="card declined"):
        BILLING.run(run_id, site.store)
    page.goto(site.url(f"/run/{run_id}"))
    expect(page.locator("#status")).to_have_text("failed")
    expect(page.locator("main")).to_contain_text("card declined: insufficient funds")
    page.locator("form[data-action=resume] button").click()
    expect(page.locator(".question")).to_contain_text(f"run {run_id} running again")
    assert site.store.load(run_id).status == "failed"  # nothing happened before the yes
    page.click("#confirm")
    expect(page.locator("p.done")).to_contain_text(f"run {run_id} is running again")
    assert site.store.load(run_id).status == "running"
    FAILING["on"] = False
    assert BILLING.run(run_id, site.store) == {"amount": 42, "charged": True}
    page.goto(site.url(f"/run/{run_id}"))
    expect(page.locator("#status")).to_have_text("completed")
    expect(page.locator("form[data-action=resume]")).to_have_count(0)
    expect(page.locator("table.history tr[data-step]")).to_have_count(2)


def test_a_run_forked_from_the_page_starts_from_the_kept_state(site: Site, page: Any) -> None:
    """Fork, confirmed, makes a new run from the state after the given step with the
    update merged in; the new run's page shows it, and running it completes from there."""
    run_id = f"billing-{uuid.uuid4().hex[:8]}"
    FAILING["on"] = False
    BILLING.run(run_id, site.store)
    page.goto(site.url(f"/run/{run_id}"))
    form = page.locator("form[data-action=fork]")
    form.locator("input[name=new_run_id]").fill(f"{run_id}-again")
    form.locator("input[name=at_step]").fill("0")
    form.locator("textarea[name=update]").fill('{"amount": 7}')
    form.locator("button").click()
    expect(page.locator(".question")).to_contain_text(f"Start run {run_id}-again")
    assert site.store.load(f"{run_id}-again") is None  # nothing happened before the yes
    page.click("#confirm")
    expect(page.locator("p.done")).to_contain_text(f"as run {run_id}-again")
    page.goto(site.url(f"/run/{run_id}-again"))
    expect(page.locator(".state li[data-key=amount]")).to_contain_text("7")
    assert BILLING.run(f"{run_id}-again", site.store) == {"amount": 7, "charged": True}
