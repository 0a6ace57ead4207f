"""Typed state for step-list workflows: models and dataclasses as state values and step
returns, stored as plain JSON and typed back from the code, never from the store."""

from __future__ import annotations

import dataclasses
import datetime
import json
import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel

import durable_steps as ds


class Plan(BaseModel):
    steps: list[str]
    due: datetime.date


@dataclasses.dataclass
class Budget:
    limit: int
    spent: int = 0


class State(BaseModel):
    question: str
    plan: Plan | None = None
    budget: Budget | None = None
    answer: str | None = None


def plan(state: State) -> dict[str, object]:
    assert isinstance(state, State)  # typed from Workflow(state=State)
    return {"plan": Plan(steps=[state.question, "write"], due=datetime.date(2026, 12, 6))}


def budget(state: State) -> Budget:
    assert state.plan is not None and isinstance(state.plan.due, datetime.date)
    return Budget(limit=len(state.plan.steps))  # a dataclass's fields are the updates


def answer(state: State) -> dict[str, object]:
    state.question = "mutated"  # a fresh object per step: nothing stored changes
    return {"budget": Budget(limit=state.limit if hasattr(state, "limit") else 9, spent=1)}


def finish(state: State) -> dict[str, str]:
    assert state.question != "mutated" and state.budget == Budget(limit=9, spent=1)
    return {"answer": f"{state.question} in {len(state.plan.steps)} steps"}  # type: ignore[union-attr]


TYPED = ds.Workflow(
    "typed-state",
    [
        ds.Step("plan", plan),  # type: ignore[arg-type]
        ds.Step("budget", budget),  # type: ignore[arg-type]
        ds.Step("answer", answer),  # type: ignore[arg-type]
        ds.Step("finish", finish),  # type: ignore[arg-type]
    ],
    state=State,
)


def test_models_and_dataclasses_are_state_values_stored_as_json(tmp_path: Path) -> None:
    """A step may return a model or a dataclass, or put them among its updates; they are
    stored as their JSON, and the next step gets them back as their types."""
    run_id = f"ts-{uuid.uuid4().hex[:12]}"
    with ds.FileStore(tmp_path) as store:
        final = TYPED.run(run_id, store, input={"question": "why"})
        assert final == {
            "question": "why",
            "plan": {"steps": ["why", "write"], "due": "2026-12-06"},
            "limit": 2,
            "spent": 0,
            "budget": {"limit": 9, "spent": 1},
            "answer": "why in 2 steps",
        }
        result = ds.handle_for(store, run_id, State).result()
        assert result.plan == Plan(steps=["why", "write"], due=datetime.date(2026, 12, 6))
        assert result.budget == Budget(limit=9, spent=1)
    # what is on disk is plain JSON: no class name anywhere
    stored = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert "Plan" not in stored and "Budget" not in stored
    assert json.dumps({"due": "2026-12-06"}, separators=(",", ":"))[1:-1] in stored


def test_a_state_that_does_not_validate_names_the_step_the_field_and_the_type() -> None:
    """A state that is not a valid ``Workflow(state=...)`` fails the step before its
    function runs, naming the step, the field and the type."""
    with pytest.raises(ds.InvalidStateError) as caught:
        TYPED.run(f"ts-{uuid.uuid4().hex[:12]}", ds.MemoryStore(), input={"question": 3})
    message = str(caught.value)
    assert "step 'plan'" in message and "question" in message and "State" in message


def test_a_step_returning_a_dataclass_is_checked_by_its_annotation() -> None:
    """A step annotated to return a dataclass has what it returns validated as it."""

    def bad(state: object) -> Budget:
        return {"limit": "lots"}  # type: ignore[return-value]

    with pytest.raises(ds.InvalidStateError, match=r"step 'bad' returned is not a valid Budget"):
        ds.run(f"ts-{uuid.uuid4().hex[:12]}", [ds.Step("bad", bad)], ds.MemoryStore())  # type: ignore[arg-type]


def test_a_replaced_workflow_is_typed_once() -> None:
    """A typed workflow copied with another version still hands each step its state once
    validated (not a model validated again as a model)."""
    v2 = dataclasses.replace(TYPED, version="2")
    assert (
        v2.run(f"ts-{uuid.uuid4().hex[:12]}", ds.MemoryStore(), input={"question": "q"})["answer"]
        == "q in 2 steps"
    )
