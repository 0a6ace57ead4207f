"""OpenAI Agents SDK agents for the integration's tests (a scripted fake model: no
network), and the process that runs them inside a step so that a test can kill it.

    python -m tests.integrations.openai_runs DRIVER SCENARIO RUN_ID...   (from the repo)

(``-m``, not the file's path: run as a file, this directory would come first on
``sys.path`` and ``import agents`` would find the Pydantic AI tests' ``agents.py``.)

DRIVER    sync   ``Runner.run_sync`` in a ``run()`` step
          async  ``await Runner.run`` in a ``run_async()`` step (async store)
SCENARIO  tools    one agent: two model responses ask for two tools each, run at once
                   (one tool fails, and the model is told), then it answers: 3 model
                   responses, 4 tool calls
          handoff  a triage agent with an input guardrail hands off (an ``on_handoff``
                   callback) to a weather agent with an output guardrail (its model by
                   name, from the run's provider), which calls a tool and answers
          streamed ``tools`` streamed: ``Runner.run_streamed`` in a ``run_async()`` step
                   (driver ``async``), the model streaming like the Responses API, each
                   word of its answer a text delta and a side effect (``model.delta``)

Every model response, tool call, handoff and guardrail that runs appends its call name to
``$SIDE_EFFECTS/RUN_ID.log``. With ``KILL_AT=k1,k2,...`` (one k per run) each run is made
in a process of its own, forked from this one once the SDK is imported (one import of the
SDK, ~2 s, for all the runs), that SIGKILLs itself at its k-th side effect (from 0): before
it runs (``KILL_WHEN=before``) or after it ran, before its result is recorded (``after``).
This process waits for them all, prints whether each was killed (a JSON list), waits for a
line on stdin (the test looks at the store meanwhile), then resumes them all -- it never
ran them itself -- as it runs them without ``KILL_AT``: here, one after the other, their
states printed as JSON, ``{RUN_ID: state}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    Model,
    ModelProvider,
    ModelResponse,
    RunConfig,
    RunContextWrapper,
    Runner,
    Usage,
    function_tool,
    handoff,
    input_guardrail,
    output_guardrail,
    set_tracing_disabled,
)
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

import durable_steps as ds
import durable_steps.integrations.openai_agents

set_tracing_disabled(True)  # no OpenAI account here: nothing to export traces to


class Effects:
    """Side effects, counted (and logged to a file per run in ``log``); ``trip`` runs at
    the k-th one."""

    def __init__(
        self,
        log: Path | None = None,
        at: int | None = None,
        when: str = "before",
        trip: Callable[[], None] | None = None,
    ) -> None:
        self.log, self.at, self.when, self.trip = log, at, when, trip
        self.seen: list[str] = []

    def __call__(self, name: str) -> None:
        n = len(self.seen)
        if n == self.at and self.when == "before" and self.trip:
            self.trip()
        self.seen.append(name)
        if self.log is not None:
            with (self.log / f"{ds.current_step().run_id}.log").open("a") as f:
                f.write(name + "\n")
                f.flush()
                os.fsync(f.fileno())
        if n == self.at and self.when == "after" and self.trip:
            self.trip()


EFFECTS = Effects()
"""Where this process's side effects go (set up by main; replaced by tests)."""


def effect(name: str) -> None:
    EFFECTS(name)


# -- a scripted model ----------------------------------------------------------------------


def call(name: str, arguments: dict[str, Any], n: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call",
        name=name,
        arguments=json.dumps(arguments),
        call_id=f"call-{n}",
        id=f"fc-{n}",
        status="completed",
    )


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message",
        id="msg-1",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def outputs(items: Any) -> list[Any]:
    """The tool outputs the model has been sent so far."""
    if isinstance(items, str):
        return []
    kinds = ("function_call_output", "custom_tool_call_output")
    return [i["output"] for i in items if i.get("type") in kinds]


Script = Callable[[list[Any]], list[Any]]


class Scripted(Model):
    """A model whose response is a function of what it is sent (so a resumed run that
    sends the same gets the same), counted as a side effect."""

    def __init__(self, script: Script) -> None:
        self.script = script

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        effect("model.get_response")
        given = kwargs["input"] if "input" in kwargs else args[1]
        output = self.script(outputs(given))
        return ModelResponse(
            output=output, usage=Usage(requests=1, input_tokens=7), response_id="r"
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests' model does not stream")


class Streamed(Scripted):
    """The scripted model, streaming as the Responses API does: each word of a message a
    text delta (each a side effect, so a test can kill mid-stream), each item done, then
    the completed response."""

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # an async generator
        effect("model.get_response")
        given = kwargs["input"] if "input" in kwargs else args[1]
        output = self.script(outputs(given))
        for i, item in enumerate(output):
            if isinstance(item, ResponseOutputMessage):
                for word in item.content[0].text.split(" "):  # type: ignore[union-attr]
                    effect("model.delta")
                    yield ResponseTextDeltaEvent.model_construct(
                        type="response.output_text.delta", delta=word + " ", item_id=item.id,
                        output_index=i, content_index=0, sequence_number=i, logprobs=[],
                    )  # fmt: skip
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=item, output_index=i, sequence_number=i
            )
        usage = ResponseUsage.model_construct(
            input_tokens=7, output_tokens=3, total_tokens=10,
            input_tokens_details={"cached_tokens": 0},
            output_tokens_details={"reasoning_tokens": 0},
        )  # fmt: skip
        response = Response.model_construct(
            id="r", created_at=0.0, model="scripted", object="response", output=output,
            parallel_tool_calls=True, tool_choice="auto", tools=[], usage=usage,
        )  # fmt: skip
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(output)
        )


class Provider(ModelProvider):
    """Scripted models by name, as a run config's ``model_provider``."""

    def __init__(self, scripts: dict[str, Script]) -> None:
        self.scripts = scripts

    def get_model(self, model_name: str | None) -> Model:
        return Scripted(self.scripts[model_name or ""])


# -- tools ---------------------------------------------------------------------------------


def _failed(ctx: RunContextWrapper[Any], error: Exception) -> str:
    return f"error: {error}"


async def _add(a: int, b: int) -> int:
    """Add two numbers."""
    effect("tool.add")
    await asyncio.sleep(0.001 * a if a > 0 else 0)  # the other tool of the turn goes first
    if a < 0:
        raise ValueError("a must be >= 0")
    return a + b


add = function_tool(_add, name_override="add", failure_error_function=_failed)


def add_renamed() -> Any:
    """``add`` under another name (as if renamed between two runs of a step)."""
    return function_tool(_add, name_override="plus", failure_error_function=_failed)


@function_tool
def get_weather(city: str) -> dict[str, Any]:  # a sync tool: the SDK runs it in a thread
    """The weather in a city."""
    effect("tool.get_weather")
    return {"city": city, "temp_c": 21.5}


# -- scenario "tools": 3 model responses, 4 tool calls -------------------------------------


def tools_script(seen: list[Any]) -> list[Any]:
    if not seen:
        return [call("add", {"a": 1, "b": 2}, 1), call("get_weather", {"city": "Paris"}, 2)]
    if len(seen) == 2:
        return [call("add", {"a": -1, "b": 2}, 3), call("add", {"a": 40, "b": 2}, 4)]
    return [say(f"done: {json.dumps(seen)}")]


TOOLS_EFFECTS = [
    "model.get_response",
    "tool.add",
    "tool.get_weather",
    "model.get_response",
    "tool.add",
    "tool.add",
    "model.get_response",
]
TOOLS_OUTPUT = (
    'done: ["3", "{\'city\': \'Paris\', \'temp_c\': 21.5}", "error: a must be >= 0", "42"]'
)


def tools_agent() -> Agent[Any]:
    return Agent(name="calc", model=Scripted(tools_script), tools=[add, get_weather])


def streamed_agent() -> Agent[Any]:
    return Agent(name="calc", model=Streamed(tools_script), tools=[add, get_weather])


# -- scenario "handoff": guardrails, a handoff, a model by name ----------------------------


@input_guardrail
async def polite(ctx: RunContextWrapper[Any], agent: Agent[Any], given: Any) -> Any:
    effect("guardrail.input.polite")
    return GuardrailFunctionOutput(output_info={"checked": "input"}, tripwire_triggered=False)


@output_guardrail
async def no_secrets(ctx: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> Any:
    effect("guardrail.output.no_secrets")
    return GuardrailFunctionOutput(output_info={"length": len(output)}, tripwire_triggered=False)


def triage_script(seen: list[Any]) -> list[Any]:
    return [call("transfer_to_weather", {}, 1)]


def weather_script(seen: list[Any]) -> list[Any]:
    if len(seen) == 1:  # the handoff's own output
        return [call("get_weather", {"city": "Rome"}, 2)]
    return [say(f"weather: {seen[-1]}")]


HANDOFF_EFFECTS = [
    "guardrail.input.polite",
    "model.get_response",
    "handoff.transfer_to_weather",
    "model.get_response",
    "tool.get_weather",
    "model.get_response",
    "guardrail.output.no_secrets",
]
HANDOFF_OUTPUT = "weather: {'city': 'Rome', 'temp_c': 21.5}"


def handoff_agent() -> Agent[Any]:
    weather = Agent(
        name="weather", model="weather", tools=[get_weather], output_guardrails=[no_secrets]
    )
    return Agent(
        name="triage",
        model=Scripted(triage_script),
        input_guardrails=[polite],
        handoffs=[handoff(weather, on_handoff=lambda ctx: effect("handoff.transfer_to_weather"))],
    )


def handoff_config() -> RunConfig:
    return RunConfig(model_provider=Provider({"weather": weather_script}))


SCENARIOS: dict[str, tuple[Callable[[], Agent[Any]], Callable[[], RunConfig | None]]] = {
    "tools": (tools_agent, lambda: None),
    "handoff": (handoff_agent, handoff_config),
    "streamed": (streamed_agent, lambda: None),
}
EXPECTED = {"tools": TOOLS_EFFECTS, "handoff": HANDOFF_EFFECTS}
OUTPUT = {"tools": TOOLS_OUTPUT, "handoff": HANDOFF_OUTPUT}


def kept(calls: Any) -> Counter[str]:
    """The side effects of the calls a checkpoint recorded: what must not run again (each
    side effect is named as its call)."""
    return Counter(r["name"] for r in calls if "result" in r)


def settled(done: list[str]) -> Counter[str]:
    """Of the side effects ``done`` before an interruption (in the order they happened),
    those whose calls the store must have recorded: every one up to the last model
    response -- the SDK asks the model only once the calls before it have returned, and a
    call returns once it is recorded; and that response returned, since ``done`` goes on
    after it or the interruption came at the next call. (Calls after it may have been
    recorded too: guardrails and tools run at once, so which is undecided.)"""
    models = [i for i, name in enumerate(done) if name == "model.get_response"]
    return Counter(done[: models[-1] + 1] if models else [])


# -- steps ---------------------------------------------------------------------------------


DELTAS: list[str] = []
"""The text deltas the caller of a streamed run got, as they came."""


def result(r: Any) -> dict[str, Any]:
    return {"output": r.final_output, "agent": r.last_agent.name}


def sync_step(scenario: str) -> ds.Step:
    agent, config = SCENARIOS[scenario]
    return ds.Step(
        "agent", lambda state: result(Runner.run_sync(agent(), "go", run_config=config()))
    )


def async_step(scenario: str) -> ds.Step:
    agent, config = SCENARIOS[scenario]

    async def fn(state: Any) -> dict[str, Any]:
        if scenario == "streamed":
            streamed = Runner.run_streamed(agent(), "go", run_config=config())
            async for event in streamed.stream_events():
                if event.type == "raw_response_event" and event.data.type.endswith(".delta"):
                    DELTAS.append(event.data.delta)
            return {**result(streamed), "deltas": len(DELTAS)}
        return result(await Runner.run(agent(), "go", run_config=config()))

    return ds.Step("agent", fn)


def run_all(driver: str, scenario: str, run_ids: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if driver == "async":

        async def go() -> None:
            async with ds.async_store_from_env() as store:
                for run_id in run_ids:
                    out[run_id] = await ds.run_async(run_id, [async_step(scenario)], store)

        asyncio.run(go())
    else:
        with ds.store_from_env() as store:
            for run_id in run_ids:
                out[run_id] = ds.run(run_id, [sync_step(scenario)], store)
    return out


def main() -> None:
    driver, scenario, run_ids = sys.argv[1], sys.argv[2], sys.argv[3:]
    EFFECTS.log = Path(os.environ["SIDE_EFFECTS"])
    EFFECTS.when = os.environ.get("KILL_WHEN", "before")
    EFFECTS.trip = lambda: os.kill(os.getpid(), signal.SIGKILL)
    at = os.environ.get("KILL_AT")
    if at is None:
        print(json.dumps(run_all(driver, scenario, run_ids)))
        return
    # Forked with no thread but this one (no store opened yet): nothing held to inherit.
    assert threading.active_count() == 1, threading.enumerate()
    children = []
    for run_id, k in zip(run_ids, at.split(","), strict=True):
        pid = os.fork()
        if pid == 0:
            EFFECTS.at = int(k)
            try:
                run_all(driver, scenario, [run_id])
            finally:
                os._exit(3)  # not killed: the test sees it
        children.append(pid)
    killed = []
    for pid in children:
        _, status = os.waitpid(pid, 0)
        killed.append(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
    print(json.dumps(killed), flush=True)
    sys.stdin.readline()  # the test has looked at what the store kept: resume them all
    EFFECTS.at = None
    print(json.dumps(run_all(driver, scenario, run_ids)))


if __name__ == "__main__":
    main()
