"""The console's JSON API over HTTP, as a script speaks to it: a real server over real
stores (a FileStore, a container on cosmos-local), bearer tokens fixed at start, a
read-only token, the filters and their errors, actions and bulk actions with a result
per run; and ``durable-steps ui --token`` / ``DURABLE_UI_TOKEN`` as a process."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest

import durable_steps as ds
from durable_steps.console import ConsoleServer

from ..helpers.clitools import CLEAN, SCRIPT
from .conftest import Site

TOKEN, READ = "t-" + uuid.uuid4().hex, "r-" + uuid.uuid4().hex


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


def _charge(state: Any) -> None:
    raise ValueError("card declined by the bank")


REFUND = ds.Workflow(
    "refund", [ds.Step("draft", lambda s: {"draft": 1}), ds.Step("approve", _approve)]
)
CHARGE = ds.Workflow("charge", [ds.Step("charge", _charge)])
REPORT = ds.Workflow("report", [ds.Step("write", lambda s: {"done": True})])


@pytest.fixture
def api(site: Site) -> Iterator[Site]:
    """A second console over the site's store, its tokens fixed (as --token gives)."""
    with ConsoleServer(site.store, port=0, token=TOKEN, read_token=READ) as server:
        yield Site(server, site.store, site.env, site.backend)


def call(site: Site, method: str, path: str, body: Any = None, token: str = TOKEN) -> Any:
    """One API request with a bearer token; (status, decoded JSON)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    sent = None if body is None else json.dumps(body)
    got = site.request(method, path, body=sent, signed_in=False, headers=headers)
    assert got.headers["content-type"].startswith("application/json"), got.body
    return got.status, json.loads(got.body)


def _runs(store: Any) -> dict[str, list[str]]:
    tag = uuid.uuid4().hex[:6]
    made: dict[str, list[str]] = {"waiting": [], "failed": [], "completed": []}
    for n in range(3):
        run_id = f"refund-{tag}-{n}"
        with pytest.raises(ds.RunWaiting):
            REFUND.run(run_id, store)
        made["waiting"].append(run_id)
    for n in range(2):
        run_id = f"charge-{tag}-{n}"
        with pytest.raises(ValueError, match="declined"):
            CHARGE.run(run_id, store)
        made["failed"].append(run_id)
    run_id = f"report-{tag}"
    REPORT.run(run_id, store)
    made["completed"].append(run_id)
    return made


def test_the_runs_filter_by_status_workflow_error_and_time(api: Site) -> None:
    made = _runs(api.store)
    status, got = call(api, "GET", "/api/runs?status=failed")
    assert status == 200
    assert sorted(r["run_id"] for r in got["runs"]) == made["failed"]
    assert all(r["status"] == "failed" for r in got["runs"])
    _, got = call(api, "GET", "/api/runs?error=DECLINED")  # any case, type or message
    assert sorted(r["run_id"] for r in got["runs"]) == made["failed"]
    _, got = call(api, "GET", "/api/runs?error=ValueError&workflow=refund")
    assert got["runs"] == []
    _, got = call(api, "GET", "/api/runs?workflow=refund&status=waiting")
    assert sorted(r["run_id"] for r in got["runs"]) == made["waiting"]
    now = time.time()
    _, got = call(api, "GET", f"/api/runs?since={now - 3600:.0f}&until={now + 60:.0f}")
    assert {r["run_id"] for r in got["runs"]} >= {*made["waiting"], *made["completed"]}
    _, got = call(api, "GET", f"/api/runs?until={now - 3600:.0f}")
    assert got["runs"] == []  # the store's updated_before: every run is newer
    _, got = call(api, "GET", "/api/runs?since=2999-01-01")
    assert got["runs"] == []


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("colour=red", "unknown filter 'colour'"),
        ("since=yesterday", "since: 'yesterday' is not a time"),
        ("since=2026-12-06T10:00&until=2026-12-06T09:00", "the time range is empty"),
        ("status=sleeping", "status 'sleeping' is not one of"),
        ("older=7", "'7' is not an age"),
        ("size=7", "size '7'"),
        ("page=x", "page 'x'"),
        ("sort=colour", "cannot sort by 'colour'"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(file_site: Site, query: str, said: str) -> None:
    with ConsoleServer(file_site.store, port=0, token=TOKEN) as server:
        status, got = call(Site(server, file_site.store, {}, "file"), "GET", f"/api/runs?{query}")
    assert status == 400 and said in got["error"], got
    assert got["status"] == 400


def test_a_run_its_history_streams_and_errors(api: Site) -> None:
    made = _runs(api.store)
    run_id = made["failed"][0]
    status, got = call(api, "GET", f"/api/runs/{run_id}")
    assert status == 200 and got["status"] == "failed" and got["workflow"] == "charge"
    assert got["last_error"]["type"] == "ValueError"
    assert "declined" in got["last_error"]["message"]
    assert "resume" in got["actions"]
    _, done = call(api, "GET", f"/api/runs/{made['completed'][0]}")
    assert done["actions"] == ["fork"] and done["last_error"] is None
    status, history = call(api, "GET", f"/api/runs/{made['waiting'][0]}/history")
    assert status == 200 and [h["name"] for h in history] == ["draft"]
    status, streams = call(api, "GET", f"/api/runs/{run_id}/streams")
    assert (status, streams) == (200, [])
    for path in (
        "/api/runs/no-such-run",
        "/api/runs/no-such-run/history",
        "/api/runs/no-such-run/streams",
        "/api/runs/no-such-run/streams/out",
    ):
        status, got = call(api, "GET", path)
        assert status == 404 and "'no-such-run'" in got["error"], (path, got)
    status, got = call(api, "GET", f"/api/runs/{run_id}/streams/answer")
    assert status == 404 and "no stream 'answer'" in got["error"]
    status, got = call(api, "POST", f"/api/runs/{run_id}/explode", {})
    assert status == 404 and "no action 'explode'" in got["error"]


def test_actions_answer_per_call_and_refuse_what_the_library_refuses(api: Site) -> None:
    made = _runs(api.store)
    waiting = made["waiting"][0]
    path = f"/api/runs/{waiting}/signal"
    status, got = call(api, "POST", path, {"name": "approval", "payload": {"ok": True}})
    assert status == 200 and got["ok"] and "delivered" in got["result"]
    assert api.store.load(waiting).signals["approval"] == {"ok": True}
    status, got = call(api, "POST", path, {"name": "approval", "payload": 2})
    assert status == 409 and "approval" in got["error"]
    status, got = call(api, "POST", path, {"name": "approval", "colour": 1})
    assert status == 400 and "no field 'colour'" in got["error"]
    status, got = call(api, "POST", path, {})
    assert status == 400 and "name: required" in got["error"]
    status, got = call(api, "POST", f"/api/runs/{made['failed'][0]}/resume")
    assert status == 200 and api.store.load(made["failed"][0]).status == "running"


def test_bulk_actions_answer_a_result_per_run(api: Site) -> None:
    made = _runs(api.store)
    chosen = [*made["waiting"], made["completed"][0], "no-such-run"]
    status, got = call(api, "POST", "/api/bulk/cancel", {"run_ids": chosen, "reason": "bulk"})
    assert status == 200 and (got["count"], got["done"], got["refused"]) == (5, 3, 2)
    by_run = {r["run_id"]: r for r in got["results"]}
    assert [r["run_id"] for r in got["results"]] == chosen
    assert all(by_run[r]["ok"] for r in made["waiting"])
    assert not by_run[made["completed"][0]]["ok"] and by_run["no-such-run"]["error"]
    for run_id in made["waiting"]:
        cp = api.store.load(run_id)
        assert (cp.status, cp.cancel_reason) == ("cancelled", "bulk")
    assert api.store.load(made["completed"][0]).status == "completed"
    status, got = call(api, "POST", "/api/bulk/resume", {"run_ids": made["waiting"]})
    assert status == 200 and got["done"] == 3
    status, got = call(api, "POST", "/api/bulk/fork", {"run_ids": made["waiting"]})
    assert status == 404 and "no bulk action 'fork'" in got["error"]
    status, got = call(api, "POST", "/api/bulk/cancel", {"run_ids": []})
    assert status == 400 and "no run is selected" in got["error"]
    status, got = call(api, "POST", "/api/bulk/cancel", {"run_ids": "a,b"})
    assert status == 400 and "run_ids" in got["error"]


def test_tokens_bearer_and_read_only(api: Site) -> None:
    """The fixed token reads and acts; the read-only token reads and every POST is a
    403 with nothing changed; a wrong token or none is a 401, as JSON."""
    made = _runs(api.store)
    waiting = made["waiting"][0]
    status, got = call(api, "GET", f"/api/runs/{waiting}", token=READ)
    assert status == 200 and got["actions"] == []
    for path, body in (
        (f"/api/runs/{waiting}/cancel", {}),
        ("/api/bulk/cancel", {"run_ids": [waiting]}),
    ):
        status, got = call(api, "POST", path, body, token=READ)
        assert status == 403 and "read-only" in got["error"]
    assert api.store.load(waiting).status == "waiting"
    status, got = call(api, "GET", "/api/runs", token="wrong")
    assert status == 401 and "bearer token" in got["error"]
    none = api.request("GET", "/api/runs", signed_in=False)
    assert none.status == 401 and "Authorization: Bearer" in json.loads(none.body)["error"]
    # A browser's session may call the API, a POST with the page's CSRF token only.
    session = api.request("POST", f"/api/runs/{waiting}/cancel", body="{}",
                          headers={"Origin": api.server.origin})  # fmt: skip
    assert session.status == 403 and "X-CSRF-Token" in session.body
    ok = api.request(
        "POST", f"/api/runs/{waiting}/cancel", body="{}",
        headers={"Origin": api.server.origin, "X-CSRF-Token": api.server.secrets.csrf},
    )  # fmt: skip
    assert ok.status == 200 and api.store.load(waiting).status == "cancelled"
    # A bearer request still names the console's own host (DNS rebinding).
    status = api.request(
        "GET", "/api/runs", signed_in=False,
        headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example:80"},
    ).status  # fmt: skip
    assert status == 403


def test_the_read_only_token_signs_a_browser_in_read_only(file_site: Site) -> None:
    """The link with the read-only token sets a session that sees no action form."""
    store = file_site.store
    with pytest.raises(ds.RunWaiting):
        REFUND.run("ro-run", store)
    with ConsoleServer(store, port=0, token=TOKEN, read_token=READ) as server:
        site = Site(server, store, {}, "file")
        signed = site.request("GET", f"/?token={READ}", signed_in=False)
        assert signed.status == 303
        cookie = signed.headers["set-cookie"].split(";")[0]
        page = site.get("/run/ro-run", signed_in=False, Cookie=cookie)
        assert page.status == 200 and "read-only" in page.body
        assert '<form method="post"' not in page.body and 'id="bulk"' not in page.body
        body = urlencode({"csrf": server.secrets.csrf, "confirmed": "yes"})
        refused = site.request("POST", "/run/ro-run/act/cancel", body=body, signed_in=False,
                               headers={"Origin": server.origin, "Cookie": cookie})  # fmt: skip
        assert refused.status == 403
        full = site.get("/", signed_in=True)
        assert 'id="bulk"' in full.body
    assert store.load("ro-run").status == "waiting"
    with pytest.raises(ds.ConfigurationError, match="must differ"):
        ConsoleServer(store, port=0, token=TOKEN, read_token=TOKEN)


def test_the_ui_command_takes_its_tokens_from_options_and_the_environment(
    tmp_path: Path,
) -> None:
    """`durable-steps ui` with DURABLE_UI_TOKEN and --read-only-token: the link carries
    the fixed token; a script reads with either and acts with the first only."""
    path = tmp_path / "s"
    with ds.FileStore(path) as store, pytest.raises(ds.RunWaiting):
        REFUND.run("cli-run", store)
    env = {**CLEAN, "DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)}
    env["DURABLE_UI_TOKEN"] = TOKEN
    proc = subprocess.Popen(
        [SCRIPT, "ui", "--port", "0", "--read-only-token", READ],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        parts = urlsplit(url)
        assert parts.query == f"token={TOKEN}"
        remote = _Remote(parts.netloc)
        site = Site(remote, None, env, "file")  # type: ignore[arg-type]
        status, got = call(site, "GET", "/api/runs/cli-run", token=READ)
        assert status == 200 and got["status"] == "waiting"
        status, _ = call(site, "POST", "/api/runs/cli-run/cancel", {}, token=READ)
        assert status == 403
        status, got = call(site, "POST", "/api/runs/cli-run/cancel", {"reason": "cli"})
        assert status == 200 and got["ok"]
    finally:
        proc.terminate()
        proc.wait(30)
        assert proc.stdout is not None
        proc.stdout.close()
    with ds.FileStore(path) as store:
        assert store.load("cli-run").status == "cancelled"


class _Remote:
    """What a Site needs of a console that runs in another process."""

    def __init__(self, netloc: str) -> None:
        self.origin = f"http://{netloc}"


def test_a_run_id_with_odd_characters_is_found_through_its_quoted_path(file_site: Site) -> None:
    with ConsoleServer(file_site.store, port=0, token=TOKEN) as server:
        site = Site(server, file_site.store, {}, "file")
        odd = "a run: é+1%"
        ds.run(odd, [ds.Step("a", lambda s: {"v": 1})], file_site.store)
        status, got = call(site, "GET", "/api/runs/" + quote(odd, safe=""))
        assert status == 200 and got["run_id"] == odd
        status, got = call(site, "GET", "/api/runs/" + quote("a#b", safe=""))
        assert status == 400 and "invalid run id 'a#b'" in got["error"]
