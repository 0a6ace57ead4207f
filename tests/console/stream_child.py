"""A streaming agent in a process of its own, for the console's tests to SIGKILL mid-answer.

    python tests/console/stream_child.py RUN_ID     (store from the environment)

Workflow ``writer``: ``plan`` (writes the stream ``log``), then ``answer`` -- a call to
the model that writes each token of its answer to the stream ``answer`` -- then the
stream is closed. With ``HANG_AT=N`` the model prints "ready" after N tokens and
blocks until the process is killed: the run is left running under a dead process's
lease, its model call interrupted. Run again without it, the run resumes in this
process: the call runs again, after a reset marker, and the run completes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import durable_steps as ds

TOKENS = ("Your ", "order ", "left ", "the ", "warehouse ", "on ", "Tuesday.")


def model() -> str:
    hang = os.environ.get("HANG_AT")
    for n, token in enumerate(TOKENS):
        if hang is not None and n == int(hang):
            print("ready", flush=True)
            threading.Event().wait()  # until SIGKILL
        ds.write_stream("answer", token)
        time.sleep(float(os.environ.get("TOKEN_SECONDS", "0")))
    return "".join(TOKENS)


def plan(state: Any) -> dict[str, Any]:
    ds.write_stream("log", {"read": "KB-112"})
    ds.close_stream("log")
    return {"sources": ["KB-112"]}


def answer(state: Any) -> dict[str, Any]:
    text = ds.call("llm", model)
    ds.close_stream("answer")
    return {"answer": text}


WRITER = ds.Workflow("writer", [ds.Step("plan", plan), ds.Step("answer", answer)])


def main() -> None:
    with ds.store_from_env() as store:
        WRITER.run(sys.argv[1], store, input={"question": "where is my order?"})
        print("completed", flush=True)


if __name__ == "__main__":
    main()
