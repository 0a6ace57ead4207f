"""What ``DurableSaver`` adds to LangGraph's checkpointer contract (the contract itself:
test_langgraph_conformance.py; killed processes: test_langgraph_processes.py): time
travel as LangGraph documents it, a checkpoint written once, values refused before
anything is written, a superstep that costs what it changed, a thread deleted whole,
values over an item's size, and the async-only saver."""

from __future__ import annotations

import asyncio
import json
import operator
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

import durable_steps as ds
from durable_steps.integrations.langgraph import DurableSaver
from durable_steps.integrations.langgraph._layout import thread_run

from ..conftest import Backend


@pytest.fixture
def store(env: dict[str, str]) -> Iterator[ds.Store]:
    """A store that processes could share: the file store, and CosmosStore on the local
    Cosmos DB server."""
    opened = ds.store_from_env(env)
    yield opened
    opened.close()


def thread(**extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4()}", **extra}}


class Post(TypedDict, total=False):
    topic: str
    draft: str
    title: str
    log: Annotated[list[str], operator.add]


def post_graph(saver: DurableSaver) -> Any:
    builder = StateGraph(Post)
    builder.add_node("draft", lambda s: {"draft": f"about {s['topic']}", "log": ["draft"]})
    builder.add_node("title", lambda s: {"title": s["draft"].upper(), "log": ["title"]})
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "title")
    builder.add_edge("title", END)
    return builder.compile(checkpointer=saver)


def test_time_travel_replays_and_forks_from_an_earlier_checkpoint(store: ds.Store) -> None:
    """``get_state_history`` lists every checkpoint newest first; resuming from the one
    before ``title`` runs ``title`` again on the state then; ``update_state`` on it makes
    a fork whose resume sees the change -- and the original history is unchanged."""
    graph = post_graph(DurableSaver(store))
    config = thread()
    assert graph.invoke({"topic": "cats"}, config)["title"] == "ABOUT CATS"
    history = list(graph.get_state_history(config))
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]
    before_title = next(h for h in history if h.next == ("title",))
    assert before_title.values["draft"] == "about cats"

    replayed = graph.invoke(None, before_title.config)
    assert replayed["title"] == "ABOUT CATS"
    assert replayed["log"] == ["draft", "title"]

    forked = graph.update_state(before_title.config, {"draft": "about dogs"})
    assert graph.invoke(None, forked)["title"] == "ABOUT DOGS"
    assert graph.get_state(config).values["title"] == "ABOUT DOGS"  # the fork is latest
    original = graph.get_state(before_title.config)
    assert original.values["draft"] == "about cats"
    steps = [h.metadata["step"] for h in graph.get_state_history(config)]
    assert len(steps) > len(history)


def test_a_checkpoint_is_written_once(store: ds.Store) -> None:
    """A second put of a checkpoint id raises ConflictError and leaves the first."""
    saver, config = DurableSaver(store), thread(checkpoint_ns="")
    cp = empty_checkpoint()
    cp["channel_values"], cp["channel_versions"] = {"a": "first"}, {"a": 1}
    stored = saver.put(config, cp, {"step": 0}, {"a": 1})
    again = DurableSaver(store)  # another process's saver
    cp2 = {**cp, "channel_values": {"a": "second"}, "channel_versions": {"a": 2}}
    with pytest.raises(ds.ConflictError, match="written once"):
        again.put(config, cp2, {"step": 0}, {"a": 2})  # type: ignore[arg-type]
    found = again.get_tuple(stored)
    assert found is not None
    assert found.checkpoint["channel_values"] == {"a": "first"}


class Opaque:
    """Nothing LangGraph's serializer knows without pickle."""


def test_a_value_that_cannot_be_encoded_is_refused_before_anything_is_written(
    store: ds.Store,
) -> None:
    saver, config = DurableSaver(store), thread(checkpoint_ns="")
    cp = empty_checkpoint()
    cp["channel_values"], cp["channel_versions"] = {"ok": 1, "bad": Opaque()}, {"ok": 1, "bad": 1}
    with pytest.raises(ds.InvalidStateError, match=r"'bad'.*nothing was written"):
        saver.put(config, cp, {"step": 0}, {"ok": 1, "bad": 1})
    run = thread_run(config["configurable"]["thread_id"])
    assert store.load_head(run) is None
    assert saver.get_tuple(config) is None
    assert list(saver.list(config)) == []


def _counting(store: ds.Store) -> Callable[[], int]:
    """The bytes of JSON the saver hands the store's item writes (what goes over the wire
    to Cosmos DB, before the store's few fields)."""
    sent = [0]
    for name in ("append_item", "put_item"):
        write = getattr(store, name)

        def counted(run: str, kind: str, key: str, value: Any, _write: Any = write) -> None:
            sent[0] += len(json.dumps(value, separators=(",", ":")))
            _write(run, kind, key, value)

        setattr(store, name, counted)
    return lambda: sent[0]


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]


def chat_graph(saver: DurableSaver) -> Any:
    """One node that adds a 5,005-character message (its number first) per invocation."""
    builder = StateGraph(Chat)
    builder.add_node("say", lambda s: {"messages": [f"{len(s['messages']):05d}" + "x" * 5000]})
    builder.add_edge(START, "say")
    builder.add_edge("say", END)
    return builder.compile(checkpointer=saver)


def test_a_superstep_costs_the_channels_it_changed_not_the_state(store: ds.Store) -> None:
    """A list that grows 5 KB an invocation to 200 KB: each invocation sends the same
    few KB at the end as at the start (the appended item in base64, the checkpoints'
    records), not the list; a new saver (another process) reads the whole list back."""
    sent = _counting(store)
    graph = chat_graph(DurableSaver(store))
    config = thread()
    costs = []
    for _ in range(40):
        before = sent()
        graph.invoke({"messages": []}, config)
        costs.append(sent() - before)
    state = DurableSaver(store).get_tuple(config)
    assert state is not None
    messages = state.checkpoint["channel_values"]["messages"]
    assert len(messages) == 40
    assert sum(len(m) for m in messages) > 200_000
    assert messages[-1].startswith("00039")
    # Two supersteps an invocation (the input, then 'say'): one 5,005-character item
    # appended, two checkpoints. A sync graph saves checkpoints from a thread of its
    # own, which may begin a checkpoint's save before the task's write: that
    # checkpoint then carries the item itself (sent twice, never the list).
    late = sorted(costs[-10:])[5]
    assert late <= costs[1] * 1.05, costs
    assert max(costs) < costs[1] + 5_500, costs


def test_a_list_grown_by_a_task_sends_the_items_once(store: ds.Store) -> None:
    """The items a task appended are sent once, as its write: the next checkpoint refers
    to them (LangGraph sends both at once; the checkpoint waits for the write), and a
    new saver reads the list back from the references."""
    sent = _counting(store)
    graph = chat_graph(DurableSaver(store))
    config = thread()
    costs = []

    async def invocations() -> None:
        for _ in range(6):
            before = sent()
            await graph.ainvoke({"messages": []}, config, durability="sync")
            costs.append(sent() - before)

    asyncio.run(invocations())
    # The 5,005 characters once (as text, not base64), two checkpoints' records (the
    # input's superstep, then 'say'), the input's writes and the triggers: about 7.8 KB
    # (sent twice, in base64, it was over 15 KB).
    assert max(costs[1:]) < 9_000, costs
    state = DurableSaver(store).get_tuple(config)
    assert state is not None
    assert [m[:5] for m in state.checkpoint["channel_values"]["messages"]] == [
        f"{i:05d}" for i in range(6)
    ]


def test_values_over_an_item_are_kept_in_chunks(store: ds.Store) -> None:
    """A 700 KB value and a 400 KB write (several items each) come back whole."""
    saver, config = DurableSaver(store), thread(checkpoint_ns="")
    big = "y" * 700_000
    cp = empty_checkpoint()
    cp["channel_values"], cp["channel_versions"] = {"doc": big}, {"doc": 1}
    stored = saver.put(config, cp, {"step": 0}, {"doc": 1})
    saver.put_writes(stored, [("doc", "z" * 400_000)], "task-1")
    found = DurableSaver(store).get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"]["doc"] == big
    assert found.pending_writes == [("task-1", "doc", "z" * 400_000)]


def test_delete_thread_removes_everything_of_the_thread(store: ds.Store) -> None:
    saver = DurableSaver(store)
    graph = post_graph(saver)
    config, other = thread(), thread()
    graph.invoke({"topic": "cats"}, config)
    graph.invoke({"topic": "dogs"}, other)
    run = thread_run(config["configurable"]["thread_id"])
    assert store.load_head(run) is not None
    saver.delete_thread(config["configurable"]["thread_id"])
    assert store.load_head(run) is None
    assert store.read_items(run, "lg.cp.") == []
    assert list(saver.list(config)) == []
    assert graph.get_state(other).values["title"] == "ABOUT DOGS"


@pytest.mark.parametrize("backend", ["memory-async", "cosmos-local-async"], indirect=True)
def test_on_an_async_store_the_blocking_methods_are_refused(
    backend: Backend, loop: asyncio.AbstractEventLoop
) -> None:
    """A saver on an AsyncStore serves ainvoke; invoke says what to do."""
    saver = DurableSaver(backend.store.aio)
    graph = post_graph(saver)
    with pytest.raises(TypeError, match="ainvoke"):
        graph.invoke({"topic": "cats"}, thread())
    config = thread()
    done = asyncio.run_coroutine_threadsafe(graph.ainvoke({"topic": "cats"}, config), loop)
    assert done.result(60)["title"] == "ABOUT CATS"


def test_a_thread_is_listed_and_expires_with_the_stores_finished_ttl(tmp_path: Path) -> None:
    """A thread's run is a completed run of workflow ``langgraph``: ``list(None)`` finds
    every thread, and the store's retention removes a thread idle past ``finished_ttl``
    with everything it holds."""
    store = ds.FileStore(tmp_path / "store", finished_ttl=60)
    saver = DurableSaver(store)
    graph = post_graph(saver)
    first, second = thread(), thread()
    graph.invoke({"topic": "cats"}, first)
    graph.invoke({"topic": "dogs"}, second)
    listed = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    assert listed == {first["configurable"]["thread_id"], second["configurable"]["thread_id"]}
    assert store.delete_expired(now=time.time() + 30) == 0
    assert store.delete_expired(now=time.time() + 3600) == 2
    assert DurableSaver(store).get_tuple(first) is None
    assert list(DurableSaver(store).list(None)) == []


def test_prune_and_delete_for_runs_keep_what_the_staying_checkpoints_need(
    store: ds.Store,
) -> None:
    """A list that grew by the tasks' writes is stored as references to them: removing
    the checkpoints that hold those writes (``delete_for_runs`` of the first run, then
    ``prune``) leaves the staying checkpoints reading the whole list, and the thread
    goes on from them, in this saver and in a new one (another process)."""
    saver = DurableSaver(store)
    graph = post_graph(saver)
    config = thread()
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    graph.invoke({"topic": "a"}, {**config, "metadata": {"run_id": first}})
    graph.invoke({"topic": "b"}, {**config, "metadata": {"run_id": second}})
    log = ["draft", "title", "draft", "title"]
    assert graph.get_state(config).values["log"] == log
    heads = store.read_items(thread_run(config["configurable"]["thread_id"]), "lg.cp.")
    assert any("log" in h.value.get("xs", {}) for h in heads)  # referred to, not sent again
    by_run = [t.metadata.get("run_id") for t in saver.list(config)]
    assert first in by_run and second in by_run

    saver.delete_for_runs([first])
    assert {t.metadata.get("run_id") for t in saver.list(config)} == {second}
    assert post_graph(DurableSaver(store)).get_state(config).values["log"] == log

    saver.prune([config["configurable"]["thread_id"]])
    assert len(list(DurableSaver(store).list(config))) == 1
    # Small values kept in the records of checkpoints now gone were written whole first.
    assert post_graph(DurableSaver(store)).get_state(config).values == {
        "topic": "b",
        "draft": "about b",
        "title": "ABOUT B",
        "log": log,
    }
    graph.invoke({"topic": "c"}, config)
    assert post_graph(DurableSaver(store)).get_state(config).values["log"] == [*log, *log[:2]]
