"""A run's page left open follows its run (Chromium driven by Playwright, on FileStore
and cosmos-local): when the run's status changes, the page loads itself anew, so a
completed run offers no Signal, Message or Cancel and its state and history are those
of the run as it is now."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import durable_steps as ds

from .conftest import Site


def inbox(state: Any) -> dict[str, Any]:
    return {"got": ds.receive("orders")}


def test_an_open_page_follows_its_run_to_completion(site: Site, page: Any) -> None:
    from playwright.sync_api import expect

    run_id = f"inbox-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ds.RunWaiting):
        ds.run(run_id, [ds.Step("inbox", inbox)], site.store)
    page.goto(site.url(f"/run/{run_id}"))
    expect(page.locator("#status")).to_have_text("waiting")
    expect(page.locator("form[data-action='signal']")).to_have_count(1)
    expect(page.locator("section.panel-history tr[data-step]")).to_have_count(0)
    ds.send_message(site.store, run_id, "orders", {"id": 7})
    ds.run(run_id, [ds.Step("inbox", inbox)], site.store)
    # no reload by the test: the page's live refresh sees the new status and reloads
    expect(page.locator("#status")).to_have_attribute("data-status", "completed")
    for action in ("signal", "message", "cancel"):
        expect(page.locator(f"form[data-action='{action}']")).to_have_count(0)
    expect(page.locator("section.panel-history tr[data-step='0']")).to_have_count(1)
    expect(page.locator("section.state")).to_contain_text("got")
