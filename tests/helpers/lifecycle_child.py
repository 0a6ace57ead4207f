"""A child process that resumes or upgrades a run and stops at one point of it, for the
test to SIGKILL it there (tests/runner/test_lifecycle_kills.py).

    python lifecycle_child.py resume|upgrade RUN_ID POINT

POINT: ``before-read`` (the head not read yet), ``before-write`` (read, not written),
``mid-write`` (the file store's record half written: a torn tail), ``after-write``
(the write acknowledged, the call not returned). The child prints ``at POINT`` there
and waits to be killed; the store comes from the environment (DURABLE_STORE...).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import durable_steps as ds


def _a(state: Any) -> None:
    return None


def _b(state: Any) -> None:
    return None


V1 = ds.Workflow("kills", [ds.Step("a", _a), ds.Step("b", _b)], version="1")
V2 = ds.Workflow("kills", [ds.Step("a", _a), ds.Step("b2", _b)], version="2")


def pause(point: str) -> None:
    print(f"at {point}", flush=True)
    time.sleep(600)  # the test kills us here


def main() -> None:
    op, run_id, point = sys.argv[1:4]
    store = ds.store_from_env()
    load_head, save_head, pwrite = store.load_head, store.save_head, os.pwrite
    writing = False

    def paused_load_head(rid: str) -> Any:
        if point == "before-read":
            pause(point)
        return load_head(rid)

    def paused_save_head(cp: ds.Checkpoint) -> Any:
        nonlocal writing
        if point == "before-write":
            pause(point)
        writing = True
        saved = save_head(cp)
        if point == "after-write":
            pause(point)
        return saved

    def half_pwrite(fd: int, data: Any, offset: int) -> int:
        if writing and point == "mid-write":
            pwrite(fd, bytes(data)[: len(data) // 2], offset)
            pause(point)
        return pwrite(fd, data, offset)

    store.load_head = paused_load_head  # type: ignore[method-assign]
    store.save_head = paused_save_head  # type: ignore[method-assign]
    os.pwrite = half_pwrite
    if op == "resume":
        ds.resume_run(store, run_id)
    else:
        ds.upgrade_run(store, run_id, V2)
    print("done", flush=True)


if __name__ == "__main__":
    main()
