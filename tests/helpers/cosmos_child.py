"""A save to Cosmos DB in a child process, so that a test can kill it in the middle.

    python tests/helpers/cosmos_child.py KIND RUN_ID      store from the environment

Loads the run, prints "ready", waits for a line on stdin, then saves one more 5 KB key
-- as a delta (through the store that loaded it), or as a fold (through a store that
does not know the stored version) -- and prints "saved ETAG".
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import durable_steps as ds
from durable_steps.seam.state import frozen_state

NEW = "n" * 5000


def main() -> None:
    kind, run_id = sys.argv[1], sys.argv[2]
    store: Any = ds.store_from_env()
    saver: Any = store if kind == "delta" else ds.store_from_env()
    cp = store.load(run_id)
    assert cp is not None
    if kind == "delta":
        state: Any = frozen_state(cp.state, run_id, stored_as=cp.etag).updated({"new": NEW}, run_id)
    else:
        state = {**cp.state, "new": NEW}
    target = replace(cp, step=cp.step + 1, steps=(*cp.steps, "new"), state=state, updated_at=None)
    print("ready", flush=True)
    sys.stdin.readline()
    saved = saver.save(target)
    print("saved", saved.etag, flush=True)


if __name__ == "__main__":
    main()
