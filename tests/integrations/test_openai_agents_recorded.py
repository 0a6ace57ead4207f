"""What the OpenAI Agents integration records, over time and at rest: a run recorded by
the code before its values went through ``runner/typed.py`` still replays, and an
encrypting store keeps every recorded value encrypted and replays it."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds

from . import openai_runs as runs
from .conftest import Crash
from .openai_recorded import agent_runs

Effects = Callable[..., runs.Effects]

RECORDED = Path(__file__).with_name("recorded") / "openai_agents.json"


def twice(seen: list[Any]) -> ds.Step:
    """A step running ``agent_runs``: the first time it crashes after them (every call
    recorded), so the next run of the step replays them all."""

    def step(state: Any) -> dict[str, Any]:
        seen.append(agent_runs())
        if len(seen) == 1:
            raise Crash
        return {"outputs": [out for _, out in seen[-1]]}

    return ds.Step("agents", step)


def test_a_run_recorded_by_the_earlier_code_replays(run_id: str, openai_effects: Effects) -> None:
    """The calls recorded by the code before typed values (recorded/openai_agents.json:
    model responses, plain and structured tool outputs, a handoff, guardrails) replay:
    no model, tool or guardrail runs again, and each agent run is what it is outside any
    step -- its outputs, and what it sent its model last."""
    outside = agent_runs()
    again = openai_effects()
    calls = tuple(json.loads(RECORDED.read_text()))
    store = ds.MemoryStore()
    store.save(ds.Checkpoint(run_id=run_id, step=-1, state={}, etag=None, steps=(), calls=calls))
    seen: list[Any] = [None]  # no crash: the step runs once, replaying
    state = ds.run(run_id, [twice(seen)], store)
    assert again.seen == []
    assert seen[1] == outside
    assert state["outputs"] == [out for _, out in outside]


def test_an_encrypting_store_keeps_the_agents_values_encrypted_and_replays_them(
    tmp_path: Path, run_id: str, openai_effects: Effects
) -> None:
    """On a FileStore with AES-256-GCM on, no recorded model response, tool output or
    guardrail result is on disk in clear; the step replays them all (nothing runs again,
    the runs are the live ones); without the key, loading the run is a CodecError."""
    keys = ds.Keyring("k1", {"k1": base64.b64encode(os.urandom(32)).decode()})
    store, seen = ds.FileStore(tmp_path / "runs", codec=ds.ValueCodec(keys=keys)), []
    with pytest.raises(Crash):
        ds.run(run_id, [twice(seen)], store)
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file())
    for clear in (b"Paris", b"call-1", b"a cat", b"input_tokens", b"checked"):
        assert clear not in on_disk, clear
    cp = store.load(run_id)
    assert cp is not None and len(cp.calls) == len(json.loads(RECORDED.read_text()))
    again = openai_effects()
    reopened = ds.FileStore(tmp_path / "runs", codec=ds.ValueCodec(keys=keys))
    state = ds.run(run_id, [twice(seen)], reopened)
    assert again.seen == [] and seen[1] == seen[0]
    assert state["outputs"][0] == runs.TOOLS_OUTPUT
    with pytest.raises(ds.CodecError, match="k1"):
        ds.FileStore(tmp_path / "runs").load(run_id)
