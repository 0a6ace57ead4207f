"""Durable copies of one agent run's agents, models, tools, guardrails and handoffs: each
of their operations a durable call of the step (the package's top tells the design).

Each wrapper decides when it is called: inside a step (and not inside a call's function)
it makes its call; anywhere else it runs what it wraps, so a copy handed out of a run (a
handoff's agent, a tool) behaves as its original there.
"""

from __future__ import annotations

import copy
import functools
import inspect
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from agents import (
    Agent,
    CustomTool,
    FunctionTool,
    GuardrailFunctionOutput,
    Handoff,
    InputGuardrail,
    Model,
    ModelProvider,
    ModelResponse,
    OutputGuardrail,
    RunConfig,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolOutputGuardrail,
)
from pydantic_core import to_jsonable_python

from durable_steps import call_async

from .._common import digest, step_here
from ._live import live_stream
from ._recorded import OUTPUT, RESPONSE, guardrail_output, output, tool_result

in_step = step_here


class RunKeys:
    """The keys of one run's calls (``call_async(..., key=)``), within the run (its number
    in its step and task, ``nth_run``) -- so each replays by it whatever task runs it:

    - a model response by its place in the conversation: the number of input items the
      SDK sends it (``RUN/model/ITEMS/N``);
    - a tool call by the model's call id (its digest: a key is stored in clear, beside
      values the store's codec encrypts): ``RUN/tool/DIGEST/N``.

    ``N`` counts the occurrences of the same place or id in the run (from 1): a
    conversation the server keeps (``previous_response_id``) sends only the new items, and
    a fake model's ids repeat -- turns run one after the other, so the count is the same
    on every execution. Formats are stable: a changed one makes runs in flight diverge.
    """

    def __init__(self, run: str) -> None:
        self.run, self._seen = run, Counter[str]()

    def _nth(self, place: str) -> str:
        self._seen[place] += 1
        return f"{self.run}/{place}/{self._seen[place]}"

    def model(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        items = kwargs["input"] if "input" in kwargs else args[1] if len(args) > 1 else None
        return self._nth(f"model/{len(items) if isinstance(items, list) else 1}")

    def tool(self, context: Any) -> str | None:
        tool_call_id = getattr(context, "tool_call_id", None)
        if not isinstance(tool_call_id, str) or not tool_call_id:
            return None
        return self._nth(f"tool/{digest(tool_call_id)}")


def model_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The key of the model response asked for with ``args``/``kwargs`` in this context's
    run (None: no run's keys here)."""
    keys = RUN_KEYS.get()
    return None if keys is None else keys.model(args, kwargs)


RUN_KEYS: ContextVar[RunKeys | None] = ContextVar("durable_steps_openai_run_keys", default=None)
"""The keys of the run in this context (set by ``DurableRunner.run``; its tasks inherit it)."""


ORIGINAL = "_durable_steps_original"
"""Set on an agent's durable copy: the agent it copies (a run given a copy keeps it)."""


class Copies:
    """The durable copies of one run's agents, handoffs, tools and guardrails, each made
    once, when first needed (the originals are kept alive with them, so ids stay theirs)."""

    def __init__(self) -> None:
        self._made: dict[int, tuple[object, Any]] = {}

    def _once(self, original: Any, make: Callable[[Any], Any]) -> Any:
        key = id(original)
        if key not in self._made:
            self._made[key] = (original, make(original))
        return self._made[key][1]

    def run_config(self, config: Any) -> tuple[RunConfig, ModelProvider | None]:
        """The run config with its models and guardrails durable; and the model provider
        it made, when the caller gave none (the SDK closes the one it makes: so do we)."""
        made = config is None or (isinstance(config, dict) and "model_provider" not in config)
        if not isinstance(config, RunConfig):
            config = RunConfig(**(config or {}))
        changes: dict[str, Any] = {"model_provider": _Provider(config.model_provider)}
        if isinstance(config.model, Model):
            changes["model"] = durable_model(config.model)
        for kind in ("input", "output"):
            if guardrails := getattr(config, f"{kind}_guardrails", None):
                changes[f"{kind}_guardrails"] = [self.guardrail(g, kind) for g in guardrails]
        return replace(config, **changes), config.model_provider if made else None

    def published(self, result: Any) -> Any:
        """``result``, naming the caller's agents where it names their copies (its last
        agent, and the agents of its items)."""
        for item in [result, *getattr(result, "new_items", ())]:
            for name in ("_last_agent", "agent", "source_agent", "target_agent"):
                original = getattr(item.__dict__.get(name), ORIGINAL, None)
                if original is not None:
                    setattr(item, name, original)
                    ref = f"_{name.lstrip('_')}_ref"  # the weak reference the SDK keeps beside
                    if item.__dict__.get(ref) is not None:
                        setattr(item, ref, weakref.ref(original))
        return result

    def agent(self, agent: Any) -> Any:
        if getattr(agent, ORIGINAL, None) is not None:
            return agent
        return self._once(agent, self._agent)

    def _agent(self, agent: Any) -> Any:
        if not isinstance(agent, Agent):
            raise TypeError(
                f"{type(agent).__name__} is not an agents.Agent: durable-steps can make only "
                "an Agent's run durable"
            )
        durable = copy.copy(agent)  # every field, its own class: only what follows changes
        setattr(durable, ORIGINAL, agent)
        self._made[id(agent)] = (agent, durable)  # before its handoffs, which may lead back
        _set_public_agent(durable, agent)
        if isinstance(agent.model, Model):
            durable.model = durable_model(agent.model)
        durable.handoffs = [self.handoff(h) for h in agent.handoffs]
        durable.input_guardrails = [self.guardrail(g, "input") for g in agent.input_guardrails]
        durable.output_guardrails = [self.guardrail(g, "output") for g in agent.output_guardrails]
        get_all_tools = type(agent).get_all_tools

        async def tools_for_the_turn(run_context: Any) -> list[Any]:
            return [self.tool(t) for t in await get_all_tools(durable, run_context)]

        # Its own tools, its MCP servers' and the enabled ones, as the SDK asks each turn.
        durable.get_all_tools = tools_for_the_turn  # type: ignore[method-assign]
        return durable

    def handoff(self, handoff: Any) -> Any:
        if not isinstance(handoff, Handoff):
            return self.agent(handoff)  # an agent: the SDK makes its handoff, no callback
        return self._once(handoff, self._handoff)

    def _handoff(self, handoff: Handoff[Any, Any]) -> Handoff[Any, Any]:
        invoke, name = handoff.on_invoke_handoff, f"handoff.{handoff.tool_name}"
        target = getattr(handoff, "_agent_ref", None)  # the agent handoff() was given

        async def on_invoke_handoff(context: Any, arguments: str) -> Any:
            if in_step() is None:
                return self.agent(await invoke(context, arguments))
            taken: list[Any] = []

            async def body() -> str:
                taken.append(await invoke(context, arguments))
                return str(taken[0].name)

            agent_name: str = await call_async(name, body)
            if not taken:  # replayed: the agent the handoff named, without running it again
                agent = target() if target is not None else None
                if agent is None or agent.name != agent_name:
                    raise RuntimeError(
                        f"handoff {handoff.tool_name!r} was recorded handing off to agent "
                        f"{agent_name!r}, which durable-steps cannot find without running "
                        "the handoff again: build the handoff with agents.handoff(agent, ...)"
                    )
                taken.append(agent)
            return self.agent(taken[0])

        durable = copy.copy(handoff)
        durable.on_invoke_handoff = on_invoke_handoff
        return durable

    def guardrail(self, guardrail: Any, kind: str) -> Any:
        return self._once(guardrail, lambda g: _durable_guardrail(g, kind))

    def tool(self, tool: Any) -> Any:
        return self._once(tool, _durable_tool)


def _set_public_agent(durable: Any, agent: Any) -> None:
    """Tool contexts and approvals see the caller's agent, not its copy (the SDK's own
    mark of an execution copy)."""
    try:
        from agents._public_agent import set_public_agent
    except ImportError:  # pragma: no cover - a release without it
        return
    set_public_agent(durable, agent)


# -- models ----------------------------------------------------------------------------------


class _Provider(ModelProvider):
    """The run's model provider, its models durable."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def get_model(self, model_name: str | None) -> Model:
        return durable_model(self.inner.get_model(model_name))

    async def aclose(self) -> None:
        return None  # the caller's provider is the caller's to close


def durable_model(model: Model) -> Model:
    return model if isinstance(model, _DurableModel) else _DurableModel(model)


class _DurableModel(Model):
    """A model whose responses are durable calls of the step."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)  # what the SDK asks a model of its own kind

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        if in_step() is None:
            return await self.model.get_response(*args, **kwargs)
        _refuse_retries(args, kwargs)

        async def body() -> ModelResponse:
            return await self.model.get_response(*args, **kwargs)

        key = model_key(args, kwargs)
        response: ModelResponse = await call_async(
            "model.get_response", body, key=key, returns=RESPONSE
        )
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        if in_step() is None:
            return self.model.stream_response(*args, **kwargs)
        _refuse_retries(args, kwargs)
        key = model_key(args, kwargs)  # now, in the order the SDK asks: not when read
        return live_stream(lambda: self.model.stream_response(*args, **kwargs), key)

    def get_retry_advice(self, request: Any) -> Any:
        return self.model.get_retry_advice(request)

    async def close(self) -> None:
        await self.model.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        cleanup = getattr(self.model, "_cleanup_on_run_end", None)
        if cleanup is not None:
            await cleanup(owner)


def _refuse_retries(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    settings = kwargs.get("model_settings", args[2] if len(args) > 2 else None)
    if getattr(getattr(settings, "retry", None), "max_retries", None):
        raise TypeError(
            "ModelSettings.retry inside a durable step: the SDK would retry a failed "
            "model request as another durable call, and a resumed step could pair the "
            "records with the wrong requests. Leave retries to the model's client (the "
            "OpenAI client retries inside the call), or give the step a Retry"
        )


# -- tools and guardrails --------------------------------------------------------------------


def _durable_tool(tool: Any) -> Any:
    if _acts_locally(tool):
        raise TypeError(
            f"{type(tool).__name__} {getattr(tool, 'name', '')!r} acts on this machine outside "
            "any function, so durable-steps cannot record it: its actions would run again when "
            "a step resumes. Do the work in a function_tool (each of its calls is recorded), or "
            "run this agent outside a durable step"
        )
    durable = copy.copy(tool)  # a hosted tool runs inside the model's response: recorded there
    if isinstance(tool, FunctionTool | CustomTool):
        schema = getattr(tool, "output_json_schema", None) is not None
        durable.on_invoke_tool = _durable_invoke(tool.on_invoke_tool, f"tool.{tool.name}", schema)
    for kind in ("tool_input", "tool_output"):
        if guardrails := getattr(tool, f"{kind}_guardrails", None):
            setattr(
                durable, f"{kind}_guardrails", [_durable_guardrail(g, kind) for g in guardrails]
            )
    for hook in ("on_approval_request", "on_approval"):  # hosted MCP's; custom tools'
        if callable(decide := getattr(tool, hook, None)):
            label = getattr(tool, "tool_config", {}).get("server_label") or tool.name
            setattr(durable, hook, _durable_approval(decide, f"approval.{label}"))
    return durable


def _acts_locally(tool: Any) -> bool:
    kind = type(tool).__name__
    if kind == "ShellTool":  # local unless it runs in a hosted environment
        return getattr(tool, "environment", None) is None or tool.executor is not None
    return kind in ("ComputerTool", "LocalShellTool", "ApplyPatchTool")


def _durable_invoke(
    invoke: Callable[..., Any], name: str, schema: bool
) -> Callable[[Any, str], Awaitable[Any]]:
    @functools.wraps(invoke)  # the SDK reads its signature to choose the context it passes
    async def on_invoke_tool(context: Any, arguments: str) -> Any:
        if in_step() is None:
            return await _result(invoke(context, arguments))

        async def body() -> Any:
            return output(await _result(invoke(context, arguments)), schema=schema)

        keys = RUN_KEYS.get()
        key = None if keys is None else keys.tool(context)
        return tool_result(await call_async(name, body, key=key, returns=OUTPUT))

    return on_invoke_tool


def _durable_approval(decide: Callable[..., Any], name: str) -> Callable[..., Awaitable[Any]]:
    """A callback that decides a tool call's approval on this machine (it may ask a
    person): its decision (approve, reason) recorded."""

    @functools.wraps(decide)
    async def decided(*args: Any) -> Any:
        if in_step() is None:
            return await _result(decide(*args))

        async def body() -> Any:
            return to_jsonable_python(await _result(decide(*args)))

        return await call_async(name, body)

    return decided


async def _result(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


_GUARDRAILS: dict[str, type[Any]] = {
    "input": InputGuardrail,
    "output": OutputGuardrail,
    "tool_input": ToolInputGuardrail,
    "tool_output": ToolOutputGuardrail,
}


def _durable_guardrail(guardrail: Any, kind: str) -> Any:
    if not isinstance(guardrail, _GUARDRAILS[kind]):
        return guardrail  # not a guardrail: the SDK says so
    check, name = guardrail.guardrail_function, f"guardrail.{kind}.{guardrail.get_name()}"

    @functools.wraps(check)  # the guardrail's name, when it has none of its own
    async def guardrail_function(*args: Any) -> Any:
        if in_step() is None:
            return await _result(check(*args))

        async def body() -> Any:
            return guardrail_output(await _result(check(*args)))

        returns = (
            ToolGuardrailFunctionOutput if kind.startswith("tool_") else GuardrailFunctionOutput
        )
        return await call_async(name, body, returns=returns)

    durable = copy.copy(guardrail)
    durable.guardrail_function = guardrail_function
    return durable
