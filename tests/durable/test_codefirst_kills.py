"""A code-first agent against real process death: parallel tool steps, a queue, a child
workflow, a stream and a mailbox; SIGKILLed at several points of one run, each time
resumed by a fresh process -- on the file store and on cosmos-local; on the memory
store, which cannot outlive a process, a crash inside the process stands in."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers import codefirst_child as child
from ..helpers.waiting import wait_until

CHILD = child.__file__
KILLS = ("tool-t0-0", "tool-t1-0", "model-3", "shout")
"""The effects after whose making the process is killed (each the first time it is
made after the kill before, so no effect is in flight at two kills): the first round's
gathered tools, a later round's, the last model call (the child workflow about to
start), and the child workflow's own step (the parent waiting on it, its message not
yet taken)."""


def made(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def recorded(store: ds.Store, run_id: str) -> set[str]:
    """The effects whose results the run and its child have recorded."""
    text = ""
    for rid in (run_id, f"{run_id}-summary"):
        cp = store.load(rid)
        if cp is not None:
            text += json.dumps([list(cp.calls), dict(cp.state)])
    return {e for e in child.EFFECTS if f'"{e}' in text}


def check_final(
    answer: dict[str, Any], ran: Counter[str], kills: list[tuple[set[str], Counter[str]]]
) -> None:
    assert answer == {
        "text": f"answered in {child.ROUNDS} turns",
        "summary": f"shout: ANSWERED IN {child.ROUNDS} TURNS",
        "feedback": "thanks",
        "tools": [f"tool-t{t}-{j}" for t in range(child.ROUNDS) for j in range(2)],
    }
    assert set(ran) == set(child.EFFECTS), ran  # every effect ran
    for at_kill, before in kills:  # nothing recorded before a kill ran again after it
        assert all(ran[e] == before[e] for e in at_kill), (at_kill, before, ran)
    assert max(ran.values()) <= 2, ran  # only what was in flight ran twice


@pytest.mark.slow
def test_a_killed_code_first_agent_repeats_nothing_recorded(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """Started into its queue and sent its message first, the run is served by a child
    process killed after each effect of ``KILLS``, each time resumed by a fresh one: no
    recorded effect runs again, every effect runs, the stream has every turn, and the
    typed result is an uninterrupted run's."""
    effects = tmp_path / "effects"
    process_env = {**os.environ, **env, "SIDE_EFFECTS": str(effects)}
    store = ds.store_from_env(env)
    handle = child.agent.start(run_id, store, "why")
    handle.send("feedback", "thanks")  # waits in the mailbox until the agent asks
    kills: list[tuple[set[str], Counter[str]]] = []
    for k in KILLS:
        seen = len(made(effects))
        proc = subprocess.Popen(
            [sys.executable, CHILD, run_id],
            env=process_env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        wait_until(lambda k=k, p=proc, n=seen: k in made(effects)[n:] or p.poll() is not None, k)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        kills.append((recorded(store, run_id), Counter(made(effects))))
    done = subprocess.run(
        [sys.executable, CHILD, run_id],
        env=process_env,
        text=True,
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    check_final(json.loads(done.stdout), Counter(made(effects)), kills)
    assert all(len(at) > 0 for at, _ in kills)  # each kill came after a record
    turns = {c for _, c in handle.stream("turns", follow=False) if isinstance(c, str)}
    assert turns == {f"turn {t}" for t in range(child.ROUNDS + 1)}
    assert handle.result(timeout=10).summary.startswith("shout")  # type: ignore[attr-defined]
    store.close()


def test_a_crashed_code_first_agent_on_the_memory_store_repeats_nothing_recorded(
    tmp_path: Path, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the memory store a step that raises as it makes each effect of ``KILLS`` but
    the child's (an error there fails the child, and so its parent: no kill does that)
    stands in for the kill: the run fails with its records kept, ``resume()``
    through its handle, and the next worker pass replays them."""
    effects = tmp_path / "effects"
    monkeypatch.setenv("SIDE_EFFECTS", str(effects))
    store = ds.AsyncMemoryStore()
    kills: list[tuple[set[str], Counter[str]]] = []

    async def go() -> dict[str, Any]:
        handle = await child.agent.start_async(run_id, store, "why")
        await handle.send("feedback", "thanks")
        for k in KILLS[:-1]:
            child.CRASH_AT[:] = [k]
            seen = len(made(effects))
            while k not in made(effects)[seen:]:
                await ds.recover_async(store, child.WORKFLOWS)
            text = ""
            for rid in (run_id, f"{run_id}-summary"):
                cp = await store.load(rid)
                if cp is not None:
                    text += json.dumps([list(cp.calls), dict(cp.state)])
            kills.append(({e for e in child.EFFECTS if f'"{e}' in text}, Counter(made(effects))))
            for rid in (run_id, f"{run_id}-summary"):
                info = await store.run_info(rid)
                if info is not None and info.status == "failed":
                    await child.agent.handle_async(rid, store).resume()
        child.CRASH_AT.clear()
        return (await child.serve(store, run_id)).model_dump()

    try:
        answer = asyncio.run(go())
    finally:
        child.CRASH_AT.clear()
    check_final(answer, Counter(made(effects)), kills)
