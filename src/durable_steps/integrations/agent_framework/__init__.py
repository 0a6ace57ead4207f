"""Microsoft Agent Framework workflows, checkpointed on durable-steps stores.

    from agent_framework import WorkflowBuilder
    from durable_steps import store_from_env
    from durable_steps.integrations.agent_framework import DurableCheckpointStorage

    storage = DurableCheckpointStorage(store_from_env(), types=[MyRequest])
    workflow = WorkflowBuilder(start_executor=start, checkpoint_storage=storage).build()

``DurableCheckpointStorage`` is Agent Framework's ``CheckpointStorage`` protocol
(``save``, ``load``, ``list_checkpoints``, ``list_checkpoint_ids``, ``get_latest``,
``delete``; async) on any of our stores: the file store, the memory store, Cosmos DB,
a registered backend. A workflow run's chain of checkpoints is one of our runs (its own
partition on Cosmos DB), each checkpoint written once (a second writer gets
``ConflictError``), each costing what changed since the previous one; values are JSON,
never pickled. The design is at the top of ``_storage.py``; the JSON of values in
``_values.py``; a checkpoint's parts in ``_layout.py``.

What is keyed by what Agent Framework identifies. This integration makes no durable
call (``call``): Agent Framework itself decides what survives a crash -- a checkpoint
after each superstep, resumed from by its id -- and an executor's work within a
superstep is Agent Framework's to run again when the superstep under way is cut (a
call there would be numbered by the order the runner delivers messages, which Agent
Framework leaves undefined across sources: so none is made). The durable unit is the
checkpoint, and it is kept under Agent Framework's own identity, never a count of ours:
the checkpoint's id names its index run (``af-checkpoint.<id>``) and its chain's step;
its superstep (``iteration_count``) and each executor's state (by executor id: the
``["x", EXECUTOR, FIELD]`` parts) are inside it. A resume asks for a checkpoint id, so
what is found is that checkpoint or ``WorkflowCheckpointException``, never another's.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from durable_steps import MissingExtraError

from .._common import check_release

INSTALL = "pip install 'durable-steps[agent-framework]'"
SUPPORTED = (1, 0), (2, 0)
"""The agent-framework-core versions this works with and is tested on: >=1.0,<2 (the
``[agent-framework]`` extra pins the same range; CI runs the lowest and the newest)."""

try:
    import agent_framework  # noqa: F401 - whether it is there at all

    # The distribution's version: agent_framework.__version__ is "0.0.0" in 1.0.0 (it
    # asked for the metadata of a distribution named "agent_framework").
    AGENT_FRAMEWORK_VERSION = _metadata.version("agent-framework-core")
except (ImportError, _metadata.PackageNotFoundError) as exc:
    raise MissingExtraError(
        f"durable_steps.integrations.agent_framework needs Microsoft Agent Framework "
        f"(agent-framework-core>=1.0,<2): {INSTALL} (missing: {getattr(exc, 'name', None) or exc})"
    ) from exc


check_release(
    "agent_framework", "agent-framework-core", AGENT_FRAMEWORK_VERSION, SUPPORTED, INSTALL
)

from ._storage import DurableCheckpointStorage  # noqa: E402 - only once the version is known

__all__ = ["DurableCheckpointStorage"]
