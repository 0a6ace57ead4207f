"""A support agent in a process of its own, for the console's tests to kill mid-call.

    python tests/console/agent_child.py RUN_ID     (store from the environment)

Workflow ``support``: ``retrieve``, then ``agent`` -- calls llm, tool, llm, tool, then
waits for signal ``approval`` (so its journal stays: the step is unfinished) -- then
``write``. With ``HANG_AT=N`` the call of index N prints "ready" and blocks until the
process is killed; with ``CALL_SECONDS=S`` each call takes S seconds, as a model's
answer does (for the screenshots, whose timeline would otherwise be a few milliseconds).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import durable_steps as ds

CALLS = ("llm", "tool", "llm", "tool")


def answer(i: int, name: str) -> dict[str, Any]:
    time.sleep(float(os.environ.get("CALL_SECONDS", "0")))
    if os.environ.get("HANG_AT") == str(i):
        print("ready", flush=True)
        threading.Event().wait()  # until SIGKILL
    return {"call": i, "said": f"{name} answer {i}"}


def agent(state: Any) -> dict[str, Any]:
    said = [ds.call(name, answer, i, name) for i, name in enumerate(CALLS)]
    approval = ds.wait_for_signal("approval")
    return {"said": said, "approval": approval}


SUPPORT = ds.Workflow(
    "support",
    [
        ds.Step("retrieve", lambda s: {"docs": ["KB-112", "KB-7"]}),
        ds.Step("agent", agent),
        ds.Step("write", lambda s: {"reply": "sent"}),
    ],
)


def main() -> None:
    with ds.store_from_env() as store:
        try:
            SUPPORT.run(sys.argv[1], store, input={"question": "where is my order?"})
        except ds.RunWaiting:
            print("waiting", flush=True)


if __name__ == "__main__":
    main()
