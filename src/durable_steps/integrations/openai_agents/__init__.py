"""Durable OpenAI Agents SDK runs: every model response and tool call a durable call.

    from agents import Agent, Runner
    import durable_steps.integrations.openai_agents  # Runner: durable inside steps

    agent = Agent(name="support", model="gpt-5.2", tools=[search_kb])

    def answer(state):                                  # a run() step
        return {"answer": Runner.run_sync(agent, state["question"]).final_output}

Inside a step, run by ``run`` (``Runner.run_sync``, or ``await Runner.run`` in a
coroutine of the step) or by ``run_async`` (``await Runner.run``), each model response,
tool call, handoff and guardrail of the agent run is one ``call_async`` of the step:
recorded as it returns, so a step that runs again after a crash replays the finished
ones from its journal and goes on from the first unfinished one. Outside a step, and
inside a call's function (an agent used as a tool, a guardrail that runs an agent:
there the enclosing call is the durable unit), the runner changes nothing.

How. Importing the module installs ``DurableRunner`` as the SDK's default agent runner
(``agents.run.set_default_agent_runner``: the seam Temporal's integration uses), chained
to the runner that was the default. Inside a step it runs durable copies of the caller's
agents (``_durable.py``, made per run; the caller's objects are untouched, and the result
names them, not their copies): the model of each, and the run config's model provider,
wrapped so that ``get_response`` is a call; the tools an agent has for a turn (its own,
its MCP servers', those enabled) copied with ``on_invoke_tool`` a call (function and
custom tools) and an approval callback a call (hosted MCP's ``on_approval_request``, custom
tools' ``on_approval``); each guardrail function a call; each ``Handoff``'s
``on_invoke_handoff`` a call, and the agent it hands off to copied in turn. The SDK runs
guardrails and the tools of one response at once, each in a task of its own: each task
replays its own calls (``track_tasks()`` as the run starts names them under ``run_sync``
too), so they may finish in any order.

Values are JSON, never pickled, and a run sees the same values live and replayed: each
call declares the type it records (``call_async(..., returns=T)``, ``_recorded.py``), so
``runner/typed.py`` records it as JSON and returns it validated as that type, and the
store's codec (compression, encryption) applies to it like to any call's result. A
``ModelResponse`` as the SDK's dataclass, each output item by its own Pydantic JSON, only
the fields set (what the model is sent next is the same); a tool's result as it is when
it is plain JSON (or the SDK's ``ToolOutputText``/``Image``/``FileContent``), else as what
the SDK would send the model (its ``str``, or its JSON when the tool declares an output
schema); a guardrail's output as the SDK's own type, its ``output_info`` in JSON.

Call names (what ``StepMismatchError`` compares when a step runs again):
``model.get_response``, ``tool.NAME``, ``approval.NAME`` (a hosted MCP server's label),
``handoff.TOOL_NAME``, ``guardrail.input.NAME``, ``guardrail.output.NAME``,
``guardrail.tool_input.NAME``, ``guardrail.tool_output.NAME``.

``Runner.run_streamed`` inside a step (in a coroutine of it: the SDK streams on the running
loop) streams live and durable (``_live.py``): the caller gets the model's events as they
come, the run stream (``DurableRunner(stream="model")``) one chunk per text delta and per
finished tool call, each response is recorded as one ``model.get_response`` call when
complete (replayed as one ``response.completed`` event), and a crash mid-stream leaves a
``StreamReset`` before the chunks of the response asked again.

Refused inside a step (a ``TypeError`` or ``RuntimeError`` saying what to do), because
their work would run again unseen or be paired with the wrong record: a ``session``; a
run resumed from a ``RunState``; tools that act on this machine outside a function
(``ComputerTool``, ``LocalShellTool``, a local ``ShellTool``, ``ApplyPatchTool``);
runner-managed model retries (``ModelSettings.retry``).
"""

from __future__ import annotations

from durable_steps import MissingExtraError

from .._common import check_release

INSTALL = "pip install 'durable-steps[openai-agents]'"
SUPPORTED = (0, 20), (0, 25)
"""The openai-agents versions this works with and is tested on: >=0.20,<0.25 (the
``[openai-agents]`` extra pins the same range)."""

try:
    from agents import __version__ as OPENAI_AGENTS_VERSION
except ImportError as exc:
    raise MissingExtraError(
        f"durable_steps.integrations.openai_agents needs the OpenAI Agents SDK "
        f"(openai-agents>=0.20,<0.25): {INSTALL} (missing: {exc.name or exc})"
    ) from exc


check_release("openai_agents", "openai-agents", OPENAI_AGENTS_VERSION, SUPPORTED, INSTALL)

from ._runner import DurableRunner, install  # noqa: E402 - only once the version is known

__all__ = ["DurableRunner", "install"]

install()
