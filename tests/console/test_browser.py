"""The console in a real browser (Playwright driving Debian's Chromium) against a real
console server over a real store: the FileStore and cosmos-local.

Not here yet: following a live stream -- streams do not exist yet (issue 32); the page
has its panel and its script, and the test comes with them."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

import durable_steps as ds

from .conftest import Site

expect: Any = pytest.importorskip("playwright.sync_api").expect


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


REFUND = ds.Workflow(
    "refund", [ds.Step("draft", lambda s: {"draft": 1}), ds.Step("approve", _approve)]
)
INVOICE = ds.Workflow("invoice", [ds.Step("bill", lambda s: {"billed": True})])


def seed(store: Any, prefix: str, waiting: int = 2, done: int = 3) -> None:
    for n in range(waiting):
        with pytest.raises(ds.RunWaiting):
            REFUND.run(f"{prefix}-refund-{n}", store)
    for n in range(done):
        INVOICE.run(f"{prefix}-invoice-{n}", store)


def rows(page: Any) -> dict[str, str]:
    """The runs on the page: run id -> status."""
    found = page.locator("table.runs tbody tr[data-run]")
    return {r.get_attribute("data-run"): r.get_attribute("data-status") for r in found.all()}


def test_the_list_filters_and_pages(site: Site, page: Any) -> None:
    """The runs list shows each run; filtering by status, workflow and run id prefix shows
    only those runs; a page size below the count pages through them all."""
    prefix = f"t{uuid.uuid4().hex[:6]}"
    seed(site.store, prefix, waiting=2, done=24)
    page.reload()
    expect(page.locator("table.runs tbody tr[data-run]")).to_have_count(26)
    page.select_option("select[name=status]", "waiting")
    page.click("form.filters button")
    expect(page.locator("table.runs tbody tr[data-run]")).to_have_count(2)
    assert set(rows(page).values()) == {"waiting"}
    page.goto(site.url("/"))
    page.fill("input[name=workflow]", "invoice")
    page.fill("input[name=prefix]", f"{prefix}-invoice-1")
    page.click("form.filters button")
    expect(page.locator("table.runs tbody tr[data-run]")).to_have_count(11)  # 1, 10..19
    assert all(r.startswith(f"{prefix}-invoice-1") for r in rows(page))
    page.goto(site.url("/?size=25"))
    first = rows(page)
    assert len(first) == 25
    page.click("a[rel=next]")
    expect(page.locator(".pager")).to_contain_text("page 2")
    second = rows(page)
    assert len(second) == 1 and not set(second) & set(first)


def test_a_run_killed_mid_step_and_resumed_shows_both_attempts(site: Site, page: Any) -> None:
    """A run whose process was SIGKILLed in its third call and resumed by another process:
    its page draws the step's two attempts (the first ended without a record), the four
    recorded calls, and the run waiting for its signal."""
    run_id = f"support-{uuid.uuid4().hex[:8]}"
    site.kill_mid_call(run_id, hang_at=2)
    assert "waiting" in site.resume(run_id)
    page.reload()
    page.click(f"a:text-is('{run_id}')")
    svg = page.locator("svg.timeline")
    expect(svg.locator("[data-attempt]")).to_have_count(2)
    expect(svg.locator(".call")).to_have_count(4)
    first = svg.locator("[data-attempt='1'] title").text_content()
    assert "ended without a record: a crash or a lost lease" in first
    assert "suspended" in svg.locator("[data-attempt='2'] title").text_content()
    one, two = (svg.locator(f"[data-attempt='{n}'] rect").bounding_box() for n in (1, 2))
    assert one["x"] < two["x"]  # attempt 2 after attempt 1 on the time axis
    expect(page.locator("ul.attempts")).to_contain_text("attempt 1: ended without a record")
    expect(page.locator("#status")).to_have_text("waiting")
    page.locator("tr[data-call='2'] a.fold").click()
    expect(page.locator("tr[data-call='2'] .folded")).to_contain_text("llm answer 2")


def test_cancel_from_the_page_is_confirmed_and_lands_in_the_store(site: Site, page: Any) -> None:
    """Cancel asks first, then cancels the run in the store with the reason given, and the
    page says so."""
    run_id = f"refund-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ds.RunWaiting):
        REFUND.run(run_id, site.store)
    page.goto(site.url(f"/run/{run_id}"))
    form = page.locator("form[data-action=cancel]")
    form.locator("input[name=reason]").fill("customer withdrew")
    form.locator("button").click()
    expect(page.locator(".question")).to_contain_text(f"Cancel run {run_id}?")
    assert site.store.load(run_id).status == "waiting"  # nothing happened before the yes
    page.click("#confirm")
    expect(page.locator("p.done")).to_have_text(
        f"cancelled run {run_id}: it starts no other step or call"
    )
    expect(page.locator("#status")).to_have_text("cancelled")
    cp = site.store.load(run_id)
    assert (cp.status, cp.cancel_reason) == ("cancelled", "customer withdrew")


def test_an_action_the_library_refuses_shows_its_message(file_site: Site, file_page: Any) -> None:
    """A signal delivered meanwhile (behind the page's back) and sent again from the
    page: the library's ConflictError message is on the page, and the payload kept is
    the first one."""
    run_id = f"refund-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ds.RunWaiting):
        REFUND.run(run_id, file_site.store)
    file_page.goto(file_site.url(f"/run/{run_id}"))
    ds.send_signal(file_site.store, run_id, "approval", {"by": "ann"})
    form = file_page.locator("form[data-action=signal]")
    form.locator("input[name=name]").fill("approval")
    form.locator("textarea[name=payload]").fill('{"by": "bob"}')
    form.locator("button").click()
    file_page.click("#confirm")
    expect(file_page.locator("p.refused")).to_contain_text("already has signal 'approval'")
    assert file_site.store.load(run_id).signals == {"approval": {"by": "ann"}}


def test_the_list_refreshes_live(file_site: Site, file_page: Any) -> None:
    """A run that changes while the list is open shows its new status without a reload."""
    run_id = f"refund-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ds.RunWaiting):
        REFUND.run(run_id, file_site.store)
    file_page.reload()
    row = file_page.locator(f"tr[data-run='{run_id}']")
    expect(row).to_have_attribute("data-status", "waiting")
    ds.send_signal(file_site.store, run_id, "approval", True)
    REFUND.run(run_id, file_site.store)
    expect(row).to_have_attribute("data-status", "completed", timeout=30_000)


def test_a_large_state_is_loaded_a_key_and_a_page_at_a_time(
    file_site: Site, file_page: Any
) -> None:
    """A 25 MB state: the run's page lists its keys and sizes, not their values, and
    unfolding the large key loads its first items only -- the browser never receives
    the state whole."""
    run_id = f"big-{uuid.uuid4().hex[:8]}"
    chunk = "x" * 2_500
    state = {"messages": [f"{n} {chunk}" for n in range(10_000)], "ticket": 7}
    ds.run(run_id, [ds.Step("load", lambda s: state)], file_site.store)
    received: list[int] = []
    file_page.on("response", lambda r: received.append(int(r.headers.get("content-length", 0))))
    file_page.goto(file_site.url(f"/run/{run_id}"))
    entry = file_page.locator(".state li[data-key=messages]")
    expect(entry).to_contain_text("array of 10000, 23.9 MiB")
    entry.locator("a.fold").click()
    expect(entry.locator(".folded li")).to_have_count(100)
    expect(entry.locator(".folded a.more")).to_have_text("next 100 of 10,000")
    assert sum(received) < 1_000_000, received
    assert re.search(r"\b7\b", file_page.locator(".state li[data-key=ticket]").text_content())
