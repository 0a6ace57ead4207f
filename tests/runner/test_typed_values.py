"""Typed values (``runner.typed``): a call or a step may return a Pydantic model; a call's
comes back as the same type on its first run and on replay, the type taken from the
code (the return annotation or ``returns=``), never from the store."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import durable_steps as ds

from ..conftest import Api


class Plan(BaseModel):
    steps: list[str]
    cost: float = 0.0


class Crash(Exception):
    pass


def test_a_call_returns_its_model_on_the_first_run_and_on_replay(api: Api, run_id: str) -> None:
    """A call annotated ``-> Plan`` and one given ``returns=Plan`` each return a Plan,
    recorded as plain JSON; after a crash they replay, without running, as equal Plans;
    a step that returns a model has its fields merged as its updates."""
    ran: list[str] = []
    seen: list[Any] = []

    def plan(question: str) -> Plan:
        ran.append("plan")
        return Plan(steps=[question, "answer"], cost=0.5)

    def search() -> dict[str, Any]:
        ran.append("search")
        return {"steps": ["search"]}

    crash = [True]

    async def agent(state: Any) -> Plan:
        first = await ds.call_async("plan", plan, "q")
        second = await ds.call_async("search", search, returns=Plan)
        seen.append((first, second))
        if crash[0]:
            raise Crash
        return Plan(steps=first.steps + second.steps, cost=first.cost)

    with pytest.raises(Crash):
        api.run(run_id, [api.step("agent", agent)])
    cp = api.store.load(run_id)
    assert [r["result"] for r in cp.calls] == [
        {"steps": ["q", "answer"], "cost": 0.5},
        {"steps": ["search"], "cost": 0.0},
    ]
    crash[0] = False
    state = api.run(run_id, [api.step("agent", agent)])
    assert ran == ["plan", "search"]  # replayed, not run again
    assert all(type(a) is Plan and type(b) is Plan for a, b in seen)
    assert seen[0] == seen[1]
    assert state == {"steps": ["q", "answer", "search"], "cost": 0.5}


def test_a_recorded_result_that_no_longer_validates_is_a_clear_error(run_id: str) -> None:
    """A recorded result that is not a valid instance of the type the code now declares
    (the model changed) is InvalidStateError naming the call, the type and the field --
    never a silent dict; the record stays as it was."""
    store = ds.MemoryStore()

    def loose() -> dict[str, Any]:
        return {"steps": "not a list"}

    def agent(state: Any) -> dict[str, Any]:
        ds.call("plan", loose)
        raise Crash

    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("agent", agent)], store)

    def typed(state: Any) -> dict[str, Any]:
        return {"plan": ds.call("plan", loose, returns=Plan).steps}

    with pytest.raises(ds.InvalidStateError) as caught:
        ds.run(run_id, [ds.Step("agent", typed)], store)
    message = str(caught.value)
    assert "call 0 'plan'" in message and "Plan" in message and "steps" in message
    cp = store.load(run_id)
    assert cp is not None and cp.calls[0]["result"] == {"steps": "not a list"}


class Sent(BaseModel):
    kind: str = Field(alias="type")
    note: str | None = None


def test_recorded_by_alias_and_only_the_fields_set_when_the_type_says_so(run_id: str) -> None:
    """A call's model is recorded by alias (so a model whose fields have aliases replays);
    ``Annotated[T, Recorded(exclude_unset=True)]`` records only the fields that were set,
    and the replayed value has those same fields set -- also inside an SDK-like
    dataclass that holds such models."""

    @dataclass
    class Reply:
        items: list[Sent]
        id: str | None = None

    ran: list[str] = []
    seen: list[Any] = []

    def reply() -> Reply:
        ran.append("reply")
        return Reply(items=[Sent(type="text")], id="r")

    crash = [True]

    def step(state: Any) -> dict[str, Any]:
        seen.append(
            ds.call("reply", reply, returns=Annotated[Reply, ds.Recorded(exclude_unset=True)])
        )
        seen.append(ds.call("plain", lambda: Sent(type="x"), returns=Sent))
        if crash[0]:
            raise Crash
        return {}

    store = ds.MemoryStore()
    with pytest.raises(Crash):
        ds.run(run_id, [ds.Step("s", step)], store)
    cp = store.load(run_id)
    assert cp is not None
    assert [r["result"] for r in cp.calls] == [
        {"items": [{"type": "text"}], "id": "r"},
        {"type": "x", "note": None},
    ]
    crash[0] = False
    ds.run(run_id, [ds.Step("s", step)], store)
    assert ran == ["reply"]
    assert seen[0] == seen[2] and seen[1] == seen[3] and type(seen[2]) is Reply
    assert seen[2].items[0].model_fields_set == {"kind"}


def test_a_model_from_a_call_without_a_declared_type_is_refused(run_id: str) -> None:
    """A call whose function returns a model but declares no type fails at once with
    InvalidStateError saying how to declare it: on replay it could only be a dict."""
    store = ds.MemoryStore()

    def step(state: Any) -> dict[str, Any]:
        return {"p": ds.call("plan", lambda: Plan(steps=[]))}

    with pytest.raises(ds.InvalidStateError, match="returns=Plan"):
        ds.run(run_id, [ds.Step("s", step)], store)
    cp = store.load(run_id)
    assert cp is not None and cp.calls == ()


def test_a_step_with_returns_validates_what_it_returns(run_id: str) -> None:
    """``Step(returns=Plan)``: a returned dict is validated as a Plan (defaults filled in)
    before its fields become updates; one that is not a Plan is InvalidStateError naming
    the step and the type, and the previous checkpoint stays."""
    store = ds.MemoryStore()
    good = ds.Step("good", lambda s: {"steps": ["a"]}, returns=Plan)
    assert ds.run(run_id, [good], store) == {"steps": ["a"], "cost": 0.0}
    bad = ds.Step("bad", lambda s: {"steps": 3}, returns=Plan)
    with pytest.raises(ds.InvalidStateError, match=r"step 'bad'.*Plan"):
        ds.run(f"{run_id}-2", [good, bad], store)
    cp = store.load(f"{run_id}-2")
    assert cp is not None and cp.steps == ("good",)


def test_importing_durable_steps_imports_no_pydantic() -> None:
    """Pydantic stays optional: ``import durable_steps`` (and a run without models) does
    not import it."""
    code = (
        "import sys, durable_steps as ds\n"
        "ds.run('r', [ds.Step('s', lambda s: {'x': ds.call('c', lambda: 1)})], ds.MemoryStore())\n"
        "print('pydantic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
