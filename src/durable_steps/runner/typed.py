"""Typed values: a call or a step may return a Pydantic model; it is stored as JSON and
a call's comes back, on its first run and on every replay, as the same type.

The type comes from the code, never from the store: the function's return annotation
when it is a model class (``def plan(...) -> Plan``), or ``returns=`` on ``call`` /
``call_async`` / ``Step`` (any type Pydantic validates: a model, ``list[Plan]``,
``Plan | None``). A writable store must not choose what code is imported, so no class
name is ever written or read.

- A call: its result is recorded as its JSON (the type's ``TypeAdapter``: a model's
  ``model_dump(mode="json", by_alias=True)``, so that it validates back whatever its
  aliases) and returned validated as the type -- the same on the first run and on a
  replay, so code after the call sees one thing. Any type Pydantic validates will do,
  an SDK's own dataclasses and unions included (the agent integrations record model
  responses, tool outputs and guardrail results so: ``integrations/openai_agents``).
  ``Annotated[T, Recorded(exclude_unset=True)]`` records only the fields that were
  set, so the value comes back with the same fields set (an SDK may send a model
  exactly the fields that were set: the OpenAI Agents SDK's output items). A recorded
  result that does not validate (the model changed since it was recorded) is
  ``InvalidStateError`` naming the call, the type and Pydantic's message, never a
  silent dict. A model returned by a call that declares no
  type is refused at once (``InvalidStateError``): on replay there would be nothing to
  say what it was.
- A step: a returned model's (or dataclass's) fields are the step's updates, merged
  into the state as a mapping's are (the state stays plain JSON, read as a mapping by
  the next step). ``Step(returns=M)`` validates what the step returns as ``M`` first,
  so a step that returns a dict is checked too; a step's return annotation that is a
  model or a dataclass does the same. Models and dataclasses among the updates' values
  are stored as their JSON (``seam.state``).
- A state: ``Workflow(state=S)`` (``typed_steps``) hands each step the run's state
  validated as ``S`` (a model or a dataclass of its fields) instead of a read-only
  mapping -- a fresh object per step, so mutating it changes nothing stored. A state
  that does not validate fails the step with ``InvalidStateError`` naming the step,
  the field and the type, before the step's function runs. It costs a validation of
  the whole state per step: the price of typed access, paid only by who asks for it.

Pydantic stays optional: nothing here imports it unless the caller uses a model (a
model exists only if its module was imported) or names a type with ``returns=``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any

from ..seam.errors import InvalidStateError
from ..seam.state import json_of, thaw
from .step import Step, current_step


@dataclass(frozen=True)
class Recorded:
    """How a call's values of a type are recorded, given as ``Annotated[T, Recorded(...)]``
    in ``returns=``. ``exclude_unset``: only the fields that were set (they come back set,
    the others at their defaults)."""

    exclude_unset: bool = False


class Typed:
    """How values of one declared type go to JSON and back (a Pydantic TypeAdapter)."""

    __slots__ = ("adapter", "kind", "recorded")

    def __init__(self, kind: Any) -> None:
        from pydantic import TypeAdapter

        self.kind, self.adapter = kind, TypeAdapter(kind)
        found = [m for m in getattr(kind, "__metadata__", ()) if isinstance(m, Recorded)]
        self.recorded = found[-1] if found else Recorded()

    @property
    def name(self) -> str:
        annotated = typing.get_origin(self.kind) is Annotated
        kind = typing.get_args(self.kind)[0] if annotated else self.kind
        return getattr(kind, "__name__", None) or repr(kind)

    def dump(self, value: Any) -> Any:
        """A step's updates: the fields by their names, every one."""
        return self.adapter.dump_python(value, mode="json")

    def record(self, value: Any) -> Any:
        """A call's result as recorded: by alias (as it validates back), and only the
        fields set when the type says ``Recorded(exclude_unset=True)``."""
        return self.adapter.dump_python(
            value, mode="json", by_alias=True, exclude_unset=self.recorded.exclude_unset
        )

    def load(self, value: Any, what: str, run_id: str) -> Any:
        from pydantic import ValidationError

        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise InvalidStateError(
                f"run {run_id!r}: {what} is not a valid {self.name}: {_first(exc)}. The type "
                "changed since it was recorded: keep it compatible (new fields optional), or "
                "use a new run id",
                run_id=run_id,
            ) from None


def _first(exc: Any) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    e = errors[0]
    where = ".".join(str(p) for p in e.get("loc", ())) or "the value"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {e.get('msg')}{more}"


def declared(fn: Callable[..., Any], returns: Any) -> Typed | None:
    """The type a call's or step's values have: ``returns`` when given, else ``fn``'s
    return annotation when it is a Pydantic model class; None: plain JSON."""
    if returns is not None:
        return _typed(returns)
    kind = _annotation(fn)
    return None if kind is None else _typed(kind)


def typed_as(kind: Any) -> Typed:
    """How values of ``kind`` (any type Pydantic validates) are recorded and read back:
    for code that knows a value's type by other means than ``returns=`` (the Agent
    Framework integration: a checkpoint value's allowed class)."""
    return _typed(kind)


@functools.cache
def _typed(kind: Any) -> Typed:
    return Typed(kind)


def _annotation(fn: Callable[..., Any]) -> Any:
    """``fn``'s return annotation if it is a model class (without importing pydantic
    unless it is imported already: no model exists otherwise)."""
    if "pydantic" not in sys.modules:
        return None
    target = getattr(fn, "__func__", fn)  # a bound method: its function
    try:
        return _model_annotation(target)
    except TypeError:  # unhashable: not cached
        return _model_annotation.__wrapped__(target)


@functools.lru_cache(maxsize=1024)
def _model_annotation(target: Any) -> Any:
    pydantic = sys.modules["pydantic"]
    raw = getattr(target, "__annotations__", {}).get("return")
    if raw is None:
        return None
    try:
        kind = _hints(target) if isinstance(raw, str) else raw
    except Exception:  # an annotation that does not resolve says nothing we can use
        return None
    if not isinstance(kind, type):
        return None
    return kind if issubclass(kind, pydantic.BaseModel) or dataclasses.is_dataclass(kind) else None


def _hints(fn: Any) -> Any:
    return typing.get_type_hints(fn).get("return")


def is_model(value: object) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


def call_result(typed: Typed | None, value: Any, name: str, run_id: str) -> Any:
    """A call's result as it is recorded: validated as the declared type (a function that
    returns something else fails its call, loudly), then its JSON; a model without a
    declared type is refused (it would come back as a dict)."""
    if typed is not None:
        return typed.record(typed.load(value, f"what call {name!r} returned", run_id))
    if is_model(value):
        kind = type(value).__name__
        raise InvalidStateError(
            f"run {run_id!r}: call {name!r} returned a {kind}, and declares no type to bring "
            f"it back as on replay: annotate its function '-> {kind}', or pass returns={kind}",
            run_id=run_id,
        )
    return value


def updates_of(typed: Typed | None, value: Any, step: str, run_id: str) -> Any:
    """A step's updates: a model's fields (validated as ``returns=`` first, if given)."""
    if typed is None and type(value) is dict:  # the common case, before is_model's ABC check
        return value
    if typed is not None:
        value = typed.dump(typed.load(value, f"what step {step!r} returned", run_id))
    elif is_model(value) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        value = json_of(value)
    return value


def typed_steps(steps: Sequence[Step], kind: Any) -> tuple[Step, ...]:
    """``steps`` whose functions get the state validated as ``kind`` (see the top)."""
    typed = _typed(kind)
    return tuple(_typed_step(step, typed) for step in steps)


def _typed_step(step: Step, typed: Typed) -> Step:
    fn, what = step.fn, f"the state before step {step.name!r}"
    if getattr(fn, "typed_state", None) is typed:
        return step  # typed already (a Workflow copied with dataclasses.replace)

    def view(state: Mapping[str, Any]) -> Any:
        return typed.load(thaw(state), what, current_step().run_id)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def typed_async(state: Mapping[str, Any]) -> Any:
            return await fn(view(state))

        typed_async.typed_state = typed  # type: ignore[attr-defined]
        return replace(step, fn=typed_async)

    @functools.wraps(fn)
    def typed_sync(state: Mapping[str, Any]) -> Any:
        return fn(view(state))

    typed_sync.typed_state = typed  # type: ignore[attr-defined]
    return replace(step, fn=typed_sync)
