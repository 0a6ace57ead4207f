"""A chat run, and senders, in processes of their own, for tests that kill them.

    python tests/helpers/mailbox_child.py serve MODE RUN_ID     (store from the environment)
    python tests/helpers/mailbox_child.py send RUN_ID PREFIX N

``serve`` runs the chat workflow (MODE ``sync``: ``receive`` under ``run``; ``async``:
``await receive_async`` under ``run_async``) like a worker would: when the run waits
for a message it polls the run's head until a send wakes it, then runs it again; it
prints the final state as JSON once the run completes. The step takes messages on
topic ``chat`` until ``"bye"``, answering each through a recorded call that appends
"reply PAYLOAD" to $SIDE_EFFECTS. ``$KILL_AT`` (``before:K`` or ``after:K``) makes it
SIGKILL itself just before, or just after, the save that records its K-th receive
(counted from 1 in this process) -- a real death at an exact point.

``send`` sends N messages ``PREFIX-0`` ... on ``chat``, each twice with the same
idempotency key (a client retrying), and exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from typing import Any

import durable_steps as ds
from durable_steps.runner import mailbox as runner_mailbox


def reply(text: Any) -> str:
    with open(os.environ["SIDE_EFFECTS"], "a") as f:
        f.write(f"reply {json.dumps(text)}\n")
        f.flush()
        os.fsync(f.fileno())
    return f"re: {text}"


def talk(state: Any) -> dict[str, Any]:
    got = []
    while (text := ds.receive("chat")) != "bye":
        got.append(text)
        ds.call("reply", reply, text)
    return {"got": got}


async def talk_async(state: Any) -> dict[str, Any]:
    got = []
    while (text := await ds.receive_async("chat")) != "bye":
        got.append(text)
        await ds.call_async("reply", reply, text)
    return {"got": got}


def workflow(mode: str) -> ds.Workflow:
    return ds.Workflow("chat", [ds.Step("talk", talk if mode == "sync" else talk_async)])


def kill_at() -> None:
    """Die by SIGKILL just before or just after the K-th receive's record is saved."""
    where = os.environ.get("KILL_AT")
    if not where:
        return
    when, k = where.split(":")
    count = [0]
    sync, aio = runner_mailbox.save_record, runner_mailbox.save_record_async

    def die_around(record: Mapping[str, Any]) -> bool:
        count[0] += 1
        return count[0] == int(k) and "seq" in record

    def save(journal: Any, record: Mapping[str, Any]) -> None:
        dies = die_around(record)
        if dies and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        sync(journal, record)
        if dies and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)

    async def save_async(journal: Any, record: Mapping[str, Any]) -> None:
        dies = die_around(record)
        if dies and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        await aio(journal, record)
        if dies and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)

    runner_mailbox.save_record = save  # type: ignore[assignment]
    runner_mailbox.save_record_async = save_async  # type: ignore[assignment]


def serve(mode: str, run_id: str) -> None:
    w = workflow(mode)
    with ds.store_from_env() as store:
        while True:
            try:
                if mode == "sync":
                    state = w.run(run_id, store)
                else:
                    state = asyncio.run(_run_async(w, run_id))
            except ds.RunWaiting:
                print("waiting", file=sys.stderr, flush=True)
                while store.load_head(run_id).status == "waiting":  # type: ignore[union-attr]
                    time.sleep(0.01)
                continue
            print(json.dumps(state))
            return


async def _run_async(w: ds.Workflow, run_id: str) -> dict[str, Any]:
    async with ds.async_store_from_env() as store:
        return await w.run_async(run_id, store)


def send(run_id: str, prefix: str, n: int) -> None:
    with ds.store_from_env() as store:
        for i in range(n):
            text = f"{prefix}-{i}"
            for _ in range(2):  # a client that retries: delivered once
                ds.send_message(store, run_id, "chat", text, idempotency_key=text)


def main() -> None:
    if sys.argv[1] == "serve":
        kill_at()
        serve(sys.argv[2], sys.argv[3])
    else:
        send(sys.argv[2], sys.argv[3], int(sys.argv[4]))


if __name__ == "__main__":
    main()
