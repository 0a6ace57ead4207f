"""Bulk actions and the fleet's pages in a real browser (Playwright driving Debian's
Chromium) against a real console over the FileStore and cosmos-local: runs ticked in
the list (one by one, or the page's box), the question with the count, a result per
run; the header's links to the workers, queues and schedules pages."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import durable_steps as ds

from .conftest import Site

expect: Any = pytest.importorskip("playwright.sync_api").expect


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


def test_runs_ticked_in_the_list_are_cancelled_with_a_result_each(site: Site, page: Any) -> None:
    tag = uuid.uuid4().hex[:6]
    flow = ds.Workflow(f"refund-{tag}", [ds.Step("approve", _approve)])
    runs = [f"tick-{tag}-{n}" for n in range(3)]
    for run_id in runs:
        with pytest.raises(ds.RunWaiting):
            flow.run(run_id, site.store)
    page.goto(site.url(f"/?prefix=tick-{tag}"))
    page.check("#select-page")
    expect(page.locator("input[name=run]:checked")).to_have_count(3)
    page.uncheck(f"input[name=run][value='{runs[2]}']")
    page.select_option("#bulk select[name=action]", "cancel")
    page.click("#bulk button")
    expect(page.locator("#question")).to_contain_text("Cancel 2 runs?")
    assert all(site.store.load(r).status == "waiting" for r in runs)  # nothing before the yes
    page.fill("input[name=reason]", "duplicates")
    page.click("#confirm")
    expect(page.locator("#summary")).to_have_text("2 done, 0 refused.")
    expect(page.locator("tr[data-ok=yes]")).to_have_count(2)
    assert [site.store.load(r).cancel_reason for r in runs] == ["duplicates"] * 2 + [None]


def test_the_header_leads_to_the_fleet_pages(site: Site, page: Any) -> None:
    page.goto(site.url("/"))
    for name, heading in (("workers", "Workers"), ("queues", "Queues"), ("schedules", "Schedules")):
        page.click(f"nav.sections a[href='/{name}']")
        expect(page.locator("h1")).to_have_text(heading)
        expect(page.locator(f"table.{name}")).to_be_visible()
