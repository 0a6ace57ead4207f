"""What a store backend is written with: the interface it implements and the pieces
every store shares, so that a backend of another package keeps the same contract as
the built-in ones (``docs/stores.md``, "Writing a backend").

A backend subclasses ``Store`` (and ``AsyncStore``, or wraps its ``Store`` in a
``ThreadedStore``), stores each checkpoint as the one JSON document every store keeps
(``to_document``/``head_document`` and ``dumps`` to write, ``decode`` to read), applies
the rules every store applies before any I/O (``check_run_id``, ``check_size``), raises
the errors every store raises (``conflict``, ``delete_conflict``), and is registered as a
``Backend`` under the entry point group ``durable_steps.stores``::

    [project.entry-points."durable_steps.stores"]
    sqlite = "durable_sqlite:BACKEND"

Then ``store_for("sqlite:/var/runs.db")``, ``DURABLE_STORE=sqlite:/var/runs.db``, the
command line and ``pytest --durable-backends=sqlite`` (the contract suite on it, with
the backend's ``fresh``) all reach it.
"""

from __future__ import annotations

from .seam.checkpoint import (
    NOT_READ,
    CallRecord,
    Checkpoint,
    MailboxRecord,
    RunInfo,
    evolve,
    head_of,
)
from .seam.codec import Codec, is_envelope, place
from .seam.document import decode, dumps, head_document, info_of, to_document
from .seam.errors import conflict, corrupt_error, delete_conflict
from .seam.history import StepRecord, not_kept
from .seam.items import MAX_ITEM_BYTES, Item, item_exists, item_json
from .seam.rules import RunFilter, check_run_id, check_size, head_etag, state_limit
from .seam.state import FrozenState, frozen_state, mark_stored
from .seam.store import ORPHAN_AGE, AsyncStore, Store, ThreadedStore
from .stores.registry import GROUP, Backend, Opening

__all__ = [  # noqa: RUF022 - grouped by what a backend author looks for
    # the interface
    "AsyncStore",
    "Store",
    "ThreadedStore",
    "RunFilter",
    "ORPHAN_AGE",
    # registering it
    "GROUP",
    "Backend",
    "Opening",
    # what every store keeps, and how
    "NOT_READ",
    "Checkpoint",
    "CallRecord",
    "MailboxRecord",
    "RunInfo",
    "decode",
    "dumps",
    "evolve",
    "head_document",
    "head_of",
    "info_of",
    "to_document",
    # the rules and errors every store applies
    "check_run_id",
    "check_size",
    "conflict",
    "corrupt_error",
    "delete_conflict",
    "head_etag",
    "state_limit",
    # history: what run_history lists, the error of a step not kept
    "StepRecord",
    "not_kept",
    # -- a client that writes checkpoints itself (the Agent Framework storage) --
    # A state made by ``frozen_state`` and ``FrozenState.updated`` remembers its change
    # since the version stored at an etag (``mark_stored``), so a save sends that change.
    "FrozenState",
    "frozen_state",
    "mark_stored",
    # per-run items (streams, events): seam.items
    "Item",
    "MAX_ITEM_BYTES",
    "item_exists",
    "item_json",
    # the codec (seam.codec): a layer on per-run items encodes its values with the store's
    # ``codec``, in the store's envelopes, authenticated with ``place``
    "Codec",
    "is_envelope",
    "place",
]
