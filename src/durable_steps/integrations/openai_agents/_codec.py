"""What a model response and a tool's result are recorded as: plain JSON, decoded into the
value the run goes on with, live and replayed alike (so it never differs between them).

- A ``ModelResponse``: its dataclass fields; its output items each by its own Pydantic JSON
  (``by_alias``, and ``exclude_unset`` so that the fields set are the same after decoding:
  what the model is sent next, ``to_input_items()``, is the same), rebuilt as the same types
  through the SDK's output item union; ``usage`` through its own Pydantic dataclass.
- A tool's result: as it is when it is plain JSON (the SDK makes of the decoded value what
  it made of the result); the SDK's structured outputs (``ToolOutputText``, ``Image``,
  ``FileContent``, or a list of them) by their JSON, rebuilt; anything else as what the SDK
  sends the model for it -- its JSON when the tool declares an output schema (the SDK
  validates and dumps it, the same from the JSON), else its ``str``.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from agents import ModelResponse, ToolOutputFileContent, ToolOutputImage, ToolOutputText, Usage
from agents.items import TResponseOutputItem
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

_ITEM: TypeAdapter[Any] = TypeAdapter(TResponseOutputItem)
_USAGE: TypeAdapter[Usage] = TypeAdapter(Usage)
_STRUCTURED_TYPES = (ToolOutputText, ToolOutputImage, ToolOutputFileContent)
_STRUCTURED: TypeAdapter[Any] = TypeAdapter(
    ToolOutputText | ToolOutputImage | ToolOutputFileContent
)


def encode_response(response: ModelResponse) -> dict[str, Any]:
    encoded = {f.name: getattr(response, f.name) for f in fields(response)}
    encoded["output"] = [_dump(item) for item in response.output]
    encoded["usage"] = _USAGE.dump_python(response.usage, mode="json")
    return encoded


def _dump(item: Any) -> Any:
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return item  # a plain mapping (what a model of one's own may give): as it is


def decode_response(recorded: dict[str, Any]) -> ModelResponse:
    known = {f.name for f in fields(ModelResponse)}
    values = {k: v for k, v in recorded.items() if k in known}
    values["output"] = [_item(item) for item in recorded["output"]]
    values["usage"] = _USAGE.validate_python(recorded["usage"])
    return ModelResponse(**values)


def _item(item: Any) -> Any:
    try:
        return _ITEM.validate_python(item)
    except ValidationError:  # not an output item this openai release knows: as it was
        return item


def encode_output(output: Any, *, schema: bool) -> dict[str, Any]:
    if _plain(output):
        return {"value": output}
    many = isinstance(output, list | tuple)
    items = list(output) if many else [output]
    if items and all(isinstance(i, _STRUCTURED_TYPES) for i in items):
        dumped = [_STRUCTURED.dump_python(i, mode="json") for i in items]  # its type too
        return {"structured": dumped, "many": many}
    if schema:
        return {"value": to_jsonable_python(output)}
    return {"value": str(output)}


def decode_output(recorded: dict[str, Any]) -> Any:
    if "structured" in recorded:
        items = [_STRUCTURED.validate_python(i) for i in recorded["structured"]]
        return items if recorded["many"] else items[0]
    return recorded["value"]


def _plain(value: Any) -> bool:
    """JSON as it is: a record of it decodes to an equal value (no tuple, no subclass)."""
    if value is None or type(value) in (str, bool, int, float):
        return True
    if type(value) is list:
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False
