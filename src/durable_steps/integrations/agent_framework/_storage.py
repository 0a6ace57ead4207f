"""``DurableCheckpointStorage``: Agent Framework's ``CheckpointStorage`` on our stores.

Design.

*A chain is a run.* Agent Framework saves one ``WorkflowCheckpoint`` per superstep,
each naming the one before (``previous_checkpoint_id``): a workflow run's checkpoints
form a chain. Each chain is one of our runs -- ``af-chain.<first checkpoint id>``, of
workflow ``agent-framework:<workflow name>`` -- and each checkpoint is one completed
step of it, named by the checkpoint's id, its state the checkpoint's parts
(``_layout``). On Cosmos DB a run is a partition of its own, so every chain has its own
partition (never one per workflow name, whose 20 GB cap and hot partition Agent
Framework's own Cosmos storage has).

*A chain ends when its workflow does.* Agent Framework runs supersteps until no message
is in flight; the workflow has then finished unless a request waits for an answer
(``request_info``: a person in the loop). So a chain whose last checkpoint holds no
message and no pending request is ``completed`` -- final, and retention's
(``finished_ttl``, ``runs prune``) like any completed run -- and any other chain is
``waiting`` (nothing for a worker to run: no workflow of ours has its name, and it has
no wake time), which retention never deletes: a workflow paused for a person, or
killed mid-run, resumes whenever it is resumed. A chain that completes marks its
checkpoints' index runs completed too (they were written ``waiting``), so they go with
it. A checkpoint after the last of a completed chain starts a chain of its own: a
completed run is never reopened (on Cosmos DB its head may carry its expiry already).

*Each checkpoint is written once.* A checkpoint's id is claimed by a small index run
(``af-checkpoint.<id>``: its chain and step), created with our create-only save before
the chain's step is written; a second writer of the same id gets ``ConflictError``.
The step itself is a save conditioned on the chain's etag, so two processes that resume
from the same checkpoint cannot both append to its chain: the second gets
``ConflictError`` (never an overwrite). A crash between the two writes leaves an index
run whose chain does not name the id at that step: it is read as "no such checkpoint".

*A checkpoint costs its difference.* The storage keeps the last stored state of the
chains it wrote (a few, least recently used first out), so the next checkpoint of a
chain is saved as the parts that changed -- on the file store one journal record, on
Cosmos DB one segment and the head -- not the whole state. A checkpoint whose previous
one is not the last of its chain (a resume from an older checkpoint: a branch) starts a
chain of its own, whole.

*Older checkpoints load from history.* The latest checkpoint of a chain is its run's
state; an older one is the state after its step, read through the store's history
(``Store.load_at``) where the store keeps it.

*Listing is bounded.* ``list_checkpoint_ids`` / ``get_latest`` / ``list_checkpoints``
list the workflow's chains with our filtered listing (``list_runs(workflow=...)``: one
projected query on Cosmos DB, no state read), then read the heads (the ids) and only the
checkpoints asked for. ``get_latest`` is the chain whose last checkpoint has the latest
timestamp (the run's ``updated_at`` is the checkpoint's timestamp).

*Delete* marks the checkpoint's step deleted in the chain's head (a head-only write)
and removes its index run; a chain whose every checkpoint is deleted is deleted whole.

No pickle: values are JSON (``_values``); what cannot be kept is refused before
anything is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Literal

from agent_framework import WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from ... import ConflictError, InvalidRunIdError
from ...backend import (
    AsyncStore,
    Checkpoint,
    FrozenState,
    Store,
    ThreadedStore,
    check_run_id,
    evolve,
    frozen_state,
    mark_stored,
)
from ._layout import META, epoch, from_parts, to_parts, updates
from ._values import Values

WORKFLOW = "agent-framework:"
"""Our runs of a workflow's chains: ``workflow`` = this prefix + the workflow's name."""
INDEX_WORKFLOW = "agent-framework.checkpoint-index"
DELETED = "~deleted~"
_CACHED_CHAINS = 8
_log = logging.getLogger("durable_steps")


def _run_id(prefix: str, checkpoint_id: str) -> str:
    run_id = prefix + checkpoint_id
    try:
        return check_run_id(run_id)
    except InvalidRunIdError:  # an id our run ids cannot hold (a '/', too long): its hash
        return prefix + "sha256-" + hashlib.sha256(checkpoint_id.encode()).hexdigest()


def index_run(checkpoint_id: str) -> str:
    return _run_id("af-checkpoint.", checkpoint_id)


def chain_run(checkpoint_id: str) -> str:
    return _run_id("af-chain.", checkpoint_id)


def finished(checkpoint: WorkflowCheckpoint) -> bool:
    """Whether the workflow ended at ``checkpoint``: no message in flight (Agent
    Framework's runner stops there) and no request waiting for an answer."""
    return not checkpoint.messages and not checkpoint.pending_request_info_events


def _missing(checkpoint_id: str) -> WorkflowCheckpointException:
    return WorkflowCheckpointException(f"No checkpoint found with ID {checkpoint_id}")


class DurableCheckpointStorage:
    """Agent Framework's ``CheckpointStorage`` on a durable-steps store (file, memory,
    Cosmos DB, or any registered backend; blocking or async). ``types``: your classes
    that checkpoints may hold (dataclasses, Pydantic models, classes with
    ``to_dict``/``from_dict``), besides Agent Framework's own."""

    def __init__(self, store: Store | AsyncStore, *, types: Iterable[type] = ()) -> None:
        self.store: AsyncStore = ThreadedStore(store) if isinstance(store, Store) else store
        self._values = Values(types)
        self._chains: OrderedDict[str, Checkpoint] = OrderedDict()
        """Chain run id -> its checkpoint as this storage last stored or read it."""

    # -- save ---------------------------------------------------------------------------

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        """Store ``checkpoint`` once: a second save of its id raises ``ConflictError``,
        and so does an append to a chain that another writer extended meanwhile."""
        cid = checkpoint.checkpoint_id
        if not isinstance(cid, str) or not cid:
            raise WorkflowCheckpointException(f"checkpoint_id must be a non-empty str, not {cid!r}")
        parts = to_parts(checkpoint, self._values)  # refuses what cannot be kept: no I/O yet
        chain = await self._chain_to_extend(checkpoint.previous_checkpoint_id)
        run_id = chain.run_id if chain is not None else chain_run(cid)
        step = chain.step + 1 if chain is not None else 0
        index = index_run(cid)
        at = epoch(checkpoint.timestamp)
        status: Literal["completed", "waiting"] = "completed" if finished(checkpoint) else "waiting"
        try:
            await self.store.save(
                Checkpoint(
                    run_id=index,
                    step=0,
                    state={"chain": run_id, "step": step, "checkpoint_id": cid},
                    steps=(cid,),
                    status=status,
                    workflow=INDEX_WORKFLOW,
                    updated_at=at,
                )
            )
        except ConflictError as exc:
            raise ConflictError(
                f"checkpoint {cid!r} exists already: a checkpoint is written once (its id "
                "is taken by another save); nothing was written",
                run_id=index,
            ) from exc
        if chain is None:
            new = Checkpoint(
                run_id=run_id,
                step=0,
                state=frozen_state(parts, run_id),
                steps=(cid,),
                status=status,
                workflow=WORKFLOW + checkpoint.workflow_name,
                updated_at=at,
            )
        else:
            assert isinstance(chain.state, FrozenState)
            new = evolve(
                chain,
                step=step,
                state=chain.state.updated(updates(chain.state, parts), run_id),
                steps=(*chain.steps, cid),
                status=status,
                updated_at=at,
            )
        try:
            stored = await self.store.save(new)
        except BaseException:
            self._chains.pop(run_id, None)
            await self._drop_index(index)
            raise
        mark_stored(new.state, stored.etag)
        self._remember(evolve(stored, state=new.state))
        if new.done:
            await self._indexes_completed(new.steps[:-1])
        return cid

    async def _indexes_completed(self, checkpoint_ids: Iterable[str]) -> None:
        """The index runs of a completed chain's earlier checkpoints marked completed,
        so that retention takes them with it. Best effort: one left ``waiting`` (a crash
        here) is only kept longer; it still reads as its checkpoint's."""

        async def one(cid: str) -> None:
            index = await self.store.load(index_run(cid))
            if index is not None and index.status != "completed":
                await self.store.save(evolve(index, status="completed", updated_at=None))

        live = [cid for cid in checkpoint_ids if not cid.startswith(DELETED)]
        for outcome in await asyncio.gather(*map(one, live), return_exceptions=True):
            if isinstance(outcome, Exception):
                # A warning: an index run left waiting is only kept longer; it still reads as its
                # checkpoint's.
                _log.warning("a completed chain's index run stays waiting: %s", outcome)

    async def _chain_to_extend(self, previous: str | None) -> Checkpoint | None:
        """The chain whose last checkpoint is ``previous``, loaded (None: start a chain --
        no previous one, an unknown one, or one that is not its chain's last)."""
        if previous is None:
            return None
        for chain in reversed(self._chains.values()):
            if chain.steps and chain.steps[-1] == previous:
                self._chains.move_to_end(chain.run_id)
                return None if chain.done else chain
        found = await self._locate(previous)
        if found is None:
            return None
        run_id, step = found
        loaded = await self.store.load(run_id)
        if loaded is None or loaded.step != step or loaded.steps[-1:] != (previous,):
            return None
        if loaded.done:
            return None  # a completed chain is final: the next checkpoint starts one
        chain = evolve(loaded, state=frozen_state(loaded.state, run_id, stored_as=loaded.etag))
        self._remember(chain)
        return chain

    def _remember(self, chain: Checkpoint) -> None:
        self._chains[chain.run_id] = chain
        self._chains.move_to_end(chain.run_id)
        while len(self._chains) > _CACHED_CHAINS:
            self._chains.popitem(last=False)

    async def _drop_index(self, index: str) -> None:
        # Best effort: an index run whose chain does not name its id reads as missing.
        with contextlib.suppress(Exception):
            await self.store.delete(index)

    # -- reads --------------------------------------------------------------------------

    async def _locate(self, checkpoint_id: str) -> tuple[str, int] | None:
        """The chain and step of a checkpoint, from its index run (None: none)."""
        entry = await self.store.load(index_run(checkpoint_id))
        if entry is None or entry.state.get("checkpoint_id") != checkpoint_id:
            return None
        return str(entry.state["chain"]), int(entry.state["step"])

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        """The checkpoint of this id (``WorkflowCheckpointException`` when there is none)."""
        found = await self._locate(checkpoint_id)
        if found is None:
            raise _missing(checkpoint_id)
        run_id, step = found
        head = await self.store.load_head(run_id)
        if head is None or step >= len(head.steps) or head.steps[step] != checkpoint_id:
            raise _missing(checkpoint_id)  # a crashed save's claim, or a deleted one
        return await self._at(run_id, step, head)

    async def _at(self, run_id: str, step: int, head: Checkpoint) -> WorkflowCheckpoint:
        cached = self._chains.get(run_id)
        if cached is not None and cached.etag == head.etag and cached.step == step:
            state: Any = cached.state
        elif step == head.step:
            loaded = await self.store.load(run_id)
            if loaded is None:
                raise _missing(head.steps[step])
            state = loaded.state
        else:
            state = await self._older(run_id, step)
        return from_parts(state, self._values, WorkflowCheckpoint)  # type: ignore[no-any-return]

    async def _older(self, run_id: str, step: int) -> Any:
        """The state after an earlier step of the chain: the store's history."""
        older = await self.store.load_at(run_id, step)
        if older is None:
            raise WorkflowCheckpointException(f"the chain {run_id!r} is gone")
        return older.state

    async def _heads(self, workflow_name: str) -> list[Checkpoint]:
        """The heads of the workflow's chains (our filtered listing: no state read),
        oldest latest-checkpoint first."""
        infos = [i async for i in self.store.list_runs(workflow=WORKFLOW + workflow_name)]
        infos.sort(key=lambda i: i.updated_at or 0.0)
        heads = [await self.store.load_head(i.run_id) for i in infos]
        return [h for h in heads if h is not None]

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        """The ids of the workflow's checkpoints, chain by chain."""
        return [
            cid
            for head in await self._heads(workflow_name)
            for cid in head.steps
            if not cid.startswith(DELETED)
        ]

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        """The workflow's checkpoints, oldest first (each read: use
        ``list_checkpoint_ids`` or ``get_latest`` where ids or the latest do)."""
        found: list[WorkflowCheckpoint] = []
        for head in await self._heads(workflow_name):
            for step, cid in enumerate(head.steps):
                if not cid.startswith(DELETED):
                    found.append(await self._at(head.run_id, step, head))
        found.sort(key=lambda cp: epoch(cp.timestamp) or 0.0)
        return found

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        """The workflow's checkpoint of the latest timestamp: the last live checkpoint
        of the chain that was extended last."""
        for head in reversed(await self._heads(workflow_name)):
            live = [s for s, cid in enumerate(head.steps) if not cid.startswith(DELETED)]
            if live:
                return await self._at(head.run_id, live[-1], head)
        return None

    # -- delete -------------------------------------------------------------------------

    async def delete(self, checkpoint_id: str) -> bool:
        """Remove the checkpoint; False when there is none. The last live checkpoint of
        a chain removes the chain."""
        found = await self._locate(checkpoint_id)
        if found is None:
            return False
        run_id, step = found
        head = await self.store.load_head(run_id)
        if head is None or step >= len(head.steps) or head.steps[step] != checkpoint_id:
            await self._drop_index(index_run(checkpoint_id))
            return False
        self._chains.pop(run_id, None)
        steps = list(head.steps)
        steps[step] = DELETED + checkpoint_id
        if all(s.startswith(DELETED) for s in steps):
            await self.store.delete(run_id, etag=head.etag)
        else:
            await self.store.save_head(evolve(head, steps=tuple(steps)))
        await self._drop_index(index_run(checkpoint_id))
        return True

    async def close(self) -> None:
        """Nothing of its own to release: the store is the caller's to close."""
        self._chains.clear()


__all__ = ["DELETED", "INDEX_WORKFLOW", "META", "WORKFLOW", "DurableCheckpointStorage"]
