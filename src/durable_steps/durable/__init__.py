"""Code-first workflows: decorated functions with typed inputs and outputs.

    from durable_steps import durable

    @durable.step
    async def search(query: str) -> list[Doc]: ...        # a durable call in a run

    @durable.workflow
    async def research(question: str) -> Report: ...      # a Workflow the engine runs

    report = research.run("r-1", store, "why?")            # typed: Report
    handle = research.start("r-2", store, "why not?")      # RunHandle[Report]

The step list (``Workflow(name, [Step(...)])``) stays first-class; a code-first
workflow is one of those underneath (``_workflow``), and a decorated step is the
engine's ``call`` (``_step``). ``_types`` holds what both read from a signature.
The handle (``runs.handle``) is shared with step-list runs.
"""

from __future__ import annotations

from ._step import step
from ._workflow import Child, Flow, workflow

__all__ = ["Child", "Flow", "step", "workflow"]
