"""Durable Pydantic AI agents: every model request and tool call a durable call.

    from pydantic_ai import Agent
    from durable_steps import Step, run, store_from_env
    from durable_steps.integrations.pydantic_ai import Durable

    agent = Agent("openai:gpt-5.2", name="support", capabilities=[Durable()])

    def answer(state):                                  # a run() step
        return {"answer": agent.run_sync(state["question"]).output}

Inside a step, run by ``run`` (``agent.run_sync``, or ``await agent.run`` in a
coroutine of the step) or by ``run_async`` (``await agent.run``, ``agent.iter``,
``agent.run_stream``), each model request and each tool call is one
``call_async`` of the step: recorded as it returns, so a step that runs again after
a crash replays the finished ones from its journal and goes on from the first
unfinished one. Outside a step the capability does nothing.

How. Pydantic AI's own durable-execution seam (``pydantic_ai.durable_exec``, the
one its Temporal, DBOS and Prefect integrations use) routes every model request,
tool call and toolset discovery through an operation backend; ``Durable`` is such
a capability, and its backend's ``execute`` is ``call_async(name, body)``. ``body``
runs the operation and returns its result already encoded by Pydantic AI's
``JSON_CODEC`` (its own type adapters: messages, tool results, control flow such as
``ModelRetry`` as data); the journal keeps that JSON, and Pydantic AI decodes what
the journal returns -- the same value live and on replay. Nothing is pickled.

Streamed requests (``run_stream``, ``iter`` with ``node.stream``) reach the caller live
and the run stream ``Durable(stream="model")`` as the model produces them, and are
recorded when complete (``_live``: its design at its top).

Call keys (``call_async(..., key=)``, ``key_of``): a model request is keyed by its place
in its agent run's conversation (the run's id, its step, the messages before it), a
tool call by the model's ``tool_call_id`` -- so each replays by what Pydantic AI knows
it by, whatever task runs it (its live and replayed paths create tasks differently, and
tools of one response run at once). Records of earlier versions, unkeyed, are found at
their old places while those hold, else the run fails with ``NondeterminismError``
rather than run a recorded call again.

Call names (what ``NondeterminismError`` compares when a step runs again):
``model.request`` (``model.request_stream`` when streamed; ``:MODEL_ID`` added for
a model other than the agent's own), ``tool.NAME``, ``tool.NAME.validate_args``
(a tool's own ``args_validator``), ``toolset.ID.get_tools`` and
``toolset.ID.get_instructions`` (MCP and dynamic toolsets' discovery),
``event_stream_handler`` (one per event, with ``Durable(event_stream_handler=...)``),
``capability.ID.OPERATION``.

Refused inside a step (Pydantic AI's ``UserError`` or our ``TypeError``, each
saying what to do): a toolset passed to one run (``run(toolsets=...)``) that runs
tools; a custom toolset class, whose calls this cannot see; a ``Model`` instance
passed to one run that is not registered (``Durable(models={...})``); a
``cancellation_token``; ``ctx.enqueue()``/``ctx.cancel()`` in a tool.
"""

from __future__ import annotations

import copy
import functools
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from durable_steps import (
    InvalidStateError,
    MissingExtraError,
    call_async,
    current_step,
    running_steps,
    track_tasks,
)

from .._common import check_release, digest, nth_run, step_here

INSTALL = "pip install 'durable-steps[pydantic-ai]'"
SUPPORTED = (2, 62), (3, 0)
"""The pydantic-ai-slim versions this works with and is tested on: >=2.62,<3 (the
``[pydantic-ai]`` extra pins the same range)."""

try:
    from pydantic_ai import Agent
    from pydantic_ai import __version__ as PYDANTIC_AI_VERSION
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.durable_exec import (
        JSON_CODEC,
        BaseDurabilityCapability,
        CallableOperationBackend,
        CapabilityOperationId,
        DurabilityEngineSpec,
        DurableOperationBackend,
        DurableOperationId,
        EventStreamHandlerId,
        JournalOperationNamer,
        ModelCancelSuspendedResponseId,
        ModelCompactMessagesId,
        ModelRequestId,
        RoleBasedOperationConfig,
        ToolsetCallToolId,
        ToolsetGetInstructionsId,
        ToolsetGetToolsId,
        ToolsetValidateToolArgumentsId,
        conversation_id_from_run_id,
    )
    from pydantic_ai.models import Model
    from pydantic_ai.tools import AgentDepsT
    from pydantic_ai.toolsets import (
        AbstractToolset,
        DynamicToolset,
        ExternalToolset,
        FunctionToolset,
    )
except ImportError as exc:
    raise MissingExtraError(
        f"durable_steps.integrations.pydantic_ai needs Pydantic AI (pydantic-ai-slim>=2.62,<3): "
        f"{INSTALL} (missing: {exc.name or exc})"
    ) from exc

if TYPE_CHECKING:
    from pydantic_ai.agent import AbstractAgent
    from pydantic_ai.agent.abstract import EventStreamHandler


check_release("pydantic_ai", "pydantic-ai-slim", PYDANTIC_AI_VERSION, SUPPORTED, INSTALL)

from ._live import LiveModel, publishing  # noqa: E402 - after the version check

__all__ = ["Durable"]

ENGINE = "durable-steps"


_step = step_here


class _Names:
    """Call names by kind and tool name (see the top); Pydantic AI's journal names for
    any operation it adds later."""

    def __init__(self, agent_name: str) -> None:
        self._theirs = JournalOperationNamer(agent_name)

    def operation_name(self, operation_id: DurableOperationId) -> str:
        return self._name(operation_id, None)

    def invocation_name(self, operation_id: DurableOperationId, *, label: str | None) -> Any:
        # Their invocation name, with our operation name: its type is not public.
        return replace(
            self._theirs.invocation_name(operation_id, label=label),
            operation_name=self._name(operation_id, label),
        )

    def _name(self, operation_id: DurableOperationId, label: str | None) -> str:  # noqa: PLR0911 - a return per kind reads as the table it is
        match operation_id:
            case ModelRequestId(model_id=model_id, streaming=streaming):
                return _model("model.request_stream" if streaming else "model.request", model_id)
            case ModelCompactMessagesId(model_id=model_id):
                return _model("model.compact_messages", model_id)
            case ModelCancelSuspendedResponseId(model_id=model_id):
                return _model("model.cancel_suspended_response", model_id)
            case ToolsetCallToolId() if label is not None:
                return f"tool.{label}"
            case ToolsetValidateToolArgumentsId() if label is not None:
                return f"tool.{label}.validate_args"
            case ToolsetGetToolsId(toolset_id=toolset_id):
                return f"toolset.{toolset_id}.get_tools"
            case ToolsetGetInstructionsId(toolset_id=toolset_id):
                return f"toolset.{toolset_id}.get_instructions"
            case EventStreamHandlerId():
                return "event_stream_handler"
            case CapabilityOperationId(capability_id=capability_id, operation=operation):
                return f"capability.{capability_id}.{operation}"
            case _:  # an operation of a newer release: their name, stable too
                return self._theirs.operation_name(operation_id)


def _model(name: str, model_id: str | None) -> str:
    return name if model_id is None or model_id == "default" else f"{name}:{model_id}"


_KEY: ContextVar[str | None] = ContextVar("durable_steps_pydantic_ai_key", default=None)
"""The key of the operation being dispatched (``_Calls.bind``), read by ``execute``."""


class _Calls(CallableOperationBackend[None]):
    """Each operation one durable call of the step, keyed by what Pydantic AI knows it
    by (``key_of``) where it knows it."""

    def bind(self, operation: Any) -> Any:
        bound = super().bind(operation)
        return _Keyed(bound, operation)

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: None,
    ) -> object:
        return await call_async(name, body, key=_KEY.get())


class _Keyed:
    """A bound operation that names its key for ``_Calls.execute``: set in the task that
    dispatches it, which awaits ``execute`` before anything else runs there."""

    def __init__(self, bound: Any, operation: Any) -> None:
        self._bound, self._operation = bound, operation

    @property
    def operation(self) -> Any:
        return self._operation

    async def __call__(self, params: Any, *, config: object | None = None) -> Any:
        token = _KEY.set(key_of(self._operation.operation_id, params))
        try:
            return await self._bound(params, config=config)
        finally:
            _KEY.reset(token)


def key_of(operation_id: DurableOperationId, params: object) -> str | None:
    """A call's key, from what Pydantic AI identifies it by within its agent run (its
    ``run_id``): a model request by its place in the conversation (the run's step, the
    messages before it), a tool call (and the validation of its arguments) by the
    model's ``tool_call_id`` in its step (its digest: keys are stored in clear). None --
    numbered by its place in its task -- for the rest (discovery, events), or when the
    run has no id."""
    ctx = getattr(params, "ctx", None) or getattr(params, "run_context", None)
    run = getattr(ctx, "run_id", None)
    if run is None:
        return None
    step = getattr(ctx, "run_step", 0)
    match operation_id:
        case ModelRequestId():
            messages = getattr(params, "messages", None)
            key = None if messages is None else f"{run}/{step}/model/{len(messages)}"
        case ToolsetCallToolId() | ToolsetValidateToolArgumentsId():
            part = "tool" if isinstance(operation_id, ToolsetCallToolId) else "validate"
            tool_call_id = getattr(ctx, "tool_call_id", None)
            key = None if not tool_call_id else f"{run}/{step}/{part}/{digest(tool_call_id)}"
        case _:
            key = None
    return key


def _not_json(exc: Exception) -> BaseException:
    return InvalidStateError(
        f"a Pydantic AI result cannot be recorded as JSON ({exc}); a durable call's result "
        "must be: return JSON-able values from tools (dicts, lists, str, numbers, Pydantic "
        "models, dataclasses)"
    )


_IDS = uuid.UUID("5d0f1f8e-6b0c-4b7e-9a55-2f3c1d7e8a10")


class Durable(BaseDurabilityCapability[AgentDepsT]):
    """Makes an agent durable inside a durable-steps step (see the module's top).

    ``Agent(model, capabilities=[Durable()])``; then, in a step, ``agent.run_sync(...)``
    (a ``run`` step) or ``await agent.run(...)`` (a ``run_async`` step, or a coroutine
    of a ``run`` step). Each model request and tool call is a durable call of the step,
    replayed from the step's journal when the step runs again. A run's default
    ``run_id`` (and ``conversation_id``) is derived from the step, so it is the same
    when the step runs again.

    - ``models``: other ``Model`` instances runs may pick (``run(model=...)``) by
      instance or by key; the agent's own model needs no entry.
    - ``event_stream_handler``: receives the run's events inside durable calls
      (model stream events inside the model request's call, each other event in a
      call of its own), so a resumed step does not deliver them again. A handler
      passed to ``run()`` instead sees the replayed events again on every run.
    - ``stream``: the run stream that streamed model requests (``run_stream``,
      ``iter`` with ``node.stream``) write their text deltas and tool calls to, as the
      caller gets them (``None``: no run stream; the caller still gets them live).
    - ``name``: the agent's name (unused in call names; Pydantic AI wants one).
    """

    engine_spec = DurabilityEngineSpec(
        engine_name=ENGINE,
        durable_unit_noun="call",
        durable_container_noun="step",
        codec=JSON_CODEC,
        serialization_failure=_not_json,
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        tool_call_result_upgrade_lenient=False,
        journal_discovery=True,
        sequential_tools_in_durable_context=False,  # each tool call its task's own call
        tool_config_key=None,  # every tool a call: no per-tool opt-out
    )

    def __init__(
        self,
        *,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        name: str | None = None,
        stream: str | None = "model",
    ) -> None:
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)
        self.stream = stream

    def _model_stream_event_handler(self) -> EventStreamHandler[AgentDepsT] | None:
        # Pydantic AI's hook for what consumes a streamed request inside its call.
        return publishing(self.stream, self._effective_event_stream_handler())

    async def _build_durable_model(self, ctx: Any, request_context: Any) -> Any:
        # Their DurableModel, whose streamed requests reach the caller live (._live).
        built = await super()._build_durable_model(ctx, request_context)
        return LiveModel.of(built)

    def for_agent(self, agent: AbstractAgent[AgentDepsT, Any]) -> AbstractCapability[AgentDepsT]:
        for toolset in agent.toolsets:
            toolset.apply(_check_leaf)
        if self.name or agent.name:
            return super().for_agent(agent)
        named = copy.copy(self)  # Pydantic AI wants a name; our call names do not use it
        named.name = "agent"
        return named.for_agent(agent)

    @property
    def in_durable_context(self) -> bool:
        return _step() is not None

    def get_durable_operation_backend(self) -> DurableOperationBackend[Any]:
        return _Calls(
            namer=_Names(self.name or "agent"),
            config=RoleBasedOperationConfig(model=None, event=None, capability=None, tool=None),
        )

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> Any:
        if self.in_durable_context:
            toolset.apply(_check_leaf)
        return super().get_wrapper_toolset(toolset)

    def get_default_run_id(self) -> str | None:
        ctx = _step()
        if ctx is None:
            return None
        n = nth_run(ctx)
        where = f"{ctx.task}:{n}" if ctx.task else str(n)  # the step's own: ids as before
        return str(uuid.uuid5(_IDS, f"{ctx.idempotency_key}:{where}"))

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None

    def get_run_clock(self) -> Any:
        # Asked once as a run starts, in the run's own task, before it creates the tasks
        # that make model requests and run tools: name them, so that each replays its own
        # calls (under run_sync, in a run() step; run_async() names them already).
        _not_in_a_stray_thread()
        track_tasks()
        return super().get_run_clock()


def _not_in_a_stray_thread() -> None:
    """Refuse a run outside any step's context while steps run in this process: most
    likely in a thread a step started (a ThreadPoolExecutor), where nothing would be
    recorded and every call would run again after a crash."""
    try:
        current_step()
    except RuntimeError:
        if running_steps():
            raise RuntimeError(
                "a Durable() agent runs outside any step's context while a durable step runs "
                "in this process -- in a thread the step started? Its model requests and "
                "tool calls would not be recorded, and would all run again after a crash. "
                "Run the agent in the step's own thread or task (to run several at once, "
                "gather 'await agent.run(...)' in a run_async() step), or use an agent "
                "without Durable() for work that need not be durable"
            ) from None


_log = logging.getLogger("durable_steps")
_WARNED: set[int] = set()
"""The agents warned about (by identity, while they live: agents are not hashable)."""


def _warn_if_plain(agent: Any, capabilities: Any) -> None:
    """Once per agent: a run inside a step of an agent without Durable() is not durable."""
    if _step() is None or id(agent) in _WARNED:
        return
    found: list[object] = []
    try:
        agent._root_capability.apply(found.append)  # Pydantic AI's own tree of capabilities
    except AttributeError:  # another agent class, or a newer layout: say nothing
        return
    if not any(isinstance(c, Durable) for c in [*found, *(capabilities or ())]):
        _WARNED.add(id(agent))
        weakref.finalize(agent, _WARNED.discard, id(agent))
        # A warning, not a refusal: an agent without Durable() is the caller's to choose and records
        # nothing, so no recorded call can run twice.
        _log.warning(
            "agent %r runs inside step %r of run %r without Durable(): its model requests "
            "and tool calls are not recorded and will all run again if the step does. Give "
            "it capabilities=[Durable()]",
            agent.name,
            current_step().name,
            current_step().run_id,
        )


def _checked_iter(iter_: Any) -> Any:
    def iter(self: Any, *args: Any, **kwargs: Any) -> Any:
        _warn_if_plain(self, kwargs.get("capabilities"))
        return iter_(self, *args, **kwargs)

    return functools.wraps(iter_)(iter)


Agent.iter = _checked_iter(Agent.iter)  # type: ignore[method-assign] # every run goes through it


def _check_leaf(toolset: AbstractToolset[Any]) -> None:
    if isinstance(toolset, FunctionToolset | DynamicToolset | ExternalToolset):
        return
    try:
        from pydantic_ai.mcp import MCPToolset
    except ImportError:  # pragma: no cover - the [mcp] extra of pydantic-ai
        pass
    else:
        if isinstance(toolset, MCPToolset):
            return
    raise TypeError(
        f"{type(toolset).__name__} ({toolset.label}) is a toolset class that Durable cannot "
        "make durable: it cannot see its tool calls, which would run again whenever a step "
        "resumes. Give the agent a FunctionToolset whose tools call this toolset's code (or "
        "an MCPToolset, or a DynamicToolset) instead, or leave Durable off this agent"
    )
