"""The fleet's pages over HTTP, on real stores (a FileStore, a container on
cosmos-local): a worker at work in this process and one SIGKILLed in a child process,
a queue at its limit with runs waiting, a schedule whose ticks were missed; the lease
owners readable in the console and in `runs show`; bulk actions from the runs list,
asked with the count and answered per run."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli
from ..helpers.waiting import wait_until
from .conftest import Site

HOST = socket.gethostname().replace(":", "_")


def _blocking(name: str, gate: threading.Event, queue: ds.Queue | None = None) -> ds.Workflow:
    def work(state: Any) -> dict[str, Any]:
        gate.wait(120)
        return {"worked": True}

    return ds.Workflow(name, [ds.Step("work", work)], queue=queue)


def _json(site: Site, path: str) -> Any:
    got = site.get(path)
    assert got.status == 200, got.body
    return json.loads(got.body)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # whatever the test did, no thread stays blocked


def _in_thread(fn: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_workers_live_idle_and_dead_with_readable_owners(site: Site, gate: threading.Event) -> None:
    """A run held by this process (live), a child SIGKILLed mid-call (dead, its lease a
    dead lease); both named host and pid in the workers page, the runs list and
    `runs show` -- never the raw owner id."""
    tag = uuid.uuid4().hex[:6]
    work = _blocking(f"hold-{tag}", gate)
    held = f"held-{tag}"
    thread = _in_thread(lambda: work.run(held, site.store))
    wait_until(lambda: getattr(site.store.run_info(held), "owner", None), "the run is leased")
    killed = f"killed-{tag}"
    site.kill_mid_call(killed, hang_at=1)
    me = f"{HOST} pid {os.getpid()}"

    workers = _json(site, "/api/workers")["workers"]
    mine = next(w for w in workers if w["pid"] == os.getpid())
    assert mine["alive"] and held in mine["runs"] and mine["name"] == me
    assert mine["workflows"] == [f"hold-{tag}"] and mine["last_heartbeat"] is not None
    dead = next(w for w in workers if killed in w["dead_leases"])
    assert not dead["alive"] and dead["pid"] != os.getpid() and dead["host"] == HOST

    page = site.get("/workers")
    assert page.status == 200 and me in page.body and 'data-alive="no"' in page.body
    assert f'class="dead-lease" href="/run/{killed}"' in page.body and "ds1:" not in page.body
    listed = site.get(f"/?workflow=hold-{tag}")
    assert f"leased by {me} until" in listed.body and "ds1:" not in listed.body
    run_page = site.get(f"/run/{held}")
    assert f">{me}</span> until" in run_page.body
    shown = Cli(site.env)("runs", "show", held, "--no-state")
    assert shown.returncode == 0, shown.stderr
    assert f"held by {me} until" in shown.stdout and "ds1:" not in shown.stdout

    gate.set()
    thread.join(60)
    if site.backend == "file":  # the registry of processes lists this process, idle now
        idle = wait_until(
            lambda: next(
                (w for w in _json(site, "/api/workers")["workers"]
                 if w["pid"] == os.getpid() and not w["runs"]), None,
            ),
            "the snapshot after the run completed",
        )  # fmt: skip
        assert idle["alive"] and idle["registered"]
    else:  # no registry: a worker that holds no lease leaves no trace
        wait_until(
            lambda: all(w["pid"] != os.getpid() for w in _json(site, "/api/workers")["workers"]),
            "the snapshot after the run completed",
        )


def test_a_queue_at_its_limit_shows_running_waiting_and_limits(
    site: Site, gate: threading.Event
) -> None:
    tag = uuid.uuid4().hex[:6]
    queue = ds.Queue(f"q-{tag}", concurrency=1, rate=(10, 60.0))
    work = _blocking(f"queued-{tag}", gate, queue)
    for n in range(3):
        assert work.start(f"queued-{tag}-{n}", site.store)
    thread = _in_thread(lambda: ds.recover(site.store, [work]))

    def row() -> Any:
        rows = _json(site, "/api/queues")["queues"]
        found = [q for q in rows if q["name"] == queue.name]
        return found[0] if found and found[0]["running"] == 1 else None

    q = wait_until(row, "one run of the queue is running", timeout=60)
    assert (q["depth"], q["concurrency"], q["rate"], q["partition"]) == (2, 1, [10, 60.0], None)
    assert q["limits_known"] and q["recent_starts"] == 1 and q["oldest_waiting"] is not None
    page = site.get("/queues")
    assert page.status == 200 and f'data-queue="{queue.name}"' in page.body
    assert "1 of 10 per 60.0 s" in page.body
    gate.set()
    thread.join(60)


def test_a_schedule_shows_its_next_tick_last_run_and_missed_ticks(site: Site) -> None:
    tag = uuid.uuid4().hex[:6]
    work = ds.Workflow(f"nightly-{tag}", [ds.Step("a", lambda s: {"ok": 1})])
    schedule = ds.Schedule(work, cron="* * * * *", start_at=time.time() - 3600)
    then = time.time() - 600  # a worker last looked ten minutes ago
    assert schedule.start_due(site.store, now=then)
    got = _json(site, "/api/schedules")["schedules"]
    s = next(s for s in got if s["name"] == schedule.name)
    assert s["cron"] == "* * * * *" and then - 60 < s["last_tick"] <= then
    assert s["last_run"] == schedule.run_id(s["last_tick"]) and s["last_status"] == "running"
    assert 8 <= s["missed"] <= 10 and s["next_tick"] > time.time() - 1
    page = site.get("/schedules")
    assert page.status == 200 and f'data-schedule="{schedule.name}"' in page.body
    assert f'href="/run/{quote(s["last_run"], safe="")}"' in page.body


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


def test_bulk_actions_from_the_runs_list_ask_with_the_count_then_answer_per_run(
    site: Site,
) -> None:
    tag = uuid.uuid4().hex[:6]
    flow = ds.Workflow(f"refund-{tag}", [ds.Step("approve", _approve)])
    waiting = []
    for n in range(3):
        with pytest.raises(ds.RunWaiting):
            flow.run(f"bulk-{tag}-{n}", site.store)
        waiting.append(f"bulk-{tag}-{n}")
    done = f"bulk-{tag}-done"
    ds.run(done, [ds.Step("a", lambda s: {"v": 1})], site.store)
    listed = site.get(f"/?prefix=bulk-{tag}")
    assert 'id="bulk"' in listed.body and listed.body.count('name="run" value="bulk-') == 4
    own = {"Origin": site.server.origin}
    gone = f"bulk-{tag}-gone"  # deleted since the list was shown
    chosen = [*waiting, gone]
    form = [("csrf", site.server.secrets.csrf), ("action", "signal")] + [("run", r) for r in chosen]
    asked = site.request("POST", "/bulk", body=urlencode(form), headers=own)
    assert asked.status == 200 and "to 4 runs?" in asked.body
    assert all(site.store.load(r).status == "waiting" for r in waiting)  # nothing yet
    missing = site.request("POST", "/bulk", body=urlencode([*form, ("confirmed", "yes")]),
                           headers=own)  # fmt: skip
    assert missing.status == 400 and "signal: required" in missing.body
    confirmed = [*form, ("confirmed", "yes"), ("name", "approval"), ("payload", '"yes"')]
    answered = site.request("POST", "/bulk", body=urlencode(confirmed), headers=own)
    assert answered.status == 200 and "3 done, 1 refused." in answered.body
    for r in waiting:
        assert f'data-run="{r}" data-ok="yes"' in answered.body
        assert site.store.load(r).signals == {"approval": "yes"}
    assert f'data-run="{gone}" data-ok="no"' in answered.body
    cancel = [("csrf", site.server.secrets.csrf), ("action", "cancel"), ("run", waiting[0])]
    asked = site.request("POST", "/bulk", body=urlencode(cancel), headers=own)
    assert "Cancel 1 run?" in asked.body
    wrong = [("csrf", "nope"), *cancel[1:], ("confirmed", "yes")]
    assert site.request("POST", "/bulk", body=urlencode(wrong), headers=own).status == 403
    nothing = [("csrf", site.server.secrets.csrf), ("action", "cancel")]
    refused = site.request("POST", "/bulk", body=urlencode(nothing), headers=own)
    assert refused.status == 400 and "no run is selected" in refused.body
