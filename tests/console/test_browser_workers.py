"""The fleet's pages in a real browser (Playwright driving Debian's Chromium, one per
module) on the FileStore and cosmos-local: three live worker processes and one
SIGKILLed, another killed while the page is open; a queue at its limit with runs
waiting. Every wait is Playwright's: for a condition on the page, with a bound."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import durable_steps as ds

from .conftest import CHILD, Site

expect: Any = pytest.importorskip("playwright.sync_api").expect

HOST = socket.gethostname().replace(":", "_")


@pytest.fixture
def live(site: Site) -> Iterator[list[tuple[str, subprocess.Popen[str]]]]:
    """Three worker processes, each holding a run's lease while its first call hangs."""
    started: list[tuple[str, subprocess.Popen[str]]] = []
    try:
        for n in range(3):
            run_id = f"live-{uuid.uuid4().hex[:6]}-{n}"
            proc = subprocess.Popen(
                [sys.executable, CHILD, run_id],
                env={**os.environ, **site.env, "HANG_AT": "0"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            started.append((run_id, proc))
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"  # its call runs: the lease is held
        yield started
    finally:
        for _, proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=60)


def _row(page: Any, pid: int) -> Any:
    return page.locator(f"table.workers tr[data-worker='{HOST} pid {pid}']")


def test_three_live_workers_and_a_killed_one(
    site: Site, page: Any, live: list[tuple[str, subprocess.Popen[str]]]
) -> None:
    """The workers page lists each live worker process by host and pid with the run it
    holds, and a SIGKILLed one as dead with its dead lease linked to the run's page; a
    worker killed while the page is open turns dead without a reload."""
    killed = f"killed-{uuid.uuid4().hex[:6]}"
    site.kill_mid_call(killed, hang_at=1)
    page.goto(site.url("/workers"))
    for run_id, proc in live:
        row = _row(page, proc.pid)
        expect(row).to_have_attribute("data-alive", "yes")
        expect(row).to_contain_text(run_id)
    dead = page.locator(f"table.workers tr[data-alive=no]:has(a.dead-lease[href='/run/{killed}'])")
    expect(dead).to_have_count(1)
    assert "ds1:" not in page.locator("table.workers").text_content()
    run_id, proc = live[0]
    proc.kill()
    proc.communicate(timeout=60)
    expect(_row(page, proc.pid)).to_have_attribute("data-alive", "no", timeout=60_000)
    dead.locator("a.dead-lease").click()
    expect(page.locator("#status")).to_have_text("running")
    expect(page).to_have_url(site.url(f"/run/{killed}"))


def test_a_queue_at_its_limit(site: Site, page: Any) -> None:
    """A queue with room for one run and three started: its row shows one running, two
    waiting, the limit and the rate; its link lists the queue's runs."""
    tag = uuid.uuid4().hex[:6]
    gate = threading.Event()

    def work(state: Any) -> dict[str, Any]:
        gate.wait(120)
        return {"worked": True}

    queue = ds.Queue(f"q-{tag}", concurrency=1, rate=(10, 60.0))
    flow = ds.Workflow(f"queued-{tag}", [ds.Step("work", work)], queue=queue)
    for n in range(3):
        assert flow.start(f"queued-{tag}-{n}", site.store)
    worker = threading.Thread(target=lambda: ds.recover(site.store, [flow]), daemon=True)
    worker.start()
    try:
        page.goto(site.url("/queues"))
        row = page.locator(f"table.queues tr[data-queue='{queue.name}']")
        expect(row.locator("td:nth-child(3)")).to_have_text("1", timeout=60_000)  # running
        expect(row.locator("td:nth-child(4)")).to_have_text("2")  # waiting
        expect(row.locator("td:nth-child(5)")).to_have_text("1")  # the limit
        expect(row.locator("td:nth-child(6)")).to_have_text("1 of 10 per 60.0 s")
        row.locator(f"a:text-is('{queue.name}')").click()
        expect(page.locator("table.runs tbody tr[data-run]")).to_have_count(3)
    finally:
        gate.set()
        worker.join(60)
