"""LangGraph graphs checkpointed on durable-steps stores.

    from durable_steps import store_from_env
    from durable_steps.integrations.langgraph import DurableSaver

    graph = builder.compile(checkpointer=DurableSaver(store_from_env()))
    graph.invoke(inputs, {"configurable": {"thread_id": "order-1042"}})

``DurableSaver`` is LangGraph's ``BaseCheckpointSaver`` (``get_tuple``, ``list``,
``put``, ``put_writes``, ``delete_thread``, their async twins, ``get_next_version``) on
any of our stores: the file store, the memory store, Cosmos DB, a registered backend.
It passes LangGraph's own judge, ``langgraph-checkpoint-conformance``, on each of them
(tests/integrations/test_langgraph_conformance.py).

Design.

*A thread is a run.* Everything of a thread is kept with one of our runs
(``lg.<thread id>``; its hash when the id breaks the run-id rules), as that run's
per-run items (``seam/items.py``: create-only appends and upserts, reads by key
order): on Cosmos DB the thread is a partition of its own, on the file store a few
append-only logs. The run's head (status ``completed``, workflow ``langgraph``: nothing
for a worker to take) is what ``list_runs``, ``delete`` and the store's ``finished_ttl``
see: ``delete_thread`` is the run's ``delete`` (its items go with it); a store with
``finished_ttl`` expires the thread that long after its last checkpoint (to within ten
minutes: a saver moves the head's time at most every ``TOUCH`` seconds -- one small
read, and a head-only write when it is older), with everything it holds.

*Items.* Per checkpoint namespace ``ns`` (a subgraph's checkpoints have their own):

- ``lg.cp.<ns>``: each checkpoint under its id with every hex digit inverted (LangGraph's
  ids are time-ordered uuid6, so key order is newest first: the latest checkpoint is the
  first item, a page of a list is a read after a key), the checkpoint without its
  channel values and its metadata in one record; after it, under ``<key>/<task>/...``,
  the pending writes made on top of it (``put_writes``: one record per call, a task's
  writes together), so one read of a page gives a checkpoint and its writes;
- ``lg.b.<ns>``: a channel's value under ``<channel> <version>``, written once per
  version -- a checkpoint names the versions of its channels and stores only those
  that changed (``new_versions``), as LangGraph's own savers do with their blobs; a
  version without a value (a trigger consumed) is not written at all, and a small one
  (``_writes.INLINE``: a trigger, a counter) is kept in the checkpoint's own record
  (its head's ``at`` says which checkpoint holds each such value), so a superstep is
  the tasks' writes and the checkpoint -- two appends;
- a list channel that grew by appending (``add_messages``, ``operator.add``) is stored
  as the items appended, naming the version it extends: when they are exactly what the
  superstep's tasks wrote (as the serializer wrote them), as a reference in the next
  checkpoint's record (``xs``: the writes' keys and places) -- the items are sent once,
  as the task's write; else under its version in ``lg.x.<ns>.<channel>``. A 5 KB
  message added to a 1 MB conversation sends about 5 KB. Reading it back is one read of
  the channel's extensions (and of the checkpoints' records when references are met:
  their sum is about the list's size) and a walk from the version asked for to its base;
- ``lg.ns``: the thread's namespaces (for a list without one).

A value over an item's size is split in chunks written before the record that names
them, under keys of that write alone, so a reader never meets a record without its
chunks and a second writer never overwrites a first one's.

*Written once.* A checkpoint's record is a create-only append, written after its
values: a second writer of the same checkpoint id gets our ``ConflictError`` and
nothing is overwritten. A value's record is create-only too (its version names it); a
task's write is kept as first written (a task run again writes the same), except the
special writes LangGraph replaces (an error, an interrupt, a resume), which are upserts.

*Interrupted supersteps.* The writes of each finished task of a superstep are kept on
top of its checkpoint as they come: a graph resumed after a crash gets them as the
checkpoint's ``pending_writes`` and runs only the tasks that had not finished.

*Values.* Through LangGraph's serializer (``JsonPlusSerializer``, pickle fallback off;
or the ``serde`` given); in the item's JSON its bytes as latin-1 text when they are
mostly text (about their own size), else base64. *Sealed.* Per-run items are not
encoded by the store, so the saver puts each record's payload (a checkpoint with its
metadata, a channel value or extension, a task's writes) through the store's
``codec`` itself, as the store's own envelope (``seam.codec``: key id, check value,
compression), authenticated with the run, the item kind and the key: a payload moved
to another thread, channel, version or checkpoint does not open
(``CorruptCheckpointError``); a wrong or missing key is ``CodecError`` naming its id.
The head says ``"e": 1``; chunks split the sealed text. In the clear stays only what
records are found by -- ids, parent, channel names and versions, task ids and paths,
the serializer's type name -- no value of the graph's; metadata (which ``list``
filters on) is sealed with its checkpoint and filtered after it is opened. A value
that cannot be encoded, or that a serde would pickle, is ``InvalidStateError`` before
anything of its checkpoint is written; a stored pickle is never read.

*Sync and async* share one implementation: the saver's operations are programs of
store requests -- reads (``_reads``), writes (``_writes``), removals (``_prune``),
copies (``_copy``) -- carried out by a blocking and an async driver (``_requests``).
LangGraph may send a task's writes and the next checkpoint at once (two threads, or
two tasks): a put that refers to a write this saver is storing waits for it, and
stores the items itself when that write failed.

*Pruning.* ``prune`` (``keep_latest``, ``delete``) and ``delete_for_runs`` remove
checkpoints with their writes (``Store.delete_items``); a staying checkpoint whose
list refers to what goes gets that list written whole first (``_prune``).

*Copies.* ``copy_thread`` writes every record of a thread again under another
(``_copy.py``): opened and sealed anew, since a sealed record names its thread.

Not supported: a checkpoint id that is not LangGraph's (hex digits and ``-``); ``prune``
or ``delete_for_runs`` on a store without ``delete_items`` (a ``StoreError`` says so).
"""

from __future__ import annotations

from importlib import metadata as _metadata

from durable_steps import MissingExtraError

from .._common import check_release

INSTALL = "pip install 'durable-steps[langgraph]'"
SUPPORTED = (4, 1), (5, 0)
"""The langgraph-checkpoint versions (the saver interface) this works with and is tested
on: >=4.1,<5 (the ``[langgraph]`` extra pins it, and langgraph>=1.2,<2; CI runs the
lowest and the newest)."""

try:
    import langgraph.checkpoint.base  # noqa: F401 - whether it is there at all

    LANGGRAPH_CHECKPOINT_VERSION = _metadata.version("langgraph-checkpoint")
except (ImportError, _metadata.PackageNotFoundError) as exc:
    raise MissingExtraError(
        f"durable_steps.integrations.langgraph needs LangGraph (langgraph>=1.2,<2, "
        f"langgraph-checkpoint>=4.1,<5): {INSTALL} (missing: {getattr(exc, 'name', None) or exc})"
    ) from exc

check_release("langgraph", "langgraph-checkpoint", LANGGRAPH_CHECKPOINT_VERSION, SUPPORTED, INSTALL)

from ._saver import DurableSaver  # noqa: E402 - only once the version is known

__all__ = ["DurableSaver"]
