"""A save to Cosmos DB in a child process, so that a test can kill it in the middle.

    python tests/helpers/cosmos_child.py KIND RUN_ID      store from the environment
    python tests/helpers/cosmos_child.py race RUN_ID ROUNDS

KIND (delta, chunked or fold): loads the run, prints "ready", waits for a line on
stdin, then saves one more key -- 5 KB as a delta (through the store that loaded it),
2.2 MB as a delta (in two items), or 5 KB as a fold (through a store that does not
know the stored version) -- and prints "saved ETAG".

race: waits for the file $GO, then ROUNDS times loads the run and saves its next step
(a 3 KB value naming this process), one save in four through a second store that
folds; prints {"pid", "wins": [steps], "conflicts": n, "folds": n} as JSON.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import replace
from typing import Any

import durable_steps as ds
from durable_steps.seam.state import frozen_state

NEW = "n" * 5000
LARGE = "L" * 2_200_000


def race(run_id: str, rounds: int) -> None:
    store: Any = ds.store_from_env()
    folder: Any = ds.store_from_env()  # never loads: each save of its is a fold
    wins, conflicts, folds = [], 0, 0
    while not os.path.exists(os.environ["GO"]):
        time.sleep(0.001)
    for _ in range(rounds):
        cp = store.load(run_id)
        assert cp is not None
        step = cp.step + 1
        value = {"pid": os.getpid(), "pad": "p" * 3000}
        fold = random.random() < 0.25
        saver = folder if fold else store
        state = frozen_state(cp.state, run_id, stored_as=cp.etag).updated(
            {f"s{step}": value}, run_id
        )
        target = replace(cp, step=step, steps=(*cp.steps, f"s{step}"), state=state)
        try:
            saver.save(replace(target, state=dict(state)) if fold else target)
            wins.append(step)
            folds += fold
        except ds.ConflictError:
            conflicts += 1
    outcome = {"pid": os.getpid(), "wins": wins, "conflicts": conflicts, "folds": folds}
    print(json.dumps(outcome), flush=True)


def main() -> None:
    if sys.argv[1] == "race":
        race(sys.argv[2], int(sys.argv[3]))
        return
    kind, run_id = sys.argv[1], sys.argv[2]
    store: Any = ds.store_from_env()
    saver: Any = ds.store_from_env() if kind == "fold" else store
    cp = store.load(run_id)
    assert cp is not None
    if kind != "fold":
        new = NEW if kind == "delta" else LARGE
        state: Any = frozen_state(cp.state, run_id, stored_as=cp.etag).updated({"new": new}, run_id)
    else:
        state = {**cp.state, "new": NEW}
    target = replace(cp, step=cp.step + 1, steps=(*cp.steps, "new"), state=state, updated_at=None)
    print("ready", flush=True)
    sys.stdin.readline()
    saved = saver.save(target)
    print("saved", saved.etag, flush=True)


if __name__ == "__main__":
    main()
