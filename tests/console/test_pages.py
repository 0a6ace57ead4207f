"""The console's pages and fragments over HTTP, without a browser: what the live
refresh, the folds and the panels answer, on a real server over a real FileStore."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import durable_steps as ds
from durable_steps.console import ConsoleServer, app, sources

from .conftest import Counting, Site


def _approve(state: Any) -> dict[str, Any]:
    return {"decision": ds.wait_for_signal("approval")}


REFUND = ds.Workflow(
    "refund", [ds.Step("draft", lambda s: {"draft": 1}), ds.Step("approve", _approve)]
)


def test_a_run_page_refreshes_only_when_the_run_changed(file_site: Site) -> None:
    """/live answers 204 while the run's etag is the one the page shows, and the new
    facts once a signal changed it."""
    run_id = f"refund-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ds.RunWaiting):
        REFUND.run(run_id, file_site.store)
    etag = file_site.store.load(run_id).etag
    assert file_site.get(f"/run/{run_id}/live?etag={etag}").status == 204
    ds.send_signal(file_site.store, run_id, "approval", True)
    changed = file_site.get(f"/run/{run_id}/live?etag={etag}")
    assert changed.status == 200 and f'data-etag="{etag}"' not in changed.body
    assert 'data-etag="' in changed.body and "attempt 1" in changed.body


def test_a_typed_run_id_is_found_at_once(file_site: Site) -> None:
    """A run id typed whole in the prefix box: the list links to that run (one point
    read), above the runs the prefix filter found."""
    for n in (1, 12):
        file_site.store.save(ds.Checkpoint(f"job-{n}", -1, {}))
    page = file_site.get("/?prefix=job-1")
    assert 'href="/run/job-1">job-1</a> has exactly this id' in page.body
    assert page.body.count('data-run="job-1') == 2
    assert "has exactly this id" not in file_site.get("/?prefix=job-").body


def test_a_fold_that_no_longer_fits_the_value_says_so(file_site: Site) -> None:
    """A path into the state that is not there (the run changed, or a bad link) is a 404
    saying to reload; a root that does not exist too."""
    ds.run("folded", [ds.Step("a", lambda s: {"items": [1, 2]})], file_site.store)
    ok = file_site.get("/run/folded/value?root=state&path=" + quote(json.dumps(["items"])))
    assert ok.status == 200 and 'data-kind="array"' in ok.body
    gone = file_site.get("/run/folded/value?root=state&path=" + quote(json.dumps(["items", 5])))
    assert gone.status == 404 and "the value may have changed" in gone.body
    assert file_site.get("/run/folded/value?root=secrets").status == 404


def _streams(state: Any) -> dict[str, Any]:
    ds.set_event("progress", {"pct": 50})
    ds.write_stream("out", "Hel")
    ds.write_stream("out", {"n": 1})
    return {"x": 1}


def _closes(state: Any) -> dict[str, Any]:
    ds.close_stream("out")
    return {"x": 2}


def test_the_panels_show_history_events_mailbox_and_streams(file_site: Site) -> None:
    """History lists each kept step with a link that loads the state after it (load_at);
    events fold like the state; a stream's entries come after an offset with whether it
    is done; a step that is not kept, and a stream of a run that does not exist, answer
    404 with the library's message."""
    steps = [ds.Step("first", _streams), ds.Step("second", _closes)]
    ds.run("panels", steps, file_site.store)
    page = file_site.get("/run/panels").body
    assert page.count('<tr data-step="') == 2
    assert 'href="/run/panels/value?root=step-0"' in page
    assert 'data-root="events"' in page and 'data-key="progress"' in page
    assert '<span class="length">2</span> entries' in page and ">closed</span>" in page
    assert sources.EMPTY["mailbox"] in page
    after = file_site.get("/run/panels/value?root=step-0")
    assert after.status == 200 and '<code class="inline">1</code>' in after.body
    assert '<code class="inline">2</code>' in file_site.get("/run/panels/value?root=state").body
    gone = file_site.get("/run/panels/value?root=step-7")
    assert gone.status == 404 and "no kept checkpoint after step 7" in gone.body
    got = json.loads(file_site.get("/run/panels/stream/out?after=-1").body)
    assert got == {
        "entries": [{"offset": 0, "chunk": "Hel"}, {"offset": 1, "chunk": {"n": 1}}],
        "length": 2, "closed": True, "done": True,
    }  # fmt: skip
    assert json.loads(file_site.get("/run/panels/stream/out?after=0").body)["entries"] == [
        {"offset": 1, "chunk": {"n": 1}}
    ]
    missing = file_site.get("/run/nobody/stream/out?after=-1")
    assert missing.status == 404 and "does not exist" in json.loads(missing.body)["error"]


def test_a_missing_run_and_a_bad_filter_are_pages_that_say_what_to_do(file_site: Site) -> None:
    missing = file_site.get("/run/no-such-run")
    assert missing.status == 404 and "has no checkpoint in this store" in missing.body
    bad = file_site.get("/?older=7%20days")
    assert bad.status == 400 and "e.g. 30m, 12h, 7d or 2w" in bad.body


def test_the_live_refresh_of_a_sorted_list_rereads_its_rows_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sorted list reads every run once; its live refresh reads the page's runs again
    (a changed status shows) but lists nothing anew, however old the sort is (a sort of
    100,000 runs takes seconds); loading the page again sorts anew."""
    monkeypatch.setattr(app, "RESORT", 0.0)  # every sort is old
    with ds.FileStore(tmp_path / "s") as store:
        for n in range(30):
            store.save(ds.Checkpoint(f"r{n:02d}", -1, {}))
        counting = Counting(store)
        with ConsoleServer(counting, port=0) as server:
            site = Site(server, counting, {}, "file")
            assert 'data-run="r29"' in site.get("/?sort=run_id&dir=desc").body
            assert counting.yielded == 30
            cp = store.load("r29")
            store.save(replace(cp, status="cancelled"))
            live = site.get("/rows?sort=run_id&dir=desc").body
            assert 'data-run="r29" data-status="cancelled"' in live
            assert counting.yielded == 30
            site.get("/?sort=run_id&dir=desc")
            assert counting.yielded == 60
