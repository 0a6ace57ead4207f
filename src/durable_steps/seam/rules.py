"""The rules every store applies before any I/O, the same in every store so that what
works on the laptop works in Azure: run ids (Cosmos DB's id rules), names, the state
size limit, and the filters of a listing (``RunFilter``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .checkpoint import STATUSES, Checkpoint, RunInfo
from .errors import InvalidRunIdError, StateTooLargeError

MAX_RUN_ID = 255
_FORBIDDEN = frozenset("/\\?#")
_SUSPECT = re.compile(r"[/\\?#\x00-\x1f\x7f-\x9f\ud800-\udfff]|\A\.\.?\Z|\A\s|\s\Z")
"""Matches every run id ``check_run_id`` refuses for its characters (a fast first look)."""


@dataclass(frozen=True)
class RunFilter:
    """What ``list_runs`` lists: runs of ``status`` and ``workflow``, last updated before
    ``updated_before``, due (a waiting run's wake time or deadline) at or before
    ``due_before``, at most ``limit`` of them. Checked when made (``ValueError``); a
    backend applies what it can while reading and ``matches`` the rest."""

    status: str | None = None
    workflow: str | None = None
    updated_before: float | None = None
    due_before: float | None = None
    limit: int | None = None
    # -- lifecycle: versions
    versions: tuple[str | None, ...] | None = None
    """Runs pinned to one of these versions (None among them: runs pinned to none);
    None: any version. ``list_runs(version=V)`` asks for ``(V,)``; a worker for the
    versions it serves and the unpinned runs."""

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {self.status!r}")
        if self.limit is not None and (
            not isinstance(self.limit, int) or isinstance(self.limit, bool) or self.limit < 0
        ):
            raise ValueError(f"limit must be a non-negative int, not {self.limit!r}")
        if self.versions is not None and (
            not isinstance(self.versions, tuple)
            or not all(v is None or isinstance(v, str) for v in self.versions)
        ):
            raise ValueError(f"versions must be a tuple of str or None, not {self.versions!r}")

    @property
    def filters(self) -> bool:
        """Whether anything but the limit is asked for."""
        asked = (self.status, self.workflow, self.updated_before, self.due_before, self.versions)
        return any(v is not None for v in asked)

    def matches(self, info: RunInfo) -> bool:
        """Whether ``info`` is one of the runs asked for. An unreadable run matches only a
        listing without filters (a listing never stops at a bad checkpoint)."""
        if info.error is not None:
            return not self.filters
        return (
            (self.status is None or info.status == self.status)
            and (self.workflow is None or info.workflow == self.workflow)
            and (self.updated_before is None or (info.updated_at or 0) < self.updated_before)
            and (
                self.due_before is None
                or (info.wake_at is not None and info.wake_at <= self.due_before)
            )
            and (self.versions is None or info.version in self.versions)
        )


def head_etag(cp: Checkpoint) -> str:
    """The etag a ``save_head`` changes; ``ValueError`` if there is none."""
    if cp.etag is None:
        raise ValueError(
            f"run {cp.run_id!r}: save_head changes a stored run's head and needs the etag "
            "it was read at (load_head); save() creates a run"
        )
    return cp.etag


MAX_STATE_BYTES = 64 * 1024 * 1024
"""The default limit of a run's state as JSON (``DURABLE_MAX_STATE_BYTES``)."""


def state_limit(limit: object) -> int:
    """A store's ``max_state_bytes=``, checked (None: ``MAX_STATE_BYTES``)."""
    if limit is None:
        return MAX_STATE_BYTES
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"max_state_bytes must be a positive int of bytes, not {limit!r}")
    return limit


def check_size(run_id: str, size: int, limit: int) -> None:
    """``StateTooLargeError`` when a state of ``size`` bytes of JSON is over ``limit``."""
    if size > limit:
        raise StateTooLargeError(
            f"run {run_id!r}: its state would be {size:,} bytes of JSON, over the limit of "
            f"{limit:,} (the same in every store); nothing was saved and the previous "
            "checkpoint stays. Keep large data (documents, files) outside the state -- a "
            "file path, a blob URL -- or raise DURABLE_MAX_STATE_BYTES (max_state_bytes=)",
            run_id=run_id,
            size=size,
            limit=limit,
        )


def check_run_id(run_id: object) -> str:
    """Apply the run-id rules shared by every store (Cosmos DB's id rules), before any I/O."""
    if not isinstance(run_id, str):
        raise InvalidRunIdError(
            f"run id must be a str, not {type(run_id).__name__}: pass the id as text",
            run_id=repr(run_id),
        )
    if 1 <= len(run_id) <= MAX_RUN_ID and _SUSPECT.search(run_id) is None:
        return run_id  # every save checks it: the common case in one regex search
    problem = None
    if not 1 <= len(run_id) <= MAX_RUN_ID:
        problem = f"it has {len(run_id)} characters; use 1 to {MAX_RUN_ID}"
    elif bad := sorted(_FORBIDDEN.intersection(run_id)):
        problem = f"it contains {' '.join(bad)}; none of / \\ ? # may appear"
    elif any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in run_id):
        problem = "it contains a control character"
    elif run_id in (".", ".."):
        # Cosmos DB addresses items by URL path, where these two are path
        # segments (".." reaches the container): no client can read such an item.
        problem = "'.' and '..' cannot be addressed in Cosmos DB's REST paths"
    elif run_id != run_id.strip():
        # The Cosmos SDK refuses ids that end in whitespace; a leading one is as
        # invisible in every listing. Refused everywhere, so no id works only locally.
        problem = "it starts or ends with whitespace; strip it"
    elif any(0xD800 <= ord(c) <= 0xDFFF for c in run_id):
        problem = "it contains a lone surrogate (not valid unicode text)"
    if problem:
        shown = run_id if len(run_id) <= 60 else run_id[:57] + "..."
        quoted = ascii(shown) if "surrogate" in problem else repr(shown)
        raise InvalidRunIdError(
            f"invalid run id {quoted}: {problem} (the same rules hold in every store)",
            run_id=run_id,
        )
    return run_id


def check_name(name: object, what: str) -> str:
    """Step, workflow and signal names: non-empty text without control characters."""
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= MAX_RUN_ID
        or any(ord(c) < 0x20 or 0xD800 <= ord(c) <= 0xDFFF for c in name)
    ):
        raise ValueError(
            f"{what} must be a str of 1 to {MAX_RUN_ID} printable characters, not {name!r}"
        )
    return name
