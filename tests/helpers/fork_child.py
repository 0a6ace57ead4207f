"""A fork (``fork_run``) in a process of its own, for tests that SIGKILL it at every
point of it (issue 33).

    python tests/helpers/fork_child.py SOURCE NEW AT_STEP      (store from the environment)

Each store request (Cosmos DB: each call of the SDK's container) or file operation
(the file store: each open, write, sync, link, rename) is a point. With ``KILL_AT=k``
the process SIGKILLs itself just before the k-th point (from 0); without, it forks and
prints how many points there were, so a test knows how many to try.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import durable_steps as ds

points = [0]  # how many points were passed (a list: the wrappers add to it)
kill_at = int(os.environ["KILL_AT"]) if os.environ.get("KILL_AT") else None


def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
    def point(*args: Any, **kwargs: Any) -> Any:
        if points[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        points[0] += 1
        return fn(*args, **kwargs)

    return point


def main() -> None:
    source, new, at_step = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with ds.store_from_env() as store:
        if isinstance(store, ds.FileStore):
            for name in ("open", "write", "pwrite", "fsync", "fdatasync", "replace", "link"):
                setattr(os, name, counted(getattr(os, name)))
        else:
            from azure.cosmos import ContainerProxy

            for name in ("read_item", "query_items", "create_item", "upsert_item",
                         "replace_item", "patch_item", "delete_item"):  # fmt: skip
                setattr(ContainerProxy, name, counted(getattr(ContainerProxy, name)))
        ds.fork_run(store, source, new, at_step=at_step, update={"forked": True})
    print(json.dumps({"points": points[0]}))


if __name__ == "__main__":
    main()
