"""Streams against real process death: a run that writes chunks from step code and
from a call is SIGKILLed right after one of its chunks (a handful of points: after a
step-code chunk, in the middle of a call, after a call's last chunk), then
resumed in a fresh process -- on the file store and on CosmosStore (cosmos-local), under
run and run_async. A reader follows the stream live across the kill and the resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from ..helpers import stream_child

CHILD = stream_child.__file__
KILLS = {2: "async", 3: "sync", 4: "async"}
"""Kill points (chunk index -> mode): in the middle of a call; after a call's last chunk,
before its result is recorded; after a step-code chunk that follows a recorded call."""


def spawn(env: dict[str, str], effects: Path, mode: str, run_id: str, kill_at: int | None):  # type: ignore[no-untyped-def]
    extra = {"SIDE_EFFECTS": str(effects), "KILL_AT": "" if kill_at is None else str(kill_at)}
    return subprocess.Popen(
        [sys.executable, CHILD, mode, run_id],
        env={**os.environ, **env, **extra},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def superseded(entries: list[tuple[int, Any]]) -> list[Any]:
    """What a reader shows once it applies the markers: a StreamReset drops the chunks
    from its ``since`` up to itself (one writer per stream)."""
    shown: list[tuple[int, Any]] = []
    for offset, chunk in entries:
        if isinstance(chunk, ds.StreamReset):
            shown = [(o, c) for o, c in shown if o < chunk.since]
        else:
            shown.append((offset, chunk))
    return [c for _, c in shown]


@pytest.mark.slow
@pytest.mark.parametrize("env", ["file", "cosmos-local"], indirect=True)
def test_a_killed_writer_resumes_and_a_live_reader_sees_each_offset_once(
    env: dict[str, str], tmp_path: Path, run_id: str
) -> None:
    """For each kill point: the reader, following live from before the kill to the end
    of the resumed run, gets offsets 0, 1, 2, ... each once and in order; it gets a
    StreamReset exactly when the kill interrupted a call that had written chunks; with
    the markers applied, what it shows is an uninterrupted run's chunks; and the step
    code's chunks before the kill are not written again."""
    store = ds.store_from_env(env)
    for kill_at, mode in KILLS.items():
        rid = f"{run_id}-{kill_at}"
        effects = tmp_path / f"effects-{kill_at}"
        got: list[tuple[int, Any]] = []
        failed: list[BaseException] = []
        store.save(ds.Checkpoint(rid, -1, {}))  # there before the reader starts

        def follow(
            rid: str = rid, got: list[tuple[int, Any]] = got, failed: list[BaseException] = failed
        ) -> None:
            try:
                got.extend(
                    ds.read_stream(store, rid, "out", wait=True, interval=0.01, max_interval=0.1)
                )
            except BaseException as exc:  # reported by the test thread
                failed.append(exc)

        reader = threading.Thread(target=follow)
        reader.start()
        child = spawn(env, effects, mode, rid, kill_at)
        _, err = child.communicate(timeout=120)
        assert child.returncode == -9, err  # it killed itself at that chunk
        resumed = spawn(env, effects, mode, rid, None)
        out, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        assert json.loads(out) == {"said": [f"round {r}" for r in range(stream_child.ROUNDS)]}
        reader.join(120)
        assert not reader.is_alive() and not failed, failed
        assert [o for o, _ in got] == list(range(len(got))), (kill_at, got)  # dense, once
        assert got == list(ds.read_stream(store, rid, "out", follow=False))
        resets = [c for _, c in got if isinstance(c, ds.StreamReset)]
        in_call = isinstance(stream_child.expected()[kill_at], str)  # a call's chunk
        assert len(resets) == (1 if in_call else 0), (kill_at, got)
        assert superseded(got) == stream_child.expected(), (kill_at, got)
    store.close()
