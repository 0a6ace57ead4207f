"""``DurableCheckpointStorage`` keeps Agent Framework's ``CheckpointStorage`` contract --
the behaviour its in-memory and file storages have (save, load, list, delete,
get_latest; every result the caller's own copy) -- on every backend, sync and async; and
what it adds: each checkpoint written once, a chain per workflow run, older checkpoints
from history, values JSON or refused before anything is written, a superstep that
costs its difference. A killed process is in test_agent_framework_processes.py."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel, Field

pytest.importorskip("agent_framework")

from agent_framework import WorkflowCheckpoint, WorkflowEvent
from agent_framework._workflows._runner_context import WorkflowMessage
from agent_framework.exceptions import WorkflowCheckpointException

import durable_steps as ds
from durable_steps.integrations.agent_framework import DurableCheckpointStorage

from ..conftest import Backend, SyncFacade
from . import af_workflows

T = TypeVar("T")


@dataclass
class Note:
    """A type of the caller's, kept by name (``types=``)."""

    text: str
    tags: tuple[str, ...] = ()


class Opaque:
    """Neither a dataclass, a model nor a class with to_dict/from_dict."""


@dataclass
class AF:
    storage: DurableCheckpointStorage
    run: Callable[[Coroutine[Any, Any, Any]], Any]
    store: Any


@pytest.fixture
def af(backend: Backend, loop: asyncio.AbstractEventLoop) -> AF:
    """The storage on the test's store (its async store for an -async backend), and a
    way to await its calls on the test loop."""
    store = backend.store.aio if backend.name.endswith("-async") else backend.store

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    return AF(DurableCheckpointStorage(store, types=[Note]), run, backend.store)


def checkpoint(workflow: str = "wf", **fields: Any) -> WorkflowCheckpoint:
    """A checkpoint of a workflow under way: a message in flight unless ``messages`` are
    given (one with none, and no pending request, ends its chain)."""
    fields.setdefault(
        "messages", {"w": [WorkflowMessage(data="next", source_id="s", target_id="w")]}
    )
    return WorkflowCheckpoint(workflow_name=workflow, graph_signature_hash="h", **fields)


def test_save_returns_its_id_and_load_returns_an_equal_copy(af: AF) -> None:
    """``save`` returns the checkpoint's id; ``load`` gives back every field, values of
    Agent Framework's types and the caller's registered ones rebuilt as those types."""
    event = WorkflowEvent(
        "request_info",
        data=Note("ask", ("a",)),
        request_id="r1",
        source_executor_id="reviewer",
        request_type=Note,
        response_type=str,
    )
    cp = checkpoint(
        state={"topic": "cats", "n": [1, 2.5, None], "_executor_state": {"w": {"cache": []}}},
        messages={"w": [WorkflowMessage(data=Note("hi"), source_id="s", target_id="w")]},
        pending_request_info_events={"r1": event},
        iteration_count=3,
        metadata={"superstep": 3},
    )
    assert af.run(af.storage.save(cp)) == cp.checkpoint_id
    loaded = af.run(af.storage.load(cp.checkpoint_id))
    assert (loaded.checkpoint_id, loaded.timestamp, loaded.iteration_count) == (
        cp.checkpoint_id,
        cp.timestamp,
        3,
    )
    assert loaded.state == cp.state and loaded.metadata == {"superstep": 3}
    message = loaded.messages["w"][0]
    assert (message.data, message.source_id, message.target_id) == (Note("hi"), "s", "w")
    again = loaded.pending_request_info_events["r1"]
    assert (again.data, again.request_id, again.request_type, again.response_type) == (
        Note("ask", ("a",)),
        "r1",
        Note,
        str,
    )


class Tagged(BaseModel):
    """A Pydantic model of the caller's, a field of it under an alias."""

    kind: str = Field(alias="type")
    notes: list[Note] = []


def test_a_pydantic_model_comes_back_as_its_type(af: AF) -> None:
    """A caller's Pydantic model (``types=``) is kept as typed values are (its JSON by
    alias) and comes back as an equal instance of its class, aliased fields included."""
    storage = DurableCheckpointStorage(af.storage.store, types=[Note, Tagged])
    value = Tagged(type="review", notes=[Note("a")])
    cp = checkpoint(state={"tagged": value})
    af.run(storage.save(cp))
    loaded = af.run(storage.load(cp.checkpoint_id)).state["tagged"]
    assert type(loaded) is Tagged and loaded == value


def test_results_are_the_callers_own_copies(af: AF) -> None:
    """Mutating what ``load``, ``get_latest`` or ``list_checkpoints`` returned, or the
    checkpoint after ``save``, changes nothing stored."""
    cp = checkpoint(state={"nested": {"deep": "original"}}, metadata={"m": ["x"]})
    af.run(af.storage.save(cp))
    cp.state["nested"]["deep"] = "mutated"
    for got in (
        af.run(af.storage.load(cp.checkpoint_id)),
        af.run(af.storage.get_latest(workflow_name="wf")),
        af.run(af.storage.list_checkpoints(workflow_name="wf"))[0],
    ):
        assert got.state["nested"]["deep"] == "original"
        got.state["nested"]["deep"] = "mutated"
        got.metadata["m"].append("y")
    assert af.run(af.storage.load(cp.checkpoint_id)).metadata == {"m": ["x"]}


def test_listing_filters_by_workflow_and_get_latest_takes_the_latest(af: AF) -> None:
    """``list_checkpoints`` / ``list_checkpoint_ids`` hold a workflow's checkpoints only;
    ``get_latest`` is the latest by timestamp, None for a workflow without any."""
    first = checkpoint("wf-1", timestamp="2026-12-04T10:00:00+00:00")
    other = checkpoint("wf-2")
    later = checkpoint("wf-1", timestamp="2026-12-04T11:00:00+00:00")
    for cp in (first, other, later):
        af.run(af.storage.save(cp))
    ids = af.run(af.storage.list_checkpoint_ids(workflow_name="wf-1"))
    assert sorted(ids) == sorted([first.checkpoint_id, later.checkpoint_id])
    listed = af.run(af.storage.list_checkpoints(workflow_name="wf-1"))
    assert [c.checkpoint_id for c in listed] == [first.checkpoint_id, later.checkpoint_id]
    latest = af.run(af.storage.get_latest(workflow_name="wf-1"))
    assert latest is not None and latest.checkpoint_id == later.checkpoint_id
    assert af.run(af.storage.get_latest(workflow_name="unknown")) is None


def test_a_missing_checkpoint_raises_and_delete_removes_one(af: AF) -> None:
    """``load`` of an unknown id raises ``WorkflowCheckpointException``; ``delete`` says
    whether there was one, and a deleted one is neither loaded nor listed nor latest."""
    with pytest.raises(WorkflowCheckpointException):
        af.run(af.storage.load("nonexistent-id"))
    assert af.run(af.storage.delete("nonexistent-id")) is False
    one = checkpoint()
    two = checkpoint(previous_checkpoint_id=one.checkpoint_id, iteration_count=1)
    af.run(af.storage.save(one))
    af.run(af.storage.save(two))
    assert af.run(af.storage.delete(two.checkpoint_id)) is True
    assert af.run(af.storage.delete(two.checkpoint_id)) is False
    with pytest.raises(WorkflowCheckpointException):
        af.run(af.storage.load(two.checkpoint_id))
    assert af.run(af.storage.list_checkpoint_ids(workflow_name="wf")) == [one.checkpoint_id]
    latest = af.run(af.storage.get_latest(workflow_name="wf"))
    assert latest is not None and latest.checkpoint_id == one.checkpoint_id
    assert af.run(af.storage.delete(one.checkpoint_id)) is True
    assert af.run(af.storage.get_latest(workflow_name="wf")) is None
    assert [i.run_id for i in af.store.list_runs() if "af-chain" in i.run_id] == []


def test_a_chain_is_one_run_and_its_older_checkpoints_load(af: AF) -> None:
    """Successive checkpoints of a workflow run are the steps of one run of ours, named
    by their ids; an older one loads from the store's history as it was saved."""
    chain = [checkpoint(state={"log": []})]
    for n in range(1, 4):
        log = [*chain[-1].state["log"], f"entry {n}"]
        chain.append(
            checkpoint(
                state={"log": log},
                previous_checkpoint_id=chain[-1].checkpoint_id,
                iteration_count=n,
            )
        )
    for cp in chain:
        af.run(af.storage.save(cp))
    chains = list(af.store.list_runs(workflow="agent-framework:wf"))
    assert len(chains) == 1 and chains[0].step == 3
    head = af.store.load_head(chains[0].run_id)
    assert head.steps == tuple(cp.checkpoint_id for cp in chain)
    for cp in chain:
        assert af.run(af.storage.load(cp.checkpoint_id)).state == cp.state


def test_a_chain_ends_at_a_checkpoint_with_nothing_in_flight(af: AF) -> None:
    """A chain is waiting while its last checkpoint has a message in flight (or a
    pending request: test_agent_framework_retention.py), completed -- with its index
    runs -- at one that has neither; a checkpoint after that starts a chain of its own."""
    one = checkpoint(state={"v": 1})
    done = checkpoint(previous_checkpoint_id=one.checkpoint_id, messages={}, state={"v": 2})
    after = checkpoint(previous_checkpoint_id=done.checkpoint_id, state={"v": 3})
    af.run(af.storage.save(one))
    (chain,) = af.store.list_runs(workflow="agent-framework:wf")
    assert chain.status == "waiting"
    af.run(af.storage.save(done))
    af.run(af.storage.save(after))
    chains = sorted(af.store.list_runs(workflow="agent-framework:wf"), key=lambda i: -i.step)
    assert [(i.step, i.status) for i in chains] == [(1, "completed"), (0, "waiting")]
    indexes = {
        i.run_id: i.status for i in af.store.list_runs(workflow="agent-framework.checkpoint-index")
    }
    assert sorted(indexes.values()) == ["completed", "completed", "waiting"]
    for cp in (one, done, after):
        assert af.run(af.storage.load(cp.checkpoint_id)).state == cp.state


def test_a_checkpoint_is_written_once(af: AF) -> None:
    """A second save of a checkpoint id raises ``ConflictError``, and so does an append
    to a chain that another writer extended since this one read it (two processes resumed
    from the same checkpoint at once); what was stored stays."""
    cp = checkpoint(state={"v": 1})
    af.run(af.storage.save(cp))
    with pytest.raises(ds.ConflictError, match="written once"):
        af.run(af.storage.save(checkpoint(state={"v": 2}, checkpoint_id=cp.checkpoint_id)))
    other = DurableCheckpointStorage(af.storage.store)  # another process, same store
    af.run(other.save(checkpoint(previous_checkpoint_id=cp.checkpoint_id, state={"v": 3})))
    late = checkpoint(previous_checkpoint_id=cp.checkpoint_id, state={"v": 4})
    with pytest.raises(ds.ConflictError):
        af.run(af.storage.save(late))
    assert af.run(other.load(cp.checkpoint_id)).state == {"v": 1}
    with pytest.raises(WorkflowCheckpointException):
        af.run(other.load(late.checkpoint_id))
    assert len(af.run(other.list_checkpoint_ids(workflow_name="wf"))) == 2


def test_a_resume_from_an_older_checkpoint_starts_a_chain_of_its_own(af: AF) -> None:
    """A checkpoint after one that is not its chain's last (a resume from an older
    checkpoint) is kept in a chain of its own; both chains load whole."""
    one = checkpoint(state={"v": 1})
    two = checkpoint(previous_checkpoint_id=one.checkpoint_id, state={"v": 2})
    branch = checkpoint(previous_checkpoint_id=one.checkpoint_id, state={"v": 3})
    for cp in (one, two, branch):
        af.run(af.storage.save(cp))
    assert len(list(af.store.list_runs(workflow="agent-framework:wf"))) == 2
    for cp in (one, two, branch):
        assert af.run(af.storage.load(cp.checkpoint_id)).state == cp.state


def test_a_value_that_is_not_json_is_refused_before_anything_is_written(af: AF) -> None:
    """A value that cannot be kept as JSON (an unregistered class, a too large integer)
    raises ``InvalidStateError`` naming the checkpoint, the value's path and type -- not
    the value, which may be a secret; nothing is written."""
    bad = checkpoint(state={"ok": 1, "deep": {"list": [1, Opaque()]}})
    with pytest.raises(ds.InvalidStateError, match=r"state\['deep'\]\['list'\]\[1\].*Opaque") as e:
        af.run(af.storage.save(bad))
    assert bad.checkpoint_id in str(e.value)
    assert "object at" not in str(e.value)  # its type and place, never its repr (logs)
    with pytest.raises(ds.InvalidStateError, match=r"2\*\*53"):
        af.run(af.storage.save(checkpoint(metadata={"n": 2**60})))
    assert af.run(af.storage.list_checkpoint_ids(workflow_name="wf")) == []
    assert list(af.store.list_runs()) == []


class Crash(BaseException):
    """Stands for a crash inside the process (not an ``Exception``: nothing catches it)."""


def crash() -> None:
    raise Crash


def test_a_workflow_crashed_between_supersteps_resumes(
    af: AF, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Agent Framework workflow (an agent executor, a person's review) that crashed in
    the superstep after the agent's resumes from ``get_latest`` with a new storage (as a
    new process would) without asking the model again, stops at the person's request and
    finishes once it is answered (a SIGKILLed process: the process test)."""
    monkeypatch.setattr(af_workflows, "effects", lambda: None)
    monkeypatch.setattr(af_workflows.FakeChat, "calls", 0)
    monkeypatch.setattr(af_workflows, "AT_GATE", [crash])
    store = af.storage.store
    with pytest.raises(Crash):
        af.run(af_workflows.build(af_workflows.storage_on(store), "review").run("cats"))
    assert af_workflows.FakeChat.calls == 1
    af_workflows.AT_GATE.clear()

    fresh = af_workflows.storage_on(store)
    latest = af.run(fresh.get_latest(workflow_name="review"))
    assert latest is not None
    asked = af.run(af_workflows.build(fresh, "review").run(checkpoint_id=latest.checkpoint_id))
    (request,) = [e.request_id for e in asked.get_request_info_events()]
    latest = af.run(fresh.get_latest(workflow_name="review"))
    assert latest is not None and list(latest.pending_request_info_events) == [request]
    done = af.run(
        af_workflows.build(fresh, "review").run(
            checkpoint_id=latest.checkpoint_id, responses={request: "ok"}
        )
    )
    assert done.get_outputs() == ["draft: cats (ok)"]
    assert af_workflows.FakeChat.calls == 1


def test_a_superstep_that_changes_5_kb_of_1_mb_sends_about_5_kb(
    through: tuple[Any, Any, Any], loop: asyncio.AbstractEventLoop
) -> None:
    """On Cosmos DB (bytes counted by a proxy in front of the local server), the
    checkpoint after one that held 1 MB, 5 KB more, sends about those 5 KB -- not the
    megabyte that the first one sent."""
    facade, proxy, _ = through
    store = facade.aio if isinstance(facade, SyncFacade) else facade
    storage = DurableCheckpointStorage(store)

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    entries = [f"{n:04d}" + "x" * 5_000 for n in range(200)]
    agent = {"writer": {"full_conversation": entries[:100], "cache": []}}
    first = checkpoint(state={"log": entries[100:], "_executor_state": agent})
    # Equal values, other objects: as after a restore, or an executor that rebuilds them.
    same = json.loads(json.dumps(first.state))
    same["_executor_state"]["writer"]["full_conversation"].append("y" * 5_000)
    second = checkpoint(previous_checkpoint_id=first.checkpoint_id, state=same, iteration_count=1)

    def sent(cp: WorkflowCheckpoint) -> int:
        before = len(proxy.store_calls())
        run(storage.save(cp))
        return sum(e.sent for e in proxy.store_calls()[before:])

    assert sent(first) > 1_000_000
    assert 5_000 < sent(second) < 15_000
    assert run(DurableCheckpointStorage(store).load(second.checkpoint_id)).state == second.state


def test_an_encrypting_store_keeps_the_checkpoints_values_encrypted(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    """On a FileStore with AES-256-GCM on, a checkpoint's state and messages (a caller's
    Pydantic model among them) are not on disk in clear and load back equal; without the
    key, reading the run is a CodecError naming the key id."""
    keys = ds.Keyring("k1", {"k1": base64.b64encode(os.urandom(32)).decode()})
    path = tmp_path / "runs"
    storage = DurableCheckpointStorage(
        ds.FileStore(path, codec=ds.ValueCodec(keys=keys)), types=[Note, Tagged]
    )

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    cp = checkpoint(
        state={"topic": "secret-cats", "tagged": Tagged(type="private-review")},
        messages={"w": [WorkflowMessage(data=Note("hidden-note"), source_id="s", target_id="w")]},
    )
    run(storage.save(cp))
    on_disk = b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file())
    for clear in (b"secret-cats", b"private-review", b"hidden-note"):
        assert clear not in on_disk, clear
    loaded = run(storage.load(cp.checkpoint_id))
    assert loaded.state == cp.state and loaded.messages["w"][0].data == Note("hidden-note")
    plain = ds.FileStore(path)
    errors = []
    for info in plain.list_runs():  # the checkpoint's run, among the storage's runs
        try:
            plain.load(info.run_id)
        except ds.CodecError as exc:
            errors.append(str(exc))
    assert errors and all("k1" in e for e in errors)
