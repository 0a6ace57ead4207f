"""The types a run's calls are recorded as: each call declares one (``call_async(...,
returns=T)``), and ``runner/typed.py`` records the value as its JSON and returns it
validated as ``T`` -- live and replayed alike, so a run never sees a difference -- under
the store's codec like any call's result. Nothing is encoded or decoded here.

- A ``ModelResponse`` (``RESPONSE``): the SDK's dataclass, each output item by its own
  Pydantic JSON under the SDK's output item union, only the fields that were set
  (``Recorded(exclude_unset=True)``): what the model is sent next, ``to_input_items()``,
  is the same. An item this release's union does not know fails its call, clearly
  (``InvalidStateError`` naming the call and the type).
- A tool's result (``OUTPUT``, made by ``output``): as it is when it is plain JSON (the
  SDK makes of the returned value what it made of the result); the SDK's structured
  outputs (``ToolOutputText``, ``Image``, ``FileContent``, or a list of them) as those
  types; anything else as what the SDK sends the model for it -- its JSON when the tool
  declares an output schema (the SDK validates and dumps it, the same from the JSON),
  else its ``str``.
- A guardrail's result: the SDK's own ``GuardrailFunctionOutput`` or
  ``ToolGuardrailFunctionOutput``, its ``output_info`` as JSON (``guardrail_output``).

The records are those the integration wrote before it used ``runner/typed.py`` (tests:
``recorded/openai_agents.json`` replays), but for fields never set, now left out.
"""

from __future__ import annotations

from typing import Annotated, Any

from agents import (
    GuardrailFunctionOutput,
    ModelResponse,
    ToolGuardrailFunctionOutput,
    ToolOutputFileContent,
    ToolOutputImage,
    ToolOutputText,
)
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from durable_steps import Recorded

RESPONSE = Annotated[ModelResponse, Recorded(exclude_unset=True)]

_STRUCTURED_TYPES = (ToolOutputText, ToolOutputImage, ToolOutputFileContent)


class Plain(BaseModel):
    """A tool's result as the SDK takes it: plain JSON, or what it sends the model."""

    value: Any


class Structured(BaseModel):
    """A tool's result of the SDK's structured outputs: one (``many`` false) or a list."""

    structured: list[ToolOutputText | ToolOutputImage | ToolOutputFileContent]
    many: bool


OUTPUT = Plain | Structured


def output(result: Any, *, schema: bool) -> Plain | Structured:
    """What a tool's call records of ``result`` (``schema``: the tool declares an output
    schema)."""
    if _plain(result):
        return Plain(value=result)
    many = isinstance(result, list | tuple)
    items = list(result) if many else [result]
    if items and all(isinstance(i, _STRUCTURED_TYPES) for i in items):
        return Structured(structured=items, many=many)
    return Plain(value=to_jsonable_python(result) if schema else str(result))


def tool_result(recorded: Plain | Structured) -> Any:
    """What the SDK is given for the tool's result."""
    if isinstance(recorded, Structured):
        return recorded.structured if recorded.many else recorded.structured[0]
    return recorded.value


def guardrail_output(out: Any) -> Any:
    """A guardrail's result with its ``output_info`` as JSON (else its ``str``)."""
    info = to_jsonable_python(out.output_info, fallback=str)
    if isinstance(out, ToolGuardrailFunctionOutput):
        return ToolGuardrailFunctionOutput(info, out.behavior)
    return GuardrailFunctionOutput(info, out.tripwire_triggered)


def _plain(value: Any) -> bool:
    """JSON as it is: a record of it validates to an equal value (no tuple, no subclass)."""
    if value is None or type(value) in (str, bool, int, float):
        return True
    if type(value) is list:
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False
