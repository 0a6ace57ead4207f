"""`durable-steps runs send`: a message into a run's mailbox from a shell -- a real
process against the file store and cosmos-local."""

from __future__ import annotations

import pytest

import durable_steps as ds
from durable_steps.seam import mailbox

from ..helpers.clitools import Cli


def _waiting_chat(cli: Cli, run_id: str) -> list[ds.Step]:
    def talk(state: object) -> dict[str, object]:
        return {"got": [ds.receive("chat"), ds.receive("chat")]}

    steps = [ds.Step("talk", talk)]
    with cli.store() as store, pytest.raises(ds.RunWaiting) as waiting:
        ds.run(run_id, steps, store)
    assert waiting.value.topic == "chat"
    return steps


def test_send_delivers_json_or_text_once_per_key_and_wakes_the_run(cli: Cli, run_id: str) -> None:
    """`runs send RUN TOPIC PAYLOAD` sends a JSON value (or text with --text, or stdin
    with '-'); a repeated --idempotency-key changes nothing; `runs show` says what a
    waiting run waits for; the run takes the messages in order."""
    steps = _waiting_chat(cli, run_id)
    shown = cli("runs", "show", run_id, "--no-state")
    assert "waiting for a message on chat" in shown.stdout, shown.stdout + shown.stderr
    sent = cli.json("runs", "send", run_id, "chat", '{"content": "hi"}', "--idempotency-key", "m1")
    assert sent == {"run_id": run_id, "topic": "chat", "seq": 0, "status": "running"}
    again = cli.json("runs", "send", run_id, "chat", '"other"', "--idempotency-key", "m1")
    assert again["seq"] == 0
    done = cli("runs", "send", run_id, "chat", "--text", "in French?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(f"message 1 on chat sent to run {run_id}")
    with cli.store() as store:
        assert [m["payload"] for m in mailbox.pending(store.load(run_id).mailbox, "chat")] == [
            {"content": "hi"},
            "in French?",
        ]
        assert ds.run(run_id, steps, store) == {"got": [{"content": "hi"}, "in French?"]}


def test_send_refuses_bad_input_in_one_line(cli: Cli, run_id: str) -> None:
    """A payload that is not JSON is a usage error (exit 2) that names --text; a run that
    does not exist is an error of ours (exit 1) that names the run; nothing is written."""
    bad = cli("runs", "send", run_id, "chat", "hello there")
    assert bad.returncode == 2
    assert "not JSON" in bad.stderr
    assert "--text" in bad.stderr
    missing = cli("runs", "send", run_id, "chat", "1")
    assert missing.returncode == 1
    assert f"run {run_id!r} does not exist" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    with cli.store() as store:
        assert store.load(run_id) is None
