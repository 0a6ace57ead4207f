"""What the decorators read from a function's signature: its name, its arguments as a
stable key, its parameters validated, and the type of what it returns.

- **Names**: a function's qualified name, without the ``<locals>`` parts a function
  defined in another gets (``agent.<locals>.search`` is ``agent.search``): the name a
  reader of the run's history recognises, stable while the function keeps its place.
- **Keys**: the canonical JSON of the bound arguments (defaults applied, in parameter
  order; Pydantic models and dataclasses by their fields), hashed. ``f(1)`` and
  ``f(x=1)`` are one call; a method's ``self`` (or ``cls``) is left out. An argument
  with no JSON form (a client object, a lock) cannot be part of an identity that must
  be the same after a restart: it is refused with a ``TypeError`` that says to give
  ``key=`` (a function of the arguments).
- **Types** come from the annotations, resolved once at first use (forward references
  resolve by then). Plain JSON annotations (``int``, ``str``, ``dict``, ``Any``, ...)
  need no validation: the stored value is already what the code gets. Anything else
  (a Pydantic model, a dataclass, ``list[Plan]``) goes through a Pydantic
  ``TypeAdapter`` -- Pydantic is imported only then (it stays an optional dependency).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import inspect
import json
import typing
from collections.abc import Callable
from typing import Any

from ..seam.errors import InvalidStateError, MissingExtraError

_PLAIN = (Any, int, str, float, bool, dict, list, type(None), None)


def qualified_name(fn: Callable[..., Any]) -> str:
    """``fn``'s qualified name, the ``<locals>`` parts dropped (see the top)."""
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return ".".join(part for part in qual.split(".") if part != "<locals>")


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a Pydantic model
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(type(value).__name__)


class Signature:
    """A function's signature as the decorators use it (see the top)."""

    __slots__ = ("_defaults", "_hints", "_names", "_positional", "_receiver", "fn", "name", "sig")

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn, self.name = fn, name
        self.sig = inspect.signature(fn)
        self._hints: dict[str, Any] | None = None
        params = self.sig.parameters.values()
        fixed = all(p.kind in _FIXED for p in params)
        # the fast path of ``key``: a signature of named parameters, bound by hand in
        # parameter order (what ``Signature.bind`` does, without its general machinery)
        self._names = tuple(p.name for p in params) if fixed else None
        self._positional = sum(p.kind is not inspect.Parameter.KEYWORD_ONLY for p in params)
        self._defaults = {p.name: p.default for p in params if p.default is not p.empty}
        first = next(iter(self.sig.parameters), None)
        self._receiver = first in ("self", "cls")
        """A method's receiver is not part of a call's identity: the same call of two
        instances is the same work (give ``key=`` where the instance matters)."""

    def hints(self) -> dict[str, Any]:
        if self._hints is None:
            try:
                self._hints = typing.get_type_hints(self.fn)
            except Exception as exc:  # an annotation that does not resolve
                raise TypeError(
                    f"{self.name}: its annotations do not resolve ({exc}); import the types "
                    "they name in its module"
                ) from None
        return self._hints

    def key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The stable key of these arguments (see the top): the JSON of their values in
        parameter order, defaults applied."""
        values = self._bound(args, kwargs)
        try:
            text = json.dumps(values, separators=(",", ":"), ensure_ascii=False, default=_jsonable)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"durable step {self.name!r}: an argument has no JSON form ({exc}), so it "
                "cannot be part of the call's identity; give the step key=... (a function "
                "of the arguments that returns a str naming the call)"
            ) from None
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    def _bound(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        names = self._names
        if names is not None and len(args) <= self._positional:
            given = dict(zip(names, args, strict=False))
            if kwargs:
                given.update(kwargs)
            if len(given) == len(args) + len(kwargs):  # no argument given twice
                values = [given.pop(n, self._defaults.get(n, _MISSING)) for n in names]
                if not given and _MISSING not in values:
                    return values[1:] if self._receiver else values
        bound = self.sig.bind(*args, **kwargs)  # raises the TypeError a call would
        bound.apply_defaults()
        items = sorted(bound.arguments.items())
        return [(k, v) for k, v in items if k not in ("self", "cls")] if self._receiver else items


_FIXED = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)
_MISSING: Any = object()


def returns_of(sig: Signature) -> Any:
    """The declared type of what ``sig``'s function returns, or None when its values are
    plain JSON already (no annotation, ``Any``, ``int``, ``dict``, ...) or Pydantic is
    not installed (then no model can exist, and a dataclass is refused as not JSON)."""
    kind = sig.hints().get("return", None)
    if kind in _PLAIN or (typing.get_origin(kind) in (dict, list) and _plain_args(kind)):
        return None
    try:
        import pydantic  # noqa: F401
    except ImportError:
        return None
    return kind


def _plain_args(kind: Any) -> bool:
    return all(a in _PLAIN for a in typing.get_args(kind))


def adapter(kind: Any, what: str) -> Any:
    """A Pydantic ``TypeAdapter`` of ``kind`` (``MissingExtraError`` without Pydantic)."""
    try:
        from pydantic import TypeAdapter
    except ImportError:
        raise MissingExtraError(
            f"{what} is typed: install pydantic (pip install pydantic) to validate it"
        ) from None
    return TypeAdapter(kind)


def invalid(exc: Any, what: str, kind: Any, run_id: str, hint: str) -> InvalidStateError:
    """``InvalidStateError`` for a Pydantic ``ValidationError``: what was validated, the
    field and the type, Pydantic's message, and what to do."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = ".".join(str(p) for p in first.get("loc", ()))
    field = f" field {loc!r}" if loc else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    name = getattr(kind, "__name__", None) or repr(kind)
    return InvalidStateError(
        f"run {run_id!r}: {what}{field} is not a valid {name}: {first.get('msg', exc)}{more}; "
        f"{hint}",
        run_id=run_id,
    )
