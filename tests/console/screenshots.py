"""Screenshots of the console for docs/console.md, from real runs: ``scripts/screenshots``.

A FileStore in a temporary directory gets a few runs -- a support agent SIGKILLed in its
third call and resumed by another process (now waiting for its approval), invoices
completed, a refund waiting, a run failed after its retries, one leased by a worker --
and a research agent that streamed its answer (one call interrupted and retried), set
events and now waits for the user's next message, which was sent -- then a console
serves it and Chromium photographs the runs list, the support agent's page and the
research agent's panels (history with a step's state unfolded, events, mailbox,
streams), the streams of a run whose process was SIGKILLed mid-answer and resumed by
another (``stream_child``), and a failed run's page with Resume offered.
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

from .conftest import CHROMIUM, STREAM_CHILD, Site

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "images"
SHOTS = (
    "console-runs.png",
    "console-run.png",
    "console-panels.png",
    "console-stream-killed.png",
    "console-failed.png",
)


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


def _flaky(state: Any) -> None:
    ds.call("crm", lambda: {"customer": "C-88"})
    raise ConnectionError("crm.example: connection reset by peer")


def _research(state: Any) -> dict[str, Any]:
    ds.set_event("progress", {"stage": "sources read", "percent": 40})
    ds.write_stream("log", {"read": "KB-112"})
    ds.write_stream("log", {"read": "KB-7"})
    ds.close_stream("log")
    return {"sources": ["KB-112", "KB-7"]}


def _answer(state: Any) -> dict[str, Any]:
    tries: list[int] = []

    def model() -> str:
        tries.append(1)
        for token in ("Your order ", "left the ", "warehouse"):
            ds.write_stream("answer", token)
            if len(tries) == 1 and token == "left the ":
                raise ConnectionError("the model dropped the connection")
        return "Your order left the warehouse"

    text = ds.call("llm", model, retry=ds.Retry(2, backoff=0))
    ds.write_stream("answer", " on Tuesday.")
    ds.close_stream("answer")
    ds.set_event("progress", {"stage": "answered", "percent": 90})
    return {"answer": text}


RESEARCH = ds.Workflow(
    "research",
    [
        ds.Step("research", _research),
        ds.Step("answer", _answer),
        ds.Step("follow-up", lambda s: {"question": ds.receive("user")}),
    ],
)


def seed_research(store: ds.Store) -> str:
    """A run with every panel filled: history, events, a message waiting, two streams."""
    run_id = "research-88"
    with contextlib.suppress(ds.RunWaiting):
        RESEARCH.run(run_id, store, input={"question": "where is my order?"})
    ds.send_message(store, run_id, "user", {"text": "and when will it arrive?"})
    return run_id


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


def _charge(state: Any) -> dict[str, Any]:
    raise ValueError("card declined: insufficient funds")


def seed_more(site: Site) -> tuple[str, str]:
    """A streaming run whose process was SIGKILLed after three tokens and resumed by
    another process (a reset marker in its stream), and a run failed by a ValueError
    (Resume offered)."""
    writer = "writer-5150"
    site.env["TOKEN_SECONDS"] = "0.05"
    site.kill_mid_call(writer, hang_at=3, child=STREAM_CHILD)
    site.resume(writer, child=STREAM_CHILD)
    billing = "billing-2024"
    steps = [ds.Step("price", lambda s: {"amount": 42}), ds.Step("charge", _charge)]
    with contextlib.suppress(ValueError):
        ds.Workflow("billing", steps).run(billing, site.store)
    return writer, billing


def _section(page: Any, selector: str, name: str) -> None:
    """A screenshot of the page's part ``selector``, with a margin."""
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    clip = {"x": 0, "y": max(box["y"] - 8, 0), "width": 1200, "height": box["height"] + 16}
    page.screenshot(path=str(OUT / name), full_page=True, clip=clip)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ".durable"
        env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)}
        with ds.FileStore(path) as store, ConsoleServer(store, port=0) as server:
            site = Site(server, store, env, "file")
            run_id = seed(site)
            research = seed_research(store)
            writer, billing = seed_more(site)
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
                page.goto(site.url(f"/run/{research}"))
                page.locator("table.history tr[data-step='0'] a.fold").click()
                page.wait_for_selector("table.history tr[data-step='0'] .folded .node")
                for name in ("log", "answer"):
                    page.wait_for_selector(f".stream[data-name={name}][data-done]")
                top = page.locator(".panel-history").bounding_box()
                end = page.locator(".panel-streams").bounding_box()
                assert top is not None and end is not None
                clip = {"x": 0, "y": top["y"] - 8, "width": 1200,
                        "height": end["y"] + end["height"] - top["y"] + 16}  # fmt: skip
                page.screenshot(path=str(OUT / "console-panels.png"), full_page=True, clip=clip)
                page.goto(site.url(f"/run/{writer}"))
                page.wait_for_selector(".stream[data-name=answer][data-done]")
                _section(page, ".panel-streams", "console-stream-killed.png")
                page.goto(site.url(f"/run/{billing}"))
                page.wait_for_selector("form[data-action=resume]")
                page.screenshot(path=str(OUT / "console-failed.png"), full_page=True)
                browser.close()
    print(f"wrote the console's screenshots in {OUT}: {', '.join(SHOTS)}")


if __name__ == "__main__":
    main()
