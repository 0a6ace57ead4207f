"""The console is safe by default: a real server, spoken to over HTTP as a browser or an
attacker's page would -- the token, the cookie, other origins and hosts, CSRF, the
read-only mode, the headers; and `durable-steps ui` itself, as a process, on a Cosmos
DB store whose key must appear in no page and no log line."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest

import durable_steps as ds
from durable_steps.console import ConsoleServer

from ..conftest import Cosmos
from ..helpers.clitools import CLEAN, SCRIPT, Cli
from ..helpers.waiting import wait_until
from .conftest import Site


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


REFUND = ds.Workflow(
    "refund", [ds.Step("draft", lambda s: {"draft": 1}), ds.Step("approve", _approve)]
)


def waiting_run(store: Any) -> str:
    run_id = f"refund-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ds.RunWaiting):
        REFUND.run(run_id, store)
    return run_id


def test_every_request_needs_the_token_then_its_cookie(file_site: Site) -> None:
    """Without the cookie every path is 401 (pages, fragments, static files); a wrong
    token too. The printed link sets an HttpOnly, SameSite=Strict cookie and redirects to
    the address without the token; the cookie then opens the pages."""
    for path in ("/", "/rows", "/run/x", "/static/console.js", "/?token=wrong"):
        assert file_site.get(path, signed_in=False).status == 401, path
    token = file_site.server.secrets.token
    signed = file_site.get(f"/?status=waiting&token={token}", signed_in=False)
    assert signed.status == 303
    assert signed.headers["location"] == "/?status=waiting"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and token not in cookie
    name, value = cookie.split(";")[0].split("=", 1)
    opened = file_site.get("/", signed_in=False, Cookie=f"{name}={value}")
    assert opened.status == 200 and "<h1>Runs</h1>" in opened.body
    other = ConsoleServer(file_site.store, port=0)  # another console: another session
    try:
        assert other.secrets.session != value and other.secrets.cookie != name
    finally:
        other.sock.close()


def test_other_origins_and_hosts_are_refused(file_site: Site) -> None:
    """A request from another origin (Origin, else Referer) is refused, as is one naming
    another Host (DNS rebinding) and a POST that names no origin at all."""
    run_id = waiting_run(file_site.store)
    assert file_site.get("/", Origin="http://evil.example").status == 403
    assert file_site.get("/", Referer="http://evil.example/page").status == 403
    assert file_site.get("/", Host="evil.example:8233").status == 403
    port = file_site.server.port
    assert file_site.get("/", Host=f"localhost:{port}").status == 200
    form = urlencode({"csrf": file_site.server.secrets.csrf, "reason": "", "confirmed": "yes"})
    path = f"/run/{run_id}/act/cancel"
    for headers in ({"Origin": "http://evil.example"}, {}):
        answer = file_site.request("POST", path, body=form, headers=headers)
        assert answer.status == 403, headers
    assert file_site.store.load(run_id).status == "waiting"


def test_an_action_needs_the_csrf_token_and_a_yes(file_site: Site) -> None:
    """A POST without the page's CSRF token changes nothing; with it, the first POST
    asks; only the confirmed one cancels."""
    run_id = waiting_run(file_site.store)
    own = {"Origin": file_site.server.origin}
    path = f"/run/{run_id}/act/cancel"
    forged = file_site.request("POST", path, body="confirmed=yes&reason=x", headers=own)
    assert forged.status == 403 and "CSRF" in forged.body
    csrf = file_site.server.secrets.csrf
    asked = file_site.request("POST", path, body=urlencode({"csrf": csrf}), headers=own)
    assert asked.status == 200 and f"Cancel run {run_id}?" in asked.body
    assert file_site.store.load(run_id).status == "waiting"
    body = urlencode({"csrf": csrf, "confirmed": "yes", "reason": "by test"})
    done = file_site.request("POST", path, body=body, headers=own)
    assert done.status == 303 and done.headers["location"].startswith(f"/run/{run_id}?done=")
    assert file_site.store.load(run_id).cancel_reason == "by test"
    shown = file_site.get(done.headers["location"])
    assert f"cancelled run {run_id}: it starts no other step or call" in shown.body


def test_read_only_hides_and_refuses_every_action(tmp_path: Path) -> None:
    """--read-only: the run's page has no action form, and a well-formed POST is 403 with
    nothing changed."""
    with ds.FileStore(tmp_path / "s") as store:
        run_id = waiting_run(store)
        with ConsoleServer(store, port=0, read_only=True) as server:
            site = Site(server, store, {}, "file")
            page = site.get(f"/run/{run_id}")
            assert page.status == 200 and "read-only" in page.body
            assert '<form method="post"' not in page.body
            body = urlencode({"csrf": server.secrets.csrf, "confirmed": "yes"})
            refused = site.request(
                "POST", f"/run/{run_id}/act/cancel", body=body, headers={"Origin": server.origin}
            )
            assert refused.status == 403 and "read-only" in refused.body
        assert store.load(run_id).status == "waiting"


def test_every_answer_carries_the_protective_headers(file_site: Site) -> None:
    """CSP (scripts only from the console), no framing, no sniffing, no caching, no
    referrer to other sites -- on pages and on refusals alike."""
    for answer in (file_site.get("/"), file_site.get("/", signed_in=False)):
        h = answer.headers
        assert "script-src 'self'" in h["content-security-policy"]
        assert "frame-ancestors 'none'" in h["content-security-policy"]
        assert (h["x-frame-options"], h["x-content-type-options"]) == ("DENY", "nosniff")
        assert (h["cache-control"], h["referrer-policy"]) == ("no-store", "same-origin")


def test_names_and_values_from_a_run_are_text_never_markup(file_site: Site) -> None:
    """A run id, a step name, an error message and a state value that hold HTML are shown
    escaped, in the page and in the timeline's SVG."""
    evil = "<script>alert(1)</script>"
    run_id = f"x{uuid.uuid4().hex[:6]}<b>"

    def fail(state: Any) -> None:
        raise RuntimeError(evil)

    with pytest.raises(RuntimeError):
        ds.run(run_id, [ds.Step(evil, lambda s: {"v": evil}), ds.Step("b", fail)], file_site.store)
    page = file_site.get(f"/run/{quote(run_id, safe='')}")
    assert page.status == 200
    assert "<script>alert" not in page.body and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.body
    listed = file_site.get("/")
    assert "<b>" not in listed.body.split("<tbody>")[1]


def test_the_ui_command_shows_no_cosmos_key_in_any_page_or_log(
    cosmos_local: Cosmos, tmp_path: Path
) -> None:
    """`durable-steps ui` on Cosmos DB with a (fake) key in COSMOS_KEY: the link is
    printed, and neither the key nor the token appears in any page, fragment, refusal or
    log line -- while it serves a run's every page, a fold, a question, a refusal."""
    cosmos = cosmos_local.fresh()
    key = "c2VjcmV0LWtleS1vZi10ZXN0" + uuid.uuid4().hex + "=="  # the local server takes any
    env = {**CLEAN, **cosmos.env(), "COSMOS_KEY": key}
    log = tmp_path / "log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [SCRIPT, "-v", "ui", "--port", "0"], env=env, stdout=subprocess.PIPE, stderr=stderr,
            text=True,
        )  # fmt: skip
    try:
        with cosmos.store() as store:
            run_id = waiting_run(store)
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            parts = urlsplit(url)
            assert parts.hostname == "127.0.0.1" and parts.query.startswith("token=")
            server = _Remote(parts.netloc, parts.query.removeprefix("token="))
            site = Site(server, store, env, "cosmos-local")  # type: ignore[arg-type]
            signed = site.get(f"/?{parts.query}", signed_in=False)
            cookie = signed.headers["set-cookie"].split(";")[0]
            pages = [signed.body]
            for path in (
                "/", "/rows", f"/run/{run_id}", f"/run/{run_id}/live",
                f"/run/{run_id}/value?root=state&path=" + quote(json.dumps([])),
                "/run/nothing-here", "/?status=bogus",
            ):  # fmt: skip
                pages.append(site.get(path, signed_in=False, Cookie=cookie).body)
            own = {"Origin": f"http://{parts.netloc}", "Cookie": cookie}
            body = urlencode({"csrf": "wrong", "name": "approval"})
            pages.append(site.request("POST", f"/run/{run_id}/act/signal", body=body,
                                      signed_in=False, headers=own).body)  # fmt: skip
            pages.append(site.get("/", signed_in=False).body)
            assert f">{run_id}<" in pages[2]
        proc.terminate()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        assert proc.stdout is not None
        proc.stdout.close()
        cosmos.drop()
    said = log.read_text()
    assert re.search(rf"GET /run/{run_id} 200", said)  # the log is there, and shows requests
    token = parts.query.removeprefix("token=")
    for text in [*pages, said]:
        assert key not in text and key[:24] not in text
    assert token not in said


class _Remote:
    """What a Site needs of a console that runs in another process."""

    def __init__(self, netloc: str, token: str) -> None:
        self.origin = f"http://{netloc}"
        self.secrets = type("S", (), {"cookie": "-", "session": "-", "token": token})()


def test_ui_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    """Without Starlette (the [ui] extra), `durable-steps ui` is one line with the pip
    command, exit 1 -- as Cosmos DB without its extra is."""
    ds.FileStore(tmp_path / "s").close()
    blocked = (
        "import sys; sys.modules['starlette'] = None; "
        "from durable_steps.cli.main import main; main()"
    )
    cli = Cli(
        {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path / "s")},
        argv=[str(Path(SCRIPT).with_name("python")), "-c", blocked],
    )
    done = cli("ui", "--port", "0")
    assert done.returncode == 1
    assert "pip install 'durable-steps[ui]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_port_in_use_is_one_line(file_site: Site, tmp_path: Path) -> None:
    """`durable-steps ui --port P` with P taken: one line that says so and what to do."""
    cli = Cli(file_site.env)
    done = cli("ui", "--port", str(file_site.server.port))
    assert done.returncode == 1
    assert f"port {file_site.server.port} is in use; pass another with --port" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    wait_until(lambda: file_site.get("/").status == 200, "the first console still answers")
