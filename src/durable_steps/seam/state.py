"""Run state as immutable JSON: validated once, shared between versions, never copied whole.

A run's state only ever grows by a step's updates, so the runner keeps it as a
persistent structure. ``freeze`` checks a value against the JSON rules every
store shares (below) and turns every dict and list in it into a read-only
subclass (``FrozenDict``, ``FrozenList``); values that are already frozen were
checked when they were frozen and are reused as they are, not walked again.
``FrozenState.updated(updates)`` is the next state: the previous one's values
plus the frozen updates, with a note of what changed (a key set, or a list only
extended) that a store may write instead of the whole state.

Steps get the frozen state itself: mutating it, at any depth, raises TypeError,
and since nothing can change it, sharing it costs nothing and aliases nothing.
``thaw`` makes the plain, mutable deep copy that ``run`` returns to its caller.

The JSON rules (the same in every store, so what works locally works in Cosmos DB):
str keys; str, bool, None, finite floats, integers within +-(2**53 - 1) (Cosmos DB
keeps numbers as IEEE doubles and would round larger ones silently), no -0.0
(it comes back as 0), no lone surrogates in strings or keys, and at most
``MAX_DEPTH`` levels of nesting. Tuples become lists.

Typed values in the state: a Pydantic model or a dataclass instance among a step's
updates (or a run's input) is stored as its JSON -- its fields by name, as
``model_dump(mode="json")`` gives them -- and read back as that JSON: the state stays
plain JSON that every store keeps, and no class name is ever stored (a writable store
must not choose what code is imported). Code that wants the values back as their
types says which (``Workflow(state=Model)``, ``runner.typed``). The conversion sits
on the path that would otherwise refuse the value, so plain JSON pays nothing for it.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from .errors import InvalidStateError

MAX_DEPTH = 100
"""Deepest nesting of dicts and lists a state may have (Cosmos DB allows 128 below the item)."""
MAX_SAFE_INT = 2**53 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        "run state is read-only: return the changes from the step instead, e.g. "
        "{'items': [*state['items'], new]}; copy.deepcopy() gives a mutable copy"
    )


class FrozenList(list[Any]):
    """A list that cannot change: the lists inside a run's state."""

    __slots__ = ("_height",)
    _height: int

    append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: object) -> list[Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (thaw(self),))


class FrozenDict(dict[str, Any]):
    """A dict that cannot change: the objects inside a run's state."""

    __slots__ = ("_height",)
    _height: int

    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = _read_only
    __ior__ = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: object) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (thaw(self),))


class Delta:
    """What changed from one state to the next: keys set to new values, and lists
    that were only extended (key -> the new items). Nothing is ever removed.
    ``before`` is the state it applies to (a store measures what a set key replaced)."""

    __slots__ = ("before", "extended", "set")

    def __init__(
        self,
        set_: dict[str, Any],
        extended: dict[str, list[Any]],
        before: Mapping[str, Any] | None = None,
    ) -> None:
        self.set, self.extended, self.before = set_, extended, before

    def __bool__(self) -> bool:
        return bool(self.set or self.extended)


class FrozenState(FrozenDict):
    """A run's whole state. Besides its values it remembers the state it was made
    from and the ``Delta`` between the two, until it is stored (``mark_stored``)."""

    __slots__ = ("_codec", "_delta", "_lengths", "_parent", "_plain", "_sealed", "_stored_as")
    _parent: FrozenState | None
    _delta: Delta | None
    _stored_as: str | None
    _sealed: FrozenState | None
    """Its values as a store is given them, through the codec (``seam.encoded``): kept so
    that the next state's save encodes that state's change only."""
    _plain: int | None
    """Of such an encoded state: the bytes of the plain state's JSON (the size limit's)."""
    _codec: object
    """Of such an encoded state: the codec that made it (another one makes its own)."""
    _lengths: dict[str, int] | None
    """Bytes of the JSON of some of its values, noted by a store that encoded them."""

    def updated(self, updates: Mapping[str, Any], run_id: str) -> FrozenState:
        """This state with ``updates`` merged (shallow), validated and frozen."""
        changed: dict[str, Any] = {}
        extended: dict[str, list[Any]] = {}
        for name, value in updates.items():
            key = _key(name, "", run_id)
            old = dict.get(self, key, _MISSING)
            if value is old:
                continue
            if (
                isinstance(old, FrozenList)
                and isinstance(value, list | tuple)
                and not isinstance(value, FrozenList)
                and len(value) >= len(old)
                and all(a is b for a, b in zip(value, old, strict=False))
            ):
                # [*state["log"], entry]: only the tail is new, so only it is checked
                # and stored (the prefix is the previous, already frozen items).
                tail = freeze(
                    list(value[len(old) :]), f"[{key!r}][{len(old)}:]", run_id, 1, typed=True
                )
                if tail:
                    extended[key] = tail
                    changed[key] = _frozen_list([*old, *tail], max(old._height, tail._height))
                continue
            if type(value) is str and value.isascii():  # most updates: nothing to check
                changed[key] = value
            else:
                changed[key] = freeze(value, f"[{key!r}]", run_id, 1, typed=True)
        if not changed:
            return self
        height = max(self._height, 1 + max(map(_height, changed.values())))
        new = _state({**self, **changed}, height)
        new._parent, new._delta = (
            self,
            Delta({k: v for k, v in changed.items() if k not in extended}, extended, self),
        )
        return new


_MISSING = object()


def _state(values: dict[str, Any], height: int | None = None) -> FrozenState:
    s = FrozenState()
    dict.update(s, values)
    if height is None:
        height = max(map(_height, values.values()), default=0) + 1
    s._height = height
    s._parent = s._delta = s._stored_as = s._lengths = s._sealed = s._plain = s._codec = None
    return s


def stored_state(values: dict[str, Any]) -> FrozenState:
    """A ``FrozenState`` of values as a store keeps them (encoded ones: ``seam.encoded``),
    not walked: what a store is given is checked on its plain values."""
    return _state(values)


def _frozen_list(items: list[Any], height: int) -> FrozenList:
    f = FrozenList()
    list.extend(f, items)
    f._height = height
    return f


def _height(value: object) -> int:
    return value._height if isinstance(value, FrozenList | FrozenDict) else 0


def frozen_state(
    state: Mapping[str, Any], run_id: str, stored_as: str | None = None
) -> FrozenState:
    """A whole state, validated and frozen; ``stored_as``: the etag it was loaded from."""
    if isinstance(state, FrozenState) and stored_as is None:
        return state
    if not isinstance(state, Mapping):
        raise InvalidStateError(
            f"run {run_id!r}: state must be a dict (a JSON object), not {type(state).__name__}",
            run_id=run_id,
        )
    top = freeze(state, "", run_id, 0, typed=True)
    s = _state(dict(top))
    s._stored_as = stored_as
    if isinstance(state, FrozenState | Opened):  # the same values: their twin holds
        s._sealed = state._sealed
    return s


class Opened(dict[str, Any]):
    """A state as a load gives it, its values decoded, with the state as stored
    (``_sealed``, ``seam.encoded``): ``frozen_state`` keeps that as its twin."""

    __slots__ = ("_sealed",)
    _sealed: FrozenState | None


def delta_since(state: Mapping[str, Any], etag: str | None) -> Delta | None:
    """The changes that turn the stored state at ``etag`` into ``state``, if the
    runner knows them (an empty Delta: unchanged); None means: store it whole."""
    if etag is None or not isinstance(state, FrozenState):
        return None
    if state._stored_as == etag:
        return Delta({}, {})
    parent = state._parent
    if parent is not None and parent._stored_as == etag:
        return state._delta
    return None


def mark_stored(state: Mapping[str, Any], etag: str | None) -> None:
    """Note that ``state`` is now what the store holds at ``etag``."""
    if isinstance(state, FrozenState):
        state._stored_as, state._parent, state._delta = etag, None, None


def note_lengths(state: Mapping[str, Any], lengths: dict[str, int]) -> None:
    """Note the bytes of the JSON of ``state``'s values under these keys (a store that
    encoded them): measuring what a later step replaced then needs no encoding. Its
    values never change, so what is noted stays true."""
    if isinstance(state, FrozenState):
        if state._lengths is None:
            state._lengths = lengths
        else:
            state._lengths.update(lengths)


def noted_length(state: Mapping[str, Any], key: str) -> int | None:
    """What ``note_lengths`` noted for ``state[key]``, if anything."""
    lengths = state._lengths if isinstance(state, FrozenState) else None
    return None if lengths is None else lengths.get(key)


def is_checked(state: object) -> bool:
    """True for a state that went through ``freeze`` (a store need not walk it again)."""
    return isinstance(state, FrozenDict | CallRecords)


class CallRecords(tuple):  # type: ignore[type-arg] # tuple[Mapping[str, Any], ...]
    """The running step's journal as the runner keeps it: frozen records in the order
    of their index. Like ``FrozenState`` it remembers what it was made from -- the
    journal ``base``, the records it ``added`` there, those they ``replaced`` -- so a
    store that holds ``base`` writes only the added records, and the lease keeper
    merges two views without a pass over all of them: a step's 500th call costs what
    its first did."""

    base: tuple[Any, ...] | None
    added: tuple[Any, ...]
    replaced: tuple[Any, ...]
    sealed: CallRecords | None
    """Its records as a store is given them, through the codec (``seam.encoded``)."""
    plain: int | None
    """Of such an encoded journal: the bytes of the plain journal's JSON."""
    codec: object
    """Of such an encoded journal: the codec that made it."""

    def plus(self, record: Mapping[str, Any]) -> CallRecords:
        """These records with ``record`` (frozen) added, or in place of the one of its
        key (``call_key``)."""
        key = call_key(record)
        if not self or call_key(self[-1]) < key:
            return call_records(self + (record,), self, (record,), ())  # noqa: RUF005 - one memcpy
        # In key order already: its place by bisection (keyed calls land anywhere: their
        # keys are hashes), never a pass of ``call_key`` over every record.
        at = end = bisect.bisect_left(self, key, key=call_key)
        while end < len(self) and call_key(self[end]) == key:
            end += 1
        ordered = (*self[:at], record, *self[end:])
        return call_records(ordered, self, (record,), tuple(self[at:end]))


KEYED = "="
"""What starts the place of a keyed record (``call_key``): no task scope does."""


def call_key(record: Mapping[str, Any]) -> tuple[str, int]:
    """Where a record of a step's journal belongs: its task's scope (``"task"``; absent
    for the step's own task) and its index ``i`` there (``runner.tasks``) -- or, for a
    call given an explicit key (``"key"``), ``("=" + key, -1)``: the same whatever task
    or order made it, and apart from the operations made inside its function (scope
    ``"=" + key``, from 0). A journal keeps its records in the order of their keys."""
    key = record.get("key")
    if key is not None:
        return KEYED + key, -1
    return record.get("task", ""), record["i"]


def is_record(record: object) -> bool:
    """Whether ``record`` has the shape of a journal record: an object with an index
    ``i`` (an int from 0), a ``name``, and a ``task`` scope or a ``key`` (text) if any."""
    return (
        isinstance(record, dict)
        and type(record.get("i")) is int
        and record["i"] >= 0
        and isinstance(record.get("name"), str)
        and isinstance(record.get("task", ""), str)
        and isinstance(record.get("key", ""), str)
    )


def forget_base(calls: Sequence[Mapping[str, Any]]) -> None:
    """Note that ``calls`` is now the stored journal: what it was made from is needed no
    more (kept, each journal would hold every earlier one of the step: memory growing
    with the square of its calls)."""
    if isinstance(calls, CallRecords):
        calls.base, calls.added, calls.replaced = None, (), ()


def call_records(
    items: Iterable[Mapping[str, Any]],
    base: tuple[Any, ...] | None = None,
    added: tuple[Any, ...] = (),
    replaced: tuple[Any, ...] = (),
) -> CallRecords:
    """A ``CallRecords`` of frozen records (see there); records of no known order (as
    a store gives them back: in the order saved) put in the order of their keys."""
    new = CallRecords(items if base is not None else sorted(items, key=call_key))
    new.base, new.added, new.replaced = base, added, replaced
    new.sealed = new.plain = new.codec = None
    return new


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a frozen (or plain) JSON value."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


def check_json(value: object, run_id: str, what: str = "state") -> None:
    """Check a plain value against the JSON rules, naming the offending key."""
    freeze(value, "", run_id, 0, what)


def freeze(
    value: Any, path: str, run_id: str, depth: int, what: str = "state", *, typed: bool = False
) -> Any:
    """``value`` checked against the JSON rules, with its dicts and lists frozen;
    ``typed``: its models and dataclasses as their JSON (the state's values, see the top)."""
    if type(value) is str and value.isascii():  # the commonest value: no surrogate in it
        return value
    if isinstance(value, FrozenList | FrozenDict):
        if depth + value._height > MAX_DEPTH:
            _too_deep(path, run_id, what)
        if type(value) is FrozenState and depth:  # nested: keep the values, not the history
            copy = FrozenDict()
            dict.update(copy, value)
            copy._height = value._height
            return copy
        return value
    if isinstance(value, Mapping | list | tuple):
        if depth >= MAX_DEPTH:
            _too_deep(path, run_id, what)
        if isinstance(value, Mapping):
            items = {}
            for key, item in value.items():
                name = _key(key, path, run_id, what)
                items[name] = freeze(
                    item, f"{path}[{name!r}]", run_id, depth + 1, what, typed=typed
                )
            frozen = FrozenDict()
            dict.update(frozen, items)
            frozen._height = max(map(_height, items.values()), default=0) + 1
            return frozen
        children = [
            freeze(item, f"{path}[{i}]", run_id, depth + 1, what, typed=typed)
            for i, item in enumerate(value)
        ]
        return _frozen_list(children, max(map(_height, children), default=0) + 1)
    return _scalar(value, path, run_id, what, depth if typed else -1)


_NOT_TYPED: Any = object()


def json_of(value: object) -> Any:
    """A Pydantic model's or a dataclass instance's JSON (see the top); ``_NOT_TYPED``
    for anything else. Pydantic is used only when it is imported already."""
    kind: Any = type(value)
    if hasattr(kind, "__pydantic_fields__") and callable(getattr(value, "model_dump", None)):
        return value.model_dump(mode="json")  # type: ignore[attr-defined]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if "pydantic" in sys.modules:  # dates, enums, nested models as their JSON
            return _adapter(kind).dump_python(value, mode="json")
        return dataclasses.asdict(value)
    return _NOT_TYPED


@functools.lru_cache(maxsize=256)
def _adapter(kind: Any) -> Any:
    return sys.modules["pydantic"].TypeAdapter(kind)


def _scalar(value: Any, path: str, run_id: str, what: str, depth: int = -1) -> Any:
    """A JSON scalar checked; with a ``depth`` (>= 0: typed values allowed there), a
    model or a dataclass as its JSON -- on the path that would refuse it, at no cost
    to plain values."""
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):  # isascii: a flag, no scan
            raise _invalid(
                f"{what}{path} holds a lone surrogate (text that is not valid unicode); "
                "decode it properly or store it as base64",
                run_id,
            )
        return value if kind is str else str(value)
    if isinstance(value, int):
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            raise _invalid(
                f"{what}{path} is an integer beyond +-(2**53 - 1): Cosmos DB keeps "
                "numbers as doubles and would round it silently; store it as a string, "
                "e.g. str(n), and convert it back with int()",
                run_id,
            )
        return value if kind is int else int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _invalid(
                f"{what}{path} is {value}, which JSON cannot hold; store a string or None", run_id
            )
        if value == 0 and math.copysign(1.0, value) < 0:
            raise _invalid(
                f"{what}{path} is -0.0, which Cosmos DB returns as 0; store 0.0 (x + 0.0 "
                "turns -0.0 into 0.0)",
                run_id,
            )
        return value if kind is float else float(value)
    if depth >= 0 and (converted := json_of(value)) is not _NOT_TYPED:
        return freeze(converted, path, run_id, depth, what, typed=True)
    kind_name = type(value).__name__
    raise _invalid(f"{what}{path} is a {kind_name}, which is not JSON; {_do(what, value)}", run_id)


_PLAIN = "plain dict/list/str/int/float/bool/None"
_WHERE = {"state": "from steps", "call result": "from the call's function"}


def _do(what: str, value: object) -> str:
    """What the caller who gave a value that is not JSON does instead: a step returns
    plain values, a sender sends them."""
    a_set = isinstance(value, set | frozenset)
    convert = "e.g. list(...) of a set" if a_set else "convert it first"
    if what in _WHERE:
        return f"return {_PLAIN} {_WHERE[what]} ({convert})"
    verb = "send" if what.endswith("payload") else "give"
    return f"{verb} a {what} of {_PLAIN} ({convert})"


def _key(key: object, path: str, run_id: str, what: str = "state") -> str:
    if type(key) is str and key.isascii():
        return key
    if not isinstance(key, str):
        raise _invalid(
            f"{what}{path} has a {type(key).__name__} key {key!r}; JSON object keys must be str",
            run_id,
        )
    if _SURROGATE.search(key):
        raise _invalid(f"{what}{path} has a key with a lone surrogate: {key!r}", run_id)
    return key if type(key) is str else str(key)


def _too_deep(path: str, run_id: str, what: str) -> NoReturn:
    if len(path) > 80:
        path = f"{path[:40]}...{path[-30:]}"
    raise _invalid(
        f"{what}{path} nests deeper than {MAX_DEPTH} levels of dicts and lists; "
        "flatten it or store it as a JSON string",
        run_id,
    )


def _invalid(message: str, run_id: str) -> InvalidStateError:
    return InvalidStateError(f"run {run_id!r}: {message}", run_id=run_id)
