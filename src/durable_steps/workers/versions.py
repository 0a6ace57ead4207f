"""Which of its code's workflows a worker serves: ``durable-steps worker --version V``
(``runner.versions`` has the design of versions).

A worker serves the versions of the ``Workflow``s it loads (MODULE:ATTR) by default.
``--version`` (repeatable) narrows that to the named versions, so one image that
holds two versions of a workflow (``AGENT_V1``, ``AGENT_V2``, same name) can run as
the old or the new fleet. A version that the code does not have is refused before
anything runs: a worker never claims runs it cannot run on their own code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..runner.workflow import Workflow
from ..seam.errors import ConfigurationError


def select_versions(workflows: Iterable[Workflow], versions: Sequence[str]) -> list[Workflow]:
    """The workflows of ``versions`` (all of them when none is named)."""
    found = list(workflows)
    if not versions:
        return found
    have = {w.version for w in found}
    if missing := sorted(set(versions) - {v for v in have if v is not None}):
        shown = ", ".join(sorted(repr(v) for v in have if v is not None)) or "none"
        raise ConfigurationError(
            f"--version {', '.join(missing)}: the workflows loaded have no such version "
            f"(their versions: {shown}); deploy the code of that version, or name one of "
            "those (Workflow(name, steps, version=...))",
            variable="--version",
        )
    return [w for w in found if w.version in versions]
