"""`durable-steps runs show` with its state left out or cut to one key, and with the
recorded calls' results (--calls): a real process on the file store and cosmos-local."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import durable_steps as ds

from ..helpers.clitools import Cli

ANSWER = "the model said: refund approved for order A-7"


def _agent(state: Any) -> None:
    ds.call("llm", lambda: {"content": ANSWER})
    ds.call("tool", lambda: [1, 2, 3])
    raise RuntimeError("the tool server went away")


def seed(cli: Cli, run_id: str) -> None:
    """A failed run: a large key and a small one in its state, two recorded calls."""
    steps = [
        ds.Step("load", lambda s: {"document": "x" * 50_000, "ticket": {"id": 7}}),
        ds.Step("agent", _agent),
    ]
    with cli.store() as store, pytest.raises(RuntimeError):
        ds.run(run_id, steps, store)


def test_no_state_lists_the_keys_and_their_sizes_not_the_values(cli: Cli, run_id: str) -> None:
    """--no-state prints each top-level key with its size and no value; in --json the
    state is replaced by the keys and their sizes."""
    seed(cli, run_id)
    shown = cli("runs", "show", run_id, "--no-state")
    assert shown.returncode == 0, shown.stderr
    assert "state: 2 key(s)" in shown.stdout
    assert "  document  48.8 KiB" in shown.stdout and "  ticket  9 B" in shown.stdout
    assert "xxxx" not in shown.stdout
    data = cli.json("runs", "show", run_id, "--no-state")
    assert "state" not in data
    assert data["state_keys"] == [{"key": "document", "size": 50_002}, {"key": "ticket", "size": 9}]
    assert cli.json("runs", "show", run_id)["state"]["ticket"] == {"id": 7}  # the default


def test_key_prints_one_top_level_key(cli: Cli, run_id: str) -> None:
    """--key KEY prints that key's value only (text and --json); a key the state does
    not have is one line naming the keys there, exit 1."""
    seed(cli, run_id)
    shown = cli("runs", "show", run_id, "--key", "ticket")
    assert shown.returncode == 0, shown.stderr
    assert "state['ticket']" in shown.stdout and '"id": 7' in shown.stdout
    assert "xxxx" not in shown.stdout
    assert cli.json("runs", "show", run_id, "--key", "ticket")["state"] == {"ticket": {"id": 7}}
    missing = cli("runs", "show", run_id, "--key", "tickets")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"error: run {run_id!r}'s state has no key 'tickets'; its keys: 'document', 'ticket'. "
        f"'durable-steps runs show {run_id} --no-state' lists them with their sizes"
    )


def test_calls_prints_what_each_recorded_call_returned(cli: Cli, run_id: str) -> None:
    """--calls prints each recorded call's result below it (and in --json); without it
    the results stay out of both."""
    seed(cli, run_id)
    shown = cli("runs", "show", run_id, "--no-state", "--calls")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    llm = next(i for i, line in enumerate(lines) if line.startswith("    0 llm  "))
    assert ANSWER in lines[llm + 2]  # below its call, indented
    data = cli.json("runs", "show", run_id, "--no-state", "--calls")
    assert [(c["name"], c["result"]) for c in data["calls"]] == [
        ("llm", {"content": ANSWER}),
        ("tool", [1, 2, 3]),
    ]
    plain = cli.json("runs", "show", run_id)
    assert ANSWER not in json.dumps(plain)
    assert ANSWER not in cli("runs", "show", run_id).stdout


async def _parallel(state: Any) -> None:
    """Calls made as an agent framework makes them: the model in the step's task, tools
    in nested tasks (scopes like ``0.1``), finishing in another order than the journal's."""

    async def tool(name: str, pause: float) -> None:
        await asyncio.sleep(pause)
        await ds.call_async(name, lambda: name)

    async def turn() -> None:
        await asyncio.gather(tool("slow_tool", 0.3), tool("fast_tool", 0.0))

    await ds.call_async("model", lambda: "use two tools")
    await asyncio.gather(turn())
    await ds.call_async("model", lambda: "done")
    raise RuntimeError("the run stops here, its calls kept")


def test_calls_of_parallel_tasks_show_in_time_order_with_readable_labels(
    cli: Cli, run_id: str
) -> None:
    """Calls made by nested tasks are listed by when they were made, each in its task
    by a small number -- not by task scopes like '0.0/0'."""

    async def run() -> None:
        async with ds.async_store_from_env(cli.env) as store:
            await ds.run_async(run_id, [ds.Step("agent", _parallel)], store)

    with pytest.raises(RuntimeError, match="its calls kept"):
        asyncio.run(run())
    shown = cli("runs", "show", run_id, "--no-state")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    start = next((i for i, ln in enumerate(lines) if "recorded calls of step" in ln), None)
    assert start is not None, shown.stdout
    calls = [line.split() for line in lines[start + 1 : start + 5]]
    assert [(c[0], c[1]) for c in calls] == [
        ("0", "model"),
        ("1", "fast_tool"),
        ("2", "slow_tool"),
        ("3", "model"),
    ], shown.stdout
    assert "(in task 1)" in lines[start + 2] and "(in task 2)" in lines[start + 3]
