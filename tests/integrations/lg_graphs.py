"""LangGraph graphs for the tests of ``durable_steps.integrations.langgraph``, checkpointed
by ``DurableSaver`` on the store ``store_from_env`` opens:

- ``agent``: a tool-calling agent -- a small fake chat model (no network) that answers a
  question with two parallel tool calls (``weather`` and ``stock``, each a task of its
  own through ``Send``), then with an answer made of their results;
- ``review``: ``draft`` writes a draft, ``review`` asks a person (``interrupt()``),
  ``publish`` publishes what was approved.

Every model call, tool and node appends a line to ``SIDE_EFFECTS/<thread>.log`` (with
fsync) as it starts and when it is done: the side-effect log the tests count.

Run as a process (``python -m tests.integrations.lg_graphs MODE``), with ``LG_THREADS``
a prefix of thread ids:

- ``crash``: three graphs at once, each in a thread, each stopped where the test kills
  the process: ``<prefix>-node`` (the agent, its ``stock`` tool blocked after
  ``weather`` finished: inside a node of a superstep), ``<prefix>-between`` (the agent,
  blocked right after the checkpoint of its first superstep was stored: between
  supersteps), ``<prefix>-review`` (stopped at the person, answered ``ok``, then blocked
  inside ``publish``);
- ``resume``: each of the three threads resumed (``invoke(None)``): prints their
  results as one JSON line.

The graphs run with ``durability="sync"``: a superstep's checkpoint is stored before
the next superstep starts (LangGraph's durable mode).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

import durable_steps as ds
from durable_steps.integrations.langgraph import DurableSaver

FOREVER = threading.Event()


def effect(config: RunnableConfig, line: str) -> None:
    """One line of the thread's side-effect log, durable before the work goes on."""
    thread = config["configurable"]["thread_id"]
    with open(Path(os.environ["SIDE_EFFECTS"]) / f"{thread}.log", "a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def lines(thread: str) -> list[str]:
    path = Path(os.environ["SIDE_EFFECTS"]) / f"{thread}.log"
    return path.read_text().splitlines() if path.exists() else []


def block_if(config: RunnableConfig, where: str) -> None:
    if os.environ.get("LG_MODE") == "crash" and config["configurable"].get("block") == where:
        effect(config, f"blocked:{where}")
        FOREVER.wait()


# -- the agent ---------------------------------------------------------------------------


class FakeChatModel(BaseChatModel):
    """A chat model that answers by what it is given: a question gets two tool calls at
    once, tool results get the answer. Deterministic, so a model call made again would
    show in the log, not in a different answer."""

    @property
    def _llm_type(self) -> str:
        return "fake-tools"

    def _generate(
        self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        results = [m.content for m in messages if isinstance(m, ToolMessage)]
        if results:
            message = AIMessage(content="answer: " + "; ".join(sorted(map(str, results))))
        else:
            message = AIMessage(
                content="",
                tool_calls=[
                    {"name": "weather", "args": {"city": "Oslo"}, "id": "call_weather"},
                    {"name": "stock", "args": {"symbol": "MSFT"}, "id": "call_stock"},
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def agent(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    effect(config, "model")
    return {"messages": [FakeChatModel().invoke(state["messages"])]}


def route(state: AgentState) -> Any:
    last = state["messages"][-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        return [Send("tool", call) for call in last.tool_calls]
    return END


TOOLS = {
    "weather": lambda args: f"{args['city']}: 3 C",
    "stock": lambda args: f"{args['symbol']}: 512",
}


def tool(call: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
    name = call["name"]
    effect(config, f"{name}:start")
    if name == "stock" and config["configurable"].get("block") == "stock":
        # Inside the superstep: the weather tool, a task of its own, has finished first.
        while "weather:done" not in lines(config["configurable"]["thread_id"]):
            time.sleep(0.01)
        block_if(config, "stock")
    result = TOOLS[name](call["args"])
    effect(config, f"{name}:done")
    return {"messages": [ToolMessage(content=result, tool_call_id=call["id"], name=name)]}


def agent_graph(saver: DurableSaver) -> Any:
    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tool", tool)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tool", END])
    builder.add_edge("tool", "agent")
    return builder.compile(checkpointer=saver)


# -- the person's review -------------------------------------------------------------------


class ReviewState(TypedDict, total=False):
    topic: str
    draft: str
    verdict: str
    published: str


def draft(state: ReviewState, config: RunnableConfig) -> dict[str, Any]:
    effect(config, "draft")
    return {"draft": f"a post about {state['topic']}"}


def review(state: ReviewState, config: RunnableConfig) -> dict[str, Any]:
    verdict = interrupt({"draft": state["draft"]})  # the person's answer on resume
    effect(config, f"review:{verdict}")
    return {"verdict": verdict}


def publish(state: ReviewState, config: RunnableConfig) -> dict[str, Any]:
    effect(config, "publish:start")
    block_if(config, "publish")
    effect(config, "publish:done")
    return {"published": f"{state['draft']} ({state['verdict']})"}


def review_graph(saver: DurableSaver) -> Any:
    builder = StateGraph(ReviewState)
    for name, node in (("draft", draft), ("review", review), ("publish", publish)):
        builder.add_node(name, node)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=saver)


class BlockingSaver(DurableSaver):
    """Blocks its thread right after the checkpoint of the superstep ``block_after`` of
    a thread configured so is stored: the process is killed between supersteps."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        effect(config, f"put:{metadata.get('step')}")
        if os.environ.get("LG_MODE") == "crash" and config["configurable"].get(
            "block_after"
        ) == metadata.get("step"):
            effect(config, "blocked:between")
            FOREVER.wait()
        return stored


def config(thread: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, **extra}}


def crash(saver: DurableSaver, prefix: str) -> None:
    agents, reviews = agent_graph(saver), review_graph(saver)
    question = {"messages": [HumanMessage("weather in Oslo, and MSFT?")]}

    def review_then_publish() -> None:
        cfg = config(f"{prefix}-review", block="publish")
        reviews.invoke({"topic": "cats"}, cfg, durability="sync")  # stops at the person
        reviews.invoke(Command(resume="ok"), cfg, durability="sync")

    runs = [
        lambda: agents.invoke(question, config(f"{prefix}-node", block="stock"), durability="sync"),
        lambda: agents.invoke(
            question, config(f"{prefix}-between", block_after=0), durability="sync"
        ),
        review_then_publish,
    ]
    for run in runs:
        threading.Thread(target=run, daemon=True).start()
    FOREVER.wait()


def resume(saver: DurableSaver, prefix: str) -> dict[str, Any]:
    agents, reviews = agent_graph(saver), review_graph(saver)
    out: dict[str, Any] = {}
    for kind in ("node", "between"):
        state = agents.invoke(None, config(f"{prefix}-{kind}"), durability="sync")
        out[kind] = [m.content for m in state["messages"]]
    out["review"] = reviews.invoke(None, config(f"{prefix}-review"), durability="sync")
    return out


def main() -> None:
    mode, prefix = sys.argv[1], os.environ["LG_THREADS"]
    os.environ["LG_MODE"] = mode
    saver = BlockingSaver(ds.store_from_env())
    if mode == "crash":
        crash(saver, prefix)
    else:
        print(json.dumps(resume(saver, prefix)), flush=True)


if __name__ == "__main__":
    main()
