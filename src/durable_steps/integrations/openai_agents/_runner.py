"""The agent runner that makes a run inside a step durable, and its installation as the
SDK's default (the package's top tells the design)."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import RunState
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner

from durable_steps import current_step, running_steps, track_tasks

from .._common import nth_run
from ._durable import RUN_KEYS, Copies, RunKeys, in_step
from ._live import STREAM


class DurableRunner(AgentRunner):
    """The SDK's agent runner, durable inside a durable-steps step (see the package's top).

    Importing ``durable_steps.integrations.openai_agents`` installs one as the SDK's default
    runner, so ``Runner.run``, ``Runner.run_sync`` and ``Runner.run_streamed`` go through
    it. ``inner`` (default: the SDK's own runner) runs the agents; outside a step every run
    goes to it unchanged.
    """

    def __init__(self, inner: AgentRunner | None = None, *, stream: str | None = "model") -> None:
        self.inner = inner if inner is not None else AgentRunner()
        self.stream = stream
        """The run stream a ``run_streamed`` inside a step writes its chunks to (one per
        text delta and per finished tool call; None: none)."""

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        if in_step() is None:
            _not_in_a_stray_thread()
            return await self.inner.run(starting_agent, input, **kwargs)
        # The run's own task, before the SDK creates the tasks that run guardrails, model
        # requests and tools: name them, so that each replays its own calls (needed under
        # run_sync in a run() step; run_async() names them already).
        track_tasks()
        _refuse(kwargs.get("session"), input)
        copies = Copies()
        kwargs["run_config"], made = copies.run_config(kwargs.get("run_config"))
        keys = RUN_KEYS.set(_run_keys())
        try:
            result = await self.inner.run(copies.agent(starting_agent), input, **kwargs)
        finally:
            RUN_KEYS.reset(keys)
            if made is not None:  # the provider the SDK would have made and closed
                await made.aclose()
        return copies.published(result)

    def run_sync(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        if in_step() is None:
            _not_in_a_stray_thread()
            return self.inner.run_sync(starting_agent, input, **kwargs)
        return super().run_sync(starting_agent, input, **kwargs)  # its event loop runs run()

    def run_streamed(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        if in_step() is None:
            _not_in_a_stray_thread()
            return self.inner.run_streamed(starting_agent, input, **kwargs)
        track_tasks()  # before the SDK creates the run's task (see run)
        _refuse(kwargs.get("session"), input)
        copies = Copies()
        kwargs["run_config"], made = copies.run_config(kwargs.get("run_config"))
        # The run's task copies the context: it writes to the stream, and keys its calls.
        token, keys = STREAM.set(self.stream), RUN_KEYS.set(_run_keys())
        try:
            result = self.inner.run_streamed(copies.agent(starting_agent), input, **kwargs)
        finally:
            RUN_KEYS.reset(keys)
            STREAM.reset(token)
        task = result.run_loop_task

        def ended(_: object) -> None:
            copies.published(result)
            if made is not None:  # the provider the SDK would have made and closed
                _closing.add(task2 := asyncio.ensure_future(made.aclose()))
                task2.add_done_callback(_closing.discard)

        if task is not None:
            task.add_done_callback(ended)
        return result


def _run_keys() -> RunKeys:
    """The keys of the agent run starting now in the step here (its number in its task)."""
    ctx = current_step()
    return RunKeys(f"{ctx.task}:{nth_run(ctx)}" if ctx.task else str(nth_run(ctx)))


_closing: set[asyncio.Future[Any]] = set()
"""The providers being closed after a streamed run (kept from the garbage collector)."""


def _refuse(session: Any, input: Any) -> None:
    if session is not None:
        raise TypeError(
            "an agent run with a session inside a durable step: the SDK reads and writes the "
            "session outside any durable call, so a resumed step would add to it again. Keep "
            "the conversation in the step's state instead (the next run's input: "
            "result.to_input_list())"
        )
    if isinstance(input, RunState):
        raise TypeError(
            "an agent run resumed from a RunState inside a durable step: its agent and its "
            "pending tool calls come from the state, where durable-steps cannot record them. "
            "Run the agent from its input inside the step: a resumed step replays what it "
            "recorded; to wait for a person, use wait_for_signal() before or after the run"
        )


def _not_in_a_stray_thread() -> None:
    """Refuse an agent run in no step's context while steps run in this process: most
    likely in a thread a step started (a ThreadPoolExecutor), where nothing would be
    recorded and every model response and tool call would run again after a crash."""
    try:
        current_step()
    except RuntimeError:
        if running_steps():
            raise RuntimeError(
                "an OpenAI Agents SDK run outside any step's context while a durable step "
                "runs in this process -- in a thread the step started? Its model responses "
                "and tool calls would not be recorded, and would all run again after a "
                "crash. Run the agent in the step's own thread or task (to run several at "
                "once, gather 'await Runner.run(...)' in a run_async() step)"
            ) from None


def install() -> DurableRunner:
    """Make the SDK's default runner durable inside steps, chained to the default it
    replaces (done when the package is imported; call it again if something replaced the
    default since). Returns the runner installed."""
    current = get_default_agent_runner()
    if isinstance(current, DurableRunner):
        return current
    runner = DurableRunner(current)
    set_default_agent_runner(runner)
    return runner
