"""A save of the /run layout against real process death: a child process saves through
the test proxy, the proxy holds the k-th request of the save -- before it reaches the
server, or once the server has it -- and the test SIGKILLs the child meanwhile, for
every k of a delta save (segment, head), of a delta larger than an item (its two
items, head) and of a fold (snapshot, head, the query of superseded segments, their
deletes). The run then loads at the save before, or the one that was killed, exactly
as the head says, and saving on from it works."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import durable_steps as ds

from ...conftest import Cosmos
from ...helpers.clitools import CLEAN
from ...helpers.proxy import Proxy
from .test_cosmos_layout import segmented

CHILD = str(Path(__file__).parents[2] / "helpers" / "cosmos_child.py")
REQUESTS = {"delta": 2, "chunked": 3, "fold": 6}
HEAD = {"delta": 1, "chunked": 2, "fold": 1}
"""Which request writes the head: after one segment (a delta, or the snapshot of a 15
KB state: one item each), or after the two items of a 2.2 MB change."""
NEW = {"delta": "n" * 5000, "chunked": "L" * 2_200_000, "fold": "n" * 5000}


def killed_at(proxied: tuple[Cosmos, Proxy], kind: str, run_id: str, k: int, when: str) -> None:
    """Start the child's save, hold its k-th request (``hold``: before the server has it;
    ``hold-after``: once it has it), and SIGKILL the child while it waits."""
    endpoint, proxy = proxied
    child = subprocess.Popen(
        [sys.executable, CHILD, kind, run_id],
        env={**CLEAN, **endpoint.env()},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        line = child.stdout.readline()
        assert line == "ready\n", (line, child.stderr.read() if child.stderr else "")
        held = proxy.arm(k, when)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert held.wait(30), f"request {k} never came"
    finally:
        child.kill()
        child.wait(30)
        for pipe in (child.stdin, child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
        proxy.heal()


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL: POSIX only")
@pytest.mark.parametrize("kind", REQUESTS)
def test_a_save_killed_at_any_request_loads_whole(
    proxied: tuple[Cosmos, Proxy], run_id: str, kind: str
) -> None:
    """Killed before the head reached the server: the save before, exactly. Once the
    head is there: the killed save, exactly. Never a mix; saving on works."""
    endpoint, proxy = proxied
    direct = replace(endpoint, endpoint=proxy.upstream_url)
    with direct.store() as store:
        for k in range(REQUESTS[kind]):
            for when in ("hold", "hold-after"):
                rid = f"{run_id}-{k}-{when}"
                base = segmented(store, rid, saves=3)
                killed_at(proxied, kind, rid, k, when)
                with direct.store() as reader:
                    loaded = reader.load(rid)
                    assert loaded is not None
                    head = HEAD[kind]
                    landed = k > head or (k == head and when == "hold-after")
                    expected = {**base.state, "new": NEW[kind]} if landed else dict(base.state)
                    assert loaded.state == expected, (k, when)
                    assert loaded.steps[-1] == ("new" if landed else base.steps[-1])
                    assert (loaded.etag == base.etag) != landed
                    after = reader.save(
                        replace(loaded, state={**expected, "on": 1}, updated_at=None)
                    )
                    again = reader.load(rid)
                    assert again is not None and again.etag == after.etag
                    assert again.state == {**expected, "on": 1}


@pytest.mark.slow
def test_processes_racing_saves_and_folds_on_one_run_never_mix_or_lose_a_save(
    cosmos_local: Cosmos, run_id: str, tmp_path: Path
) -> None:
    """Four processes load and save the same run (segmented: its state is past 4 KiB),
    a quarter of their saves folding it, for 25 rounds each: every step is won by
    exactly one process, every load on the way reads a whole checkpoint (a fold never
    deletes the generation a later save made), and the final state holds each step's
    value from its winner."""
    fresh = cosmos_local.fresh()
    go = tmp_path / "go"
    try:
        with fresh.store() as store:
            store.save(ds.Checkpoint(run_id, -1, {"base": "b" * 6000}))
        env = {**CLEAN, **fresh.env(), "GO": str(go)}
        procs = [
            subprocess.Popen(
                [sys.executable, CHILD, "race", run_id, "25"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        go.touch()
        outcomes = []
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-2000:]
            outcomes.append(json.loads(out.strip().splitlines()[-1]))
        winners = {step: o["pid"] for o in outcomes for step in o["wins"]}
        assert sum(len(o["wins"]) for o in outcomes) == len(winners)  # no step won twice
        assert sum(o["conflicts"] for o in outcomes) > 0  # they did race
        assert sum(o["folds"] for o in outcomes) > 0  # and folded while racing
        with fresh.store() as store:
            final = store.load(run_id)
        assert final is not None and sorted(winners) == list(range(len(winners)))
        assert final.step == len(winners) - 1
        assert final.state == {
            "base": "b" * 6000,
            **{f"s{n}": {"pid": pid, "pad": "p" * 3000} for n, pid in winners.items()},
        }
    finally:
        fresh.drop()
