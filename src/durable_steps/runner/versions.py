"""Versions of a workflow's code, and the runs pinned to them.

Design. ``Workflow(name, steps, version="2026-12")`` names the version of its code. A
run is *pinned* to the version it began on (``Checkpoint.version``): ``Workflow.start``
records it, and so does the first claim of a run that has none yet -- a run started
by name (``runs start`` without ``--version``), or one stored before versions existed.
From then on:

- a claim by a ``Workflow`` of another version refuses the run before anything runs
  (``StepMismatchError``, nothing written): a run finishes on the code it began on;
- workers list only the runs of the versions they serve, and the unpinned ones
  (``serving``: a ``RunFilter.versions`` the stores apply), so during a deploy old and
  new workers run side by side, each taking its own runs; runs of a version that no
  worker serves are left alone, and ``runs list --version V`` shows them;
- a change inside one version's code that must not reach runs already past it goes
  behind ``patched("change-id")`` (``patches``);
- ``upgrade_run`` (``upgrade``) moves a run to another version explicitly, after
  checking its completed steps against the new step list.

A plain ``run()`` (no workflow) has no version and is never refused for one; a
completed run is final and returns its state whatever the version asking.
"""

from __future__ import annotations

from ..seam.checkpoint import Checkpoint, evolve
from ..seam.errors import StepMismatchError
from ..seam.rules import check_name


def check_version(version: object) -> str | None:
    """A ``Workflow(version=)``, checked: printable text, or None (no version)."""
    if version is None:
        return None
    return check_name(version, "workflow version")


def check_pinned(loaded: Checkpoint, workflow: str | None, version: str | None) -> None:
    """Refuse, before anything runs, a run pinned to another version than ``version``
    of ``workflow``'s code; an unpinned run is pinned by the claim (``pin``)."""
    if workflow is None or loaded.version is None or loaded.version == version:
        return
    if loaded.status == "completed":
        return  # final: its state is returned, nothing runs
    run_id = loaded.run_id
    move = f" --to {version}" if version is not None else ""
    raise StepMismatchError(
        f"run {run_id!r} runs on version {loaded.version!r} of workflow "
        f"{loaded.workflow or workflow!r}, and this code is "
        f"{'version ' + repr(version) if version is not None else 'unversioned'}; nothing "
        f"was run. Let a worker of version {loaded.version!r} run it (durable-steps worker "
        f"--version {loaded.version}), or move it to this code explicitly: durable-steps "
        f"runs upgrade {run_id}{move} --workflow MODULE:ATTR",
        run_id=run_id,
    )


def pin(claim: Checkpoint | None, workflow: str | None, version: str | None) -> Checkpoint | None:
    """``claim`` pinned to ``version`` if a workflow claims it and it is not pinned yet."""
    if claim is None or workflow is None or claim.version is not None or version is None:
        return claim
    return evolve(claim, version=version)


def serving(versions: set[str | None]) -> tuple[str | None, ...]:
    """The versions a worker lists runs of: those it serves, and the unpinned runs
    (None), which its first claim pins to its own version."""
    return (*sorted(v for v in versions if v is not None), None)
