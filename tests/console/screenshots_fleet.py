"""Screenshots of the console's fleet pages for docs/console.md, from real processes:
``scripts/screenshots`` (after ``tests/console/screenshots.py``).

A FileStore in a temporary directory; three worker processes each holding a run's
lease while its first call runs, a fourth SIGKILLed mid-call (its lease a dead lease);
a queue with room for one run and three started, served by a worker thread. A console
serves it and Chromium photographs the workers and queues pages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

import durable_steps as ds
from durable_steps.console import ConsoleServer

from .conftest import CHILD, CHROMIUM, Site

OUT = Path(__file__).resolve().parents[2] / "docs" / "images"


def _workers(site: Site) -> list[subprocess.Popen[str]]:
    """Three live workers (each hangs in its run's first call) and one SIGKILLed."""
    live = []
    for n in range(3):
        proc = subprocess.Popen(
            [sys.executable, CHILD, f"support-{4712 + n}"],
            env={**os.environ, **site.env, "HANG_AT": "0"},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        live.append(proc)
    site.kill_mid_call("support-4711", hang_at=1)
    return live


def _queue(store: ds.Store, gate: threading.Event) -> threading.Thread:
    """A queue at its limit: one run running, two waiting."""

    def work(state: Any) -> dict[str, Any]:
        gate.wait(120)
        return {"sent": True}

    queue = ds.Queue("emails", concurrency=1, rate=(10, 60.0))
    flow = ds.Workflow("send-email", [ds.Step("send", work)], queue=queue)
    for n in range(3):
        flow.start(f"email-{n}", store)
    worker = threading.Thread(target=lambda: ds.recover(store, [flow]), daemon=True)
    worker.start()
    return worker


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    gate = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ".durable"
        env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)}
        with ds.FileStore(path) as store, ConsoleServer(store, port=0) as server:
            site = Site(server, store, env, "file")
            live = _workers(site)
            worker = _queue(store, gate)
            try:
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                    page = browser.new_page(viewport={"width": 1200, "height": 420})
                    page.goto(server.url)
                    page.goto(site.url("/workers"))
                    page.wait_for_selector("table.workers tr[data-alive=no]")
                    page.screenshot(path=str(OUT / "console-workers.png"), full_page=True)
                    page.goto(site.url("/queues"))
                    page.wait_for_selector("table.queues tr[data-queue=emails]")
                    page.screenshot(path=str(OUT / "console-queues.png"), full_page=True)
                    browser.close()
            finally:
                gate.set()
                worker.join(60)
                for proc in live:
                    proc.kill()
                    proc.communicate(timeout=60)
    print(f"wrote console-workers.png and console-queues.png in {OUT}")


if __name__ == "__main__":
    main()
