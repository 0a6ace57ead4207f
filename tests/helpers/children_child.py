"""A parent run with child runs, worked in a process of its own, for tests that kill it
at each point of a child's life.

    python tests/helpers/children_child.py RUN_ID N     (store from the environment)

The parent's one step starts N children (``RUN_ID.cI``, input ``{"x": I}``), then awaits
each and sums their ``y``; a child's step appends its run id to $EFFECTS and returns
``{"y": 2 * x}``. The process recovers both workflows in passes until the parent has
ended, then prints its state as JSON. ``KILL`` makes it SIGKILL itself once, when
$KILLED does not exist yet (it creates it just before):

- ``before-create``: in the parent's step, before its first child is created;
- ``after-create``: right after the first child's create-only save, before the
  parent's journal records it;
- ``child-running``: in the first child's step;
- ``after-child-completed``: right after a child's final save, before its parent is
  told.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import durable_steps as ds

KILL = os.environ.get("KILL")


def die(point: str) -> None:
    marker = Path(os.environ["KILLED"])
    if point == KILL and not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)


def double(state: Any) -> dict[str, Any]:
    run_id = ds.current_step().run_id
    with open(os.environ["EFFECTS"], "a") as f:
        f.write(run_id + "\n")
    if run_id.endswith(".c0"):
        die("child-running")
    return {"y": 2 * state["x"]}


CHILD = ds.Workflow("child", [ds.Step("double", double)])


def fan(state: Any) -> dict[str, Any]:
    die("before-create")
    ids = [ds.start_child(CHILD, f"{state['id']}.c{i}", {"x": i}) for i in range(state["n"])]
    return {"total": sum(ds.await_child(cid, poll=0.5)["y"] for cid in ids)}


PARENT = ds.Workflow("parent", [ds.Step("fan", fan)])


def main() -> None:
    run_id, n = sys.argv[1], int(sys.argv[2])
    with ds.store_from_env() as store:
        save = store.save

        def saving(cp: ds.Checkpoint) -> ds.Checkpoint:
            saved = save(cp)
            if cp.parent is not None and cp.etag is None:
                die("after-create")
            if cp.parent is not None and cp.status == "completed":
                die("after-child-completed")
            return saved

        store.save = saving  # type: ignore[method-assign] # the kill points around saves
        PARENT.start(run_id, store, input={"id": run_id, "n": n})
        while (info := store.run_info(run_id)) is not None and not info.done:
            if info.status in ("failed", "cancelled"):
                break
            if not ds.recover(store, [PARENT, CHILD]):
                time.sleep(0.05)  # a worker's rest between passes that found nothing
        print(json.dumps(dict(store.load(run_id).state)))  # type: ignore[union-attr]


if __name__ == "__main__":
    main()
