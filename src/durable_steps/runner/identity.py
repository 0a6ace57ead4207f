"""A call's identity within its step, and the replays that depart from its record.

A durable operation of a step is found again on replay by its identity. By default
that is its place: its index in the scope (task) that makes it (``tasks``), which is
right when the step's code makes the same operations in the same order in each task.
A framework that runs tool calls concurrently, or whose live and replayed paths create
tasks differently, cannot promise that; but it knows what each call is -- a model's
``tool_call_id``, a model request's place in its conversation. ``call(name, fn, ...,
key=k)`` gives the call that identity: it is recorded under ``k`` and replays by it,
whatever task, scope or order makes it. A key names one call of its step: a second
call with the same key in one attempt is refused (``ValueError``), unless the first
raised (it recorded nothing). ``key``, ``retry`` and ``returns`` are ``call``'s own
keyword arguments, never passed to ``fn``; when ``fn`` declares a parameter of one of
those names and the caller passes it, ``TypeError`` names the escape
(``functools.partial(fn, key=...)``) -- loud, never silently kept from ``fn``.

Records (the journal's, ``Checkpoint.calls``): an unkeyed one carries its place,
``{"i": 3}`` or ``{"i": 0, "task": "1"}``; a keyed one ``{"key": "tool:call_7", "i":
0}`` (``i`` is always 0 there, so that every reader of records finds one). Where each
belongs: ``seam.state.call_key`` -- ``("=" + key, -1)`` for a keyed one. Inside a keyed
call's function, its own operations are numbered in the scope ``"=" + key``, from 0:
the same whatever task made the call. Records of earlier versions have no keys: they
load and replay by place, as they did: a keyed call takes its place in its task's
numbering too, and with no record under its key it takes the unkeyed record of its
kind and name at that place as its own (``Journal._unkeyed``) -- so a run recorded by
an earlier version and resumed by this one replays, or diverges loudly, never runs a
recorded call again unnoticed.

A divergence is an error, never a warning (``NondeterminismError``, a
``StepMismatchError``): a step that asks for an operation the record has under another
name (or kind) at that place or key, or that completes -- or suspends -- while records
of its were never asked for, would run a recorded call again (an email sent twice) or
lose what it returned. It is raised in the step through ``StepInterrupted``, or when
the step ends, and the runner fails the run with the step's records kept, before any
save that would drop them (``run``); ``resume_run`` retries the step after the code is
fixed. When a step suspends, its other tasks may not have reached their records yet
(timing): only the scopes that slept or waited are judged then (``Asked.unasked``),
the rest when the step completes. Operations made inside a call replayed from its
result are not asked again, rightly: not a divergence.

``Step(..., replay="lenient")`` opts a step that is nondeterministic by design out: an
operation asked under another name runs anew and its record is replaced; records not
asked for are dropped as the step completes; each is logged at INFO, by name. The
cost: what such a record returned is lost, and a changed call may run twice.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..seam.errors import NondeterminismError

SUSPENDING = frozenset(("sleep", "wait", "receive", "await_child"))
"""Operations that can suspend their step (``Asked.unasked``)."""
RESERVED = ("key", "retry", "returns")
"""``call``'s own keyword arguments: never passed to ``fn``."""
MAX_KEY = 512
"""The longest call key (a framework's id, a place in a conversation)."""
_declares: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()
"""Which of ``RESERVED`` a function declares as parameters, found once per function."""


def reserved(name: str, fn: Callable[..., Any], **given: Any) -> None:
    """Refuse ``key=``, ``retry=`` or ``returns=`` given to ``call`` when ``fn`` declares
    a parameter of that name too: the caller may have meant ``fn``'s, which ``call``
    would silently keep from it."""
    passed = [k for k, v in given.items() if v is not None]
    if not passed:
        return
    if clash := [k for k in passed if k in _declared(fn)]:
        arg = clash[0]
        raise TypeError(
            f"call({name!r}, fn, ..., {arg}=...): {arg}= is call()'s own argument (never "
            f"passed to fn), and fn declares a parameter {arg!r} too, so it is unclear "
            f"which one is meant. To pass it to fn, bind it first: "
            f"call({name!r}, functools.partial(fn, {arg}=...), ...)"
        )


def _declared(fn: Callable[..., Any]) -> frozenset[str]:
    target = getattr(fn, "__func__", fn)
    with contextlib.suppress(TypeError):  # not weakly referable: looked at every time
        if (names := _declares.get(target)) is not None:
            return names
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin): nothing to clash
        return frozenset()
    bound = fn.keywords if isinstance(fn, functools.partial) else {}  # the escape
    names = frozenset(
        p
        for p, v in params.items()
        if p in RESERVED and v.kind != v.POSITIONAL_ONLY and p not in bound
    )
    with contextlib.suppress(TypeError):
        _declares[target] = names
    return names


def check_key(name: str, key: object) -> str | None:
    """A call's ``key=``, checked: None, or text of 1 to ``MAX_KEY`` characters."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise TypeError(
            f"call({name!r}, ..., key={key!r}): a key is text that names the call within its "
            "step (an id the framework gave it, its place: f'tool:{call_id}'), not "
            f"{type(key).__name__}"
        )
    if not 1 <= len(key) <= MAX_KEY:
        raise ValueError(
            f"call({name!r}, ..., key=...): a key is text of 1 to {MAX_KEY} characters, "
            f"not {len(key)}"
        )
    return key


def label(where: Mapping[str, Any], name: str, kind: str = "call") -> str:
    """An operation as errors name it: ``llm (3)``, ``llm (1/0)`` in task 1, ``lookup
    [call_7]`` for a call keyed ``call_7``; kinds other than calls named too."""
    what = name if kind == "call" else f"{kind} {name}"
    if "key" in where:
        return f"{what} [{where['key']}]"
    task = where.get("task")
    return f"{what} ({task}/{where['i']})" if task else f"{what} ({where['i']})"


def labels(records: Iterable[Mapping[str, Any]]) -> list[str]:
    return [label(r, r["name"], r.get("kind", "call")) for r in records]


class Asked:
    """What one step attempt asked of its record (see the top)."""

    __slots__ = ("asked", "keys", "replayed", "waited")

    def __init__(self) -> None:
        self.asked: list[str] = []
        """The operations asked for, in order (``NondeterminismError.asked``)."""
        self.keys: dict[str, bool] = {}
        """The keys asked for: True while the keyed call runs or once it returned (a
        second call with it is refused), False once it raised."""
        self.replayed: set[str] = set()
        """The inner scopes of calls replayed from their results."""
        self.waited: set[str] = set()
        """The scopes that made a sleep or a wait."""

    def take_key(self, key: str, name: str, where: str) -> None:
        if self.keys.get(key):
            raise ValueError(
                f"{where} asked twice for a call keyed {key!r} ({name!r}): a key names one "
                "call of its step. Give each call its own key (an id the framework gives "
                "it, or its place), or none"
            )
        self.keys[key] = True

    def note(self, where: Mapping[str, Any], kind: str, name: str) -> None:
        self.asked.append(label(where, name, kind))
        if kind in SUSPENDING:
            self.waited.add(where.get("task", ""))

    def release(self, where: Mapping[str, Any]) -> None:
        """The keyed call of ``where`` raised, recording nothing: it may be asked again."""
        key = where.get("key")
        if key is not None:
            self.keys[key] = False

    def unasked(
        self,
        records: Iterable[Mapping[str, Any]],
        made: Callable[[str], int],
        *,
        suspended: bool,
    ) -> list[Mapping[str, Any]]:
        """The ``records`` never asked for (``made``: how many operations a scope made),
        or, ``suspended``, those after the place of a sleep or wait in its scope."""
        return [
            r
            for r in records
            if (r.get("key") not in self.keys if "key" in r else
                r["i"] >= made(r.get("task", "")))
            and (not suspended or ("key" not in r and r.get("task", "") in self.waited))
            and not self._inside_replayed(r.get("task", ""))
        ]  # fmt: skip

    def _inside_replayed(self, scope: str) -> bool:
        return bool(self.replayed) and any(
            scope == s or scope.startswith(s + ".") for s in self.replayed
        )


def divergence(
    what: str, *, run_id: str, step: int, step_name: str, records: Any, asked: list[str]
) -> NondeterminismError:
    """The ``NondeterminismError`` of a step, ``what`` saying how it departed."""
    recorded = labels(records)
    shown = ", ".join(recorded[:8]) + (", ..." if len(recorded) > 8 else "")
    also = ", ".join(asked[:8]) + (", ..." if len(asked) > 8 else "")
    return NondeterminismError(
        f"{what}. The step's code changed, or it is not deterministic between calls "
        f"(recorded: {shown or 'nothing'}; asked: {also or 'nothing'}). Going on would "
        "run a recorded call again or lose what it returned, so the run is failed with "
        "its record kept: make the step ask for the same calls (give calls made in no "
        "fixed order a key: call(..., key=...)), or mark it Step(..., "
        "replay='lenient') if it is nondeterministic by design; then resume_run()",
        run_id=run_id,
        step=step,
        step_name=step_name,
        recorded=recorded,
        asked=list(asked),
    )
