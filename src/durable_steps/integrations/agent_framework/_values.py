"""Agent Framework's checkpoint values as plain JSON, never pickle.

A ``WorkflowCheckpoint`` carries Python objects: the messages between executors
(``WorkflowMessage``), pending human-in-the-loop requests (``WorkflowEvent``), an agent
executor's conversation (``Message``), the caller's own dataclasses. Agent Framework's
own storages pickle what is not JSON; this module writes each such value as a tagged
JSON object ``{"$af": "module:qualname", "v": ...}`` and rebuilds it through the
type's own constructor -- never by running code that the stored bytes name:

- a dataclass: its init fields, rebuilt with ``cls(**fields)``;
- a Pydantic model: its JSON as ``runner/typed.py`` records a call's typed value (by
  alias), rebuilt by validating it as the class -- the mechanism of typed values;
- a class of Agent Framework's ``SerializationMixin`` (``Message``, ``AgentResponse``,
  ``AgentSession``...): ``to_dict()``, rebuilt with ``from_dict``;
- an ``Enum``: its value; a class (a request's response type): its name;
- ``WorkflowEvent`` (not a dataclass): its constructor's fields;
- tuples, sets, datetimes, dicts whose keys are not all text: tagged likewise.

Which types may be rebuilt is an allow-list, as in Agent Framework's restricted
unpickler: ``agent_framework`` classes, and the caller's ``types=``. A value of any
other kind, or of a type not allowed, or a number that JSON stores cannot keep exactly
(an integer beyond 2**53 - 1, NaN), is refused when the checkpoint is *saved* -- an
``InvalidStateError`` naming the checkpoint, the path of the value and its type, raised
before anything is written -- so that what was saved always loads.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, timedelta
from typing import Any

from ... import CorruptCheckpointError, InvalidStateError, typed_as

MAX_SAFE_INT = 2**53 - 1
"""The largest integer every store keeps exactly (Cosmos DB's numbers are doubles)."""

TAG = "$af"
_FRAMEWORK = "agent_framework"
_TEXT: dict[type, Any] = {
    datetime: datetime.isoformat,
    date: date.isoformat,
    timedelta: timedelta.total_seconds,
}
_BUILTIN_TYPES: dict[str, type] = {
    type_.__name__: type_
    for type_ in (str, int, float, bool, bytes, dict, list, tuple, set, frozenset, type(None))
}
"""Classes a value may name (a request's ``response_type``), not instantiate from data."""


def type_key(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class Values:
    """Encodes and decodes checkpoint values; ``types``: the caller's classes that may
    be kept (besides Agent Framework's own)."""

    def __init__(self, types: Iterable[type] = ()) -> None:
        self.allowed: dict[str, type] = {}
        for cls in types:
            if not isinstance(cls, type):
                raise TypeError(f"types= takes classes, not {cls!r}")
            self.allowed[type_key(cls)] = cls

    # -- encoding ----------------------------------------------------------------------

    def encode(self, value: Any, where: str, path: str) -> Any:  # noqa: PLR0911 - one per kind
        """``value`` as JSON; ``where`` names the checkpoint, ``path`` the value in it."""
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return value
        if kind is int or kind is float:
            return self._number(value, where, path)
        if kind is list:
            return [self.encode(v, where, f"{path}[{i}]") for i, v in enumerate(value)]
        if kind is dict:
            if all(type(k) is str for k in value) and TAG not in value:
                return {k: self.encode(v, where, f"{path}[{k!r}]") for k, v in value.items()}
            pairs = [
                [self.encode(k, where, f"{path}.keys()"), self.encode(v, where, f"{path}[{k!r}]")]
                for k, v in value.items()
            ]
            return {TAG: "dict", "v": pairs}
        if kind is tuple:
            return {TAG: "tuple", "v": self.encode(list(value), where, path)}
        if kind is set or kind is frozenset:
            return {TAG: kind.__name__, "v": self.encode(sorted(value, key=repr), where, path)}
        if kind in _TEXT:
            return {TAG: kind.__name__, "v": _TEXT[kind](value)}
        if isinstance(value, type):
            return {TAG: "type", "v": self._type_name(value, where, path)}
        return self._encode_object(value, where, path)

    def _number(self, value: float, where: str, path: str) -> float:
        if type(value) is int and abs(value) > MAX_SAFE_INT:
            self._refuse(
                where,
                path,
                value,
                "an integer beyond +-(2**53 - 1), which Cosmos DB would round: keep it as a str",
            )
        if type(value) is float and not math.isfinite(value):
            self._refuse(where, path, value, "a float that JSON cannot hold")
        return value

    def _type_name(self, cls: type, where: str, path: str) -> str:
        if cls.__module__ == "builtins" and _BUILTIN_TYPES.get(cls.__name__) is cls:
            return f"builtins:{cls.__name__}"
        self._check_type(cls, where, path, cls)
        return type_key(cls)

    def _encode_object(self, value: Any, where: str, path: str) -> Any:
        cls = type(value)
        self._check_type(cls, where, path, value)
        key = type_key(cls)
        if isinstance(value, enum.Enum):
            return {TAG: key, "v": self.encode(value.value, where, path)}
        if cls.__name__ == "WorkflowEvent" and cls.__module__.startswith(_FRAMEWORK):
            return {TAG: key, "v": self.encode(_event_fields(value), where, path)}
        if dataclasses.is_dataclass(value):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
            return {TAG: key, "v": self.encode(fields, where, path)}
        if callable(getattr(cls, "model_validate", None)) and hasattr(value, "model_dump"):
            return {TAG: key, "v": self.encode(typed_as(cls).record(value), where, path)}
        if callable(getattr(cls, "from_dict", None)) and callable(getattr(value, "to_dict", None)):
            return {TAG: key, "v": self.encode(value.to_dict(), where, path)}
        self._refuse(
            where,
            path,
            value,
            "neither a dataclass, a Pydantic model nor a class "
            "with to_dict/from_dict: keep plain JSON or such an object there",
        )
        raise AssertionError  # unreachable: _refuse raises

    def _check_type(self, cls: type, where: str, path: str, value: object) -> None:
        if cls.__module__.startswith(_FRAMEWORK) or type_key(cls) in self.allowed:
            return
        self._refuse(
            where,
            path,
            value,
            f"of type {type_key(cls)}, which this storage may not rebuild: pass it in "
            f"types=[{cls.__qualname__}, ...] (a dataclass, a Pydantic model or a class with "
            "to_dict/from_dict), as Agent Framework's allowed_checkpoint_types does",
        )

    @staticmethod
    def _refuse(where: str, path: str, value: object, why: str) -> None:
        # Its type and place only: a value may be a secret, and messages reach logs.
        shown = f"a {type(value).__qualname__}"
        raise InvalidStateError(
            f"checkpoint {where!r}: the value at {path or 'the top'} ({shown}) cannot be kept: "
            f"it is {why}. Nothing was saved (no pickle here: values are JSON)",
            run_id=where,
        )

    # -- decoding ----------------------------------------------------------------------

    def decode(self, value: Any, where: str) -> Any:
        if isinstance(value, list):
            return [self.decode(v, where) for v in value]
        if not isinstance(value, Mapping):
            return value
        tag = value.get(TAG)
        if tag is None:
            return {k: self.decode(v, where) for k, v in value.items()}
        raw = value.get("v")
        try:
            return self._rebuild(str(tag), raw, where)
        except CorruptCheckpointError:
            raise
        except Exception as exc:
            raise CorruptCheckpointError(
                f"checkpoint {where!r}: a stored value of type {tag} cannot be rebuilt "
                f"({type(exc).__name__}: {exc}); was the class changed since it was saved?",
                run_id=where,
            ) from exc

    def _rebuild(self, tag: str, raw: Any, where: str) -> Any:
        simple: dict[str, Callable[[], Any]] = {
            "tuple": lambda: tuple(self.decode(raw, where)),
            "set": lambda: set(self.decode(raw, where)),
            "frozenset": lambda: frozenset(self.decode(raw, where)),
            "dict": lambda: {self.decode(k, where): self.decode(v, where) for k, v in raw},
            "datetime": lambda: datetime.fromisoformat(raw),
            "date": lambda: date.fromisoformat(raw),
            "timedelta": lambda: timedelta(seconds=raw),
            "type": lambda: self._resolve(str(raw)),
        }
        if tag in simple:
            return simple[tag]()
        cls = self._resolve(tag)
        if issubclass(cls, enum.Enum):
            member: Any = cls
            return member(self.decode(raw, where))
        if cls.__name__ == "WorkflowEvent" and cls.__module__.startswith(_FRAMEWORK):
            fields = self.decode(raw, where)
            event: Any = cls
            return event(fields.pop("type"), **fields)
        if dataclasses.is_dataclass(cls):
            make: Any = cls
            return make(**self.decode(raw, where))
        if callable(getattr(cls, "model_validate", None)):
            return typed_as(cls).load(self.decode(raw, where), f"a stored {tag}", where)
        rebuild: Any = cls
        return rebuild.from_dict(self.decode(raw, where))

    def _resolve(self, key: str) -> type:
        if key in self.allowed:
            return self.allowed[key]
        if key.startswith("builtins:") and key[9:] in _BUILTIN_TYPES:
            return _BUILTIN_TYPES[key[9:]]
        module, _, qualname = key.partition(":")
        if not (module == _FRAMEWORK or module.startswith(_FRAMEWORK + ".")) or not qualname:
            raise CorruptCheckpointError(
                f"a stored value names the type {key!r}, which this storage may not rebuild: "
                "pass the class in types=[...] if it is yours",
                run_id=key,
            )
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        if not isinstance(found, type):
            raise CorruptCheckpointError(f"{key!r} is not a class", run_id=key)
        return found


def _event_fields(event: Any) -> dict[str, Any]:
    """A ``WorkflowEvent``'s constructor arguments (its request fields are private)."""
    fields = {
        "type": event.type,
        "data": event.data,
        "origin": event.origin,
        "state": event.state,
        "details": event.details,
        "executor_id": event.executor_id,
        "request_id": event._request_id,
        "source_executor_id": event._source_executor_id,
        "request_type": event._request_type,
        "response_type": event._response_type,
        "iteration": event.iteration,
    }
    return {k: v for k, v in fields.items() if v is not None or k in ("type", "data")}
