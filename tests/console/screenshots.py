"""Screenshots of the console for docs/console.md, from real runs: ``scripts/screenshots``.

A FileStore in a temporary directory gets a few runs -- a support agent SIGKILLed in its
third call and resumed by another process (now waiting for its approval), invoices
completed, a refund waiting, a run failed after its retries, one leased by a worker --
then a console serves it and Chromium photographs the runs list and the agent's page.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

import durable_steps as ds
from durable_steps.console import ConsoleServer

from .conftest import CHROMIUM, Site

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "images"


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


def _flaky(state: Any) -> None:
    ds.call("crm", lambda: {"customer": "C-88"})
    raise ConnectionError("crm.example: connection reset by peer")


def seed(site: Site) -> str:
    store = site.store
    for n in range(6):
        ds.Workflow("invoice", [ds.Step("bill", lambda s: {"billed": True})]).run(
            f"invoice-10{n}", store
        )
    refund = ds.Workflow(
        "refund", [ds.Step("draft", lambda s: {"draft": 1}), ds.Step("approve", _approve)]
    )
    with contextlib.suppress(ds.RunWaiting):
        refund.run("refund-A-7", store)
    flaky = [
        ds.Step("fetch", lambda s: {}),
        ds.Step("enrich", _flaky, retry=ds.Retry(3, backoff=0.01)),
    ]
    with contextlib.suppress(ConnectionError):
        ds.Workflow("enrich", flaky).run("enrich-311", store)
    store.save(
        ds.Checkpoint("report-2026-12", 1, {"rows": 1200}, steps=("query", "aggregate"),
                      workflow="report", owner="ds1:worker-2:b:4242:1:x",
                      lease_expires=time.time() + 3600)
    )  # fmt: skip
    run_id = "support-4711"
    site.env["CALL_SECONDS"] = "0.4"
    site.kill_mid_call(run_id, hang_at=2)
    site.resume(run_id)
    return run_id


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ".durable"
        env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)}
        with ds.FileStore(path) as store, ConsoleServer(store, port=0) as server:
            site = Site(server, store, env, "file")
            run_id = seed(site)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1200, "height": 640})
                page.goto(server.url)
                page.wait_for_selector("table.runs tbody tr[data-run]")
                page.screenshot(path=str(OUT / "console-runs.png"))
                page.goto(site.url(f"/run/{run_id}"))
                page.locator("tr[data-call='2'] a.fold").click()
                page.wait_for_selector("tr[data-call='2'] .folded .node")
                page.set_viewport_size({"width": 1200, "height": 1000})
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(OUT / "console-run.png"))
                browser.close()
    print(f"wrote {OUT / 'console-runs.png'} and {OUT / 'console-run.png'}")


if __name__ == "__main__":
    main()
