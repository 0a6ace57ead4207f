"""A step whose agent runs exercise every kind of value the OpenAI Agents integration
records (model responses, plain and structured tool outputs, a tuple sent as its str,
a handoff, input, output and tool guardrails), and the recorder of its journal.

    python -m tests.integrations.openai_recorded tests/integrations/recorded/openai_agents.json

writes the calls one run of the step recorded (its checkpoint's ``calls``, as stored).
The file in ``recorded/`` was written by the code before values went through
``runner/typed.py`` (main at bb0976d): ``test_openai_agents_recorded`` replays it with
today's code, so runs recorded then still resume.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolOutputImage,
    ToolOutputText,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)

import durable_steps as ds
from durable_steps.backend import to_document

from . import openai_runs as runs


@function_tool
def picture() -> list[Any]:
    """A picture and its caption."""
    runs.effect("tool.picture")
    return [ToolOutputText(text="a cat"), ToolOutputImage(image_url="https://x/cat.png")]


@function_tool
def pair() -> tuple[int, int]:
    """Two numbers."""
    runs.effect("tool.pair")
    return (1, 2)


@tool_input_guardrail
def args_ok(data: Any) -> ToolGuardrailFunctionOutput:
    runs.effect("guardrail.tool_input.args_ok")
    return ToolGuardrailFunctionOutput.allow(output_info={"args": "fine"})


@tool_output_guardrail
def no_paris(data: Any) -> ToolGuardrailFunctionOutput:
    runs.effect("guardrail.tool_output.no_paris")
    if "Paris" in str(data.output):
        return ToolGuardrailFunctionOutput.reject_content("no Paris here")
    return ToolGuardrailFunctionOutput.allow()


def _scripted(*turns: list[Any]) -> runs.Scripted:
    return runs.Scripted(lambda seen: turns[min(len(seen), len(turns) - 1)])


def agent_runs() -> list[Any]:
    """Four agent runs, one after the other; what each sent its model last (its input
    list) and its final output."""
    pics = Agent(
        name="pics",
        model=_scripted(
            [runs.call("picture", {}, 1), runs.call("pair", {}, 2)], [runs.say("seen")]
        ),
        tools=[picture, pair],
    )
    weather = copy.copy(runs.get_weather)
    weather.tool_input_guardrails, weather.tool_output_guardrails = [args_ok], [no_paris]
    guarded = Agent(name="weather", tools=[weather])
    guarded_model = _scripted([runs.call("get_weather", {"city": "Paris"}, 1)], [runs.say("told")])
    done = [
        Runner.run_sync(runs.tools_agent(), "go"),
        Runner.run_sync(runs.handoff_agent(), "go", run_config=runs.handoff_config()),
        Runner.run_sync(pics, "go"),
        Runner.run_sync(guarded, "go", run_config=RunConfig(model=guarded_model)),
    ]
    return [[r.to_input_list(), r.final_output] for r in done]


def main(path: str) -> None:
    store, run_id = ds.MemoryStore(), "recorded"

    def step(state: Any) -> dict[str, Any]:
        agent_runs()
        raise RuntimeError("recorded")  # the step fails: its calls stay in the checkpoint

    with contextlib.suppress(RuntimeError):
        ds.run(run_id, [ds.Step("agents", step)], store)
    cp = store.load(run_id)
    assert cp is not None
    Path(path).write_text(json.dumps(to_document(cp)["calls"], indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
