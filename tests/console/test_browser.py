"""The console in a real browser (Playwright driving Debian's Chromium) against a real
console server over a real store: the FileStore and cosmos-local. The list, a crashed
run's timeline, the actions, the live refresh, a large state, a stream followed live,
history, events and a message sent from the page."""

from __future__ import annotations

import re
import threading
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
    step = "[data-step='1']"  # the step killed (step 0's one attempt is drawn too)
    expect(svg.locator(f"{step}[data-attempt]")).to_have_count(2)
    expect(svg.locator(".call")).to_have_count(4)
    first = svg.locator(f"{step}[data-attempt='1'] title").text_content()
    assert "ended without a record: its process crashed or lost its lease" in first
    assert "suspended" in svg.locator(f"{step}[data-attempt='2'] title").text_content()
    one, two = (svg.locator(f"{step}[data-attempt='{n}'] rect").bounding_box() for n in (1, 2))
    assert one["x"] < two["x"]  # attempt 2 after attempt 1 on the time axis
    expect(svg.locator(f"{step}[data-idle='lost']")).to_have_count(1)  # down until resumed
    expect(page.locator(f"ul.attempts li{step}[data-attempt='1']")).to_contain_text(
        "ended without a record"
    )
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


def test_a_stream_is_followed_live_while_the_run_writes_it(site: Site, page: Any) -> None:
    """A run in another thread writes a stream while its page is open: the page shows
    each entry as it lands (polling after the last offset it shows), the reset marker of
    a call interrupted and retried as a line of its own, and stops once it is closed."""
    run_id = f"stream-{uuid.uuid4().hex[:8]}"
    wrote, go, tries, failed = threading.Event(), threading.Event(), [0], []

    def tokens() -> str:
        tries[0] += 1
        ds.write_stream("out", f"try {tries[0]}")
        if tries[0] == 1:
            raise ConnectionError("the model dropped the connection")
        return "ok"

    def speak(state: Any) -> None:
        ds.write_stream("out", "first")
        wrote.set()
        assert go.wait(60)
        for n in range(1, 4):
            ds.write_stream("out", f" chunk {n}")
        ds.call("llm", tokens, retry=ds.Retry(2, backoff=0))
        ds.close_stream("out")

    def run() -> None:
        try:
            ds.run(run_id, [ds.Step("speak", speak)], site.store)
        except BaseException as exc:  # shown by the assertion below
            failed.append(exc)

    writer = threading.Thread(target=run)
    writer.start()
    try:
        assert wrote.wait(60), failed
        page.goto(site.url(f"/run/{run_id}"))
        stream = page.locator(".stream[data-name=out]")
        expect(stream.locator("[data-offset='0']")).to_have_text("first")
        expect(stream.locator(".stream-state")).to_have_text("open: followed live")
    finally:
        go.set()
        writer.join(60)
    assert not failed, failed
    expect(stream.locator("[data-offset='6']")).to_have_text("try 2")
    expect(stream).to_have_attribute("data-done", "closed")
    expect(stream.locator(".stream-state")).to_have_text("closed")
    expect(stream.locator(".length")).to_have_text("7")
    reset = stream.locator("[data-offset='5']")
    expect(reset).to_have_class("reset")
    expect(reset).to_contain_text("entries 4 to 4 were written by an interrupted attempt")
    assert stream.locator(".chunks").text_content().startswith("first chunk 1 chunk 2 chunk 3")


def _draft(state: Any) -> dict[str, Any]:
    ds.set_event("progress", {"stage": "drafted"})
    return {"draft": "v1"}


CHAT = ds.Workflow(
    "chat",
    [
        ds.Step("draft", _draft),
        ds.Step("revise", lambda s: {"draft": "v2"}),
        ds.Step("talk", lambda s: {"reply": ds.receive("chat")}),
    ],
)


def test_history_events_and_a_message_sent_from_the_page(site: Site, page: Any) -> None:
    """A run waiting for a message: its history lists the kept steps and unfolds the
    state after the first one (not today's); its published event shows; a message sent
    from the page, once confirmed, waits in the run's mailbox in the store and shows in
    the mailbox panel. On each store."""
    run_id = f"chat-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ds.RunWaiting):
        CHAT.run(run_id, site.store)
    page.goto(site.url(f"/run/{run_id}"))
    expect(page.locator(".facts")).to_contain_text("waiting for a message on chat")
    history = page.locator("table.history")
    expect(history.locator("tr[data-step]")).to_have_count(2)
    first = history.locator("tr[data-step='0']")
    first.locator("a.fold").click()
    expect(first.locator(".folded li[data-key=draft]")).to_contain_text('"v1"')
    expect(page.locator(".state li[data-key=draft]")).to_contain_text('"v2"')
    expect(page.locator(".panel-events li[data-key=progress]")).to_contain_text('"drafted"')
    form = page.locator("form[data-action=message]")
    form.locator("input[name=topic]").fill("chat")
    form.locator("textarea[name=payload]").fill('{"text": "hello"}')
    form.locator("button").click()
    page.click("#confirm")
    expect(page.locator("p.done")).to_have_text(f"message sent to run {run_id} on topic chat")
    expect(page.locator(".panel-mailbox tr[data-topic=chat]")).to_contain_text('"hello"')
    waiting = ds.pending_messages(site.store, run_id)
    assert [(m.topic, m.payload) for m in waiting] == [("chat", {"text": "hello"})]
