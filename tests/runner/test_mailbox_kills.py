"""The mailbox against real process death and real racing processes, on the file store
and on CosmosStore (cosmos-local): a chat run SIGKILLed before its receive is recorded,
after, and while it waits, then resumed by a fresh process, takes every message exactly
once, in order; senders in several processes racing a running run lose nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import durable_steps as ds
from durable_steps.seam import mailbox

from ..helpers import mailbox_child
from ..helpers.waiting import wait_until

CHILD = mailbox_child.__file__


def spawn(env: dict[str, str], effects: Path, *args: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, *args],
        env={**os.environ, **env, "SIDE_EFFECTS": str(effects), **extra},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def replies(effects: Path) -> Counter[str]:
    lines = effects.read_text().splitlines() if effects.exists() else []
    return Counter(json.loads(line.removeprefix("reply ")) for line in lines)


@pytest.mark.parametrize(
    ("point", "mode"), [("before:3", "sync"), ("after:3", "async"), ("waiting", "sync")]
)
def test_a_chat_killed_at_a_receive_resumes_taking_each_message_once_in_order(
    env: dict[str, str], tmp_path: Path, run_id: str, point: str, mode: str
) -> None:
    """The run is SIGKILLed just before the save that records its third receive, just
    after it, or while it waits for a message; a fresh process resumes it. Every message
    is taken once and in send order (none lost, none twice), no reply is made twice,
    and no message is left in the head."""
    first = [f"m{i}" for i in range(5)]
    rest = ["m5", "m6", "bye"]
    effects = tmp_path / "effects"
    with ds.store_from_env(env) as store:
        mailbox_child.workflow(mode).start(run_id, store)
        for text in first:
            ds.send_message(store, run_id, "chat", text)
        kill = {} if point == "waiting" else {"KILL_AT": point}
        child = spawn(env, effects, "serve", mode, run_id, **kill)
        if point == "waiting":

            def waits() -> bool:
                head = store.load_head(run_id)
                return head is not None and head.status == "waiting" and child.poll() is None

            wait_until(waits, "the run to wait for its sixth message")
            child.send_signal(signal.SIGKILL)
        child.communicate(timeout=120)
        assert child.returncode == -signal.SIGKILL
        before = replies(effects)
        for text in rest:
            ds.send_message(store, run_id, "chat", text)
        resumed = spawn(env, effects, "serve", mode, run_id)
        out, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        assert json.loads(out) == {"got": [*first, *rest[:-1]]}
        ran = replies(effects)
        assert before  # the first process answered some before it died
        # every kill point lies between two recorded operations: no reply ran twice
        assert ran == Counter([*first, *rest[:-1]])
        cp = store.load(run_id)
        assert cp.status == "completed"
        assert mailbox.waiting_messages(cp.mailbox) == 0


@pytest.mark.slow
def test_senders_in_several_processes_racing_a_running_run_lose_nothing(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """Three processes each send 12 messages (each twice, with one idempotency key)
    while the run takes and answers them: every message arrives once, and each sender's
    messages in the order it sent them."""
    effects = tmp_path / "effects"
    with ds.store_from_env(env) as store:
        mailbox_child.workflow("sync").start(run_id, store)
        worker = spawn(env, effects, "serve", "sync", run_id)
        senders = [spawn(env, effects, "send", run_id, f"s{k}", "12") for k in range(3)]
        for sender in senders:
            _, err = sender.communicate(timeout=120)
            assert sender.returncode == 0, err
        ds.send_message(store, run_id, "chat", "bye")
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    got = json.loads(out)["got"]
    assert Counter(got) == Counter(f"s{k}-{i}" for k in range(3) for i in range(12))
    for k in range(3):
        mine = [g for g in got if g.startswith(f"s{k}-")]
        assert mine == [f"s{k}-{i}" for i in range(12)]
