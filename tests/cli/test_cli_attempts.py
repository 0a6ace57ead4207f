"""`runs list` and `runs show` say where a run stands in plain words: a run waiting
for a message waits for that message (not "-", not "its signal"); a failed step's
attempts are listed as the engine recorded them, with the attempt that runs next (not
the one that failed) -- a real process on the file store and cosmos-local."""

from __future__ import annotations

from typing import Any

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli


def inbox(state: Any) -> dict[str, Any]:
    return {"got": ds.receive("orders")}


def broken(state: Any) -> dict[str, Any]:
    ds.call("lookup", lambda: {"rows": 3})
    raise ValueError("the order id is not a number")


def test_a_run_waiting_for_a_message_says_so_in_list_and_show(cli: Cli, run_id: str) -> None:
    with cli.store() as store, pytest.raises(ds.RunWaiting):
        ds.run(run_id, [ds.Step("inbox", inbox)], store)
    listed = cli("runs", "list")
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if run_id in line]
    assert "message on orders" in row
    (info,) = [i for i in cli.json("runs", "list") if i["run_id"] == run_id]
    assert (info["waiting_for"], info["receiving"]) == ("message:orders", "orders")
    shown = cli("runs", "show", run_id, "--no-state")
    assert shown.returncode == 0, shown.stderr
    assert "waiting for a message on orders" in shown.stdout
    assert "until a message comes" in shown.stdout and "its signal" not in shown.stdout
    assert "next: step 0, attempt 2" in shown.stdout and "retries" not in shown.stdout
    assert "suspended to wait" in shown.stdout  # attempt 1, as recorded


def test_a_failed_run_lists_its_attempts_and_the_next_one(cli: Cli, run_id: str) -> None:
    retry = ds.Retry(attempts=2, backoff=0.0)
    with cli.store() as store, pytest.raises(ValueError, match="not a number"):
        ds.run(run_id, [ds.Step("broken", broken, retry=retry)], store)
    shown = cli("runs", "show", run_id, "--no-state")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "attempts of step 0" in out
    assert out.count("failed: ValueError: the order id is not a number") == 2
    assert "next: step 0, attempt 3" in out and "this round of retries" not in out
    data = cli.json("runs", "show", run_id, "--no-state")
    assert [row[4] for row in data["attempt_log"]] == ["failed", "failed"]
