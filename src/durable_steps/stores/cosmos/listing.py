"""The projected listing query of the Cosmos DB stores, and its rows as RunInfos.

``list_runs`` is one parameterised query: the filters and the limit are the service's
work, no state and no step list travel, only the fields a RunInfo holds. Only heads are
listed (``NOT IS_DEFINED(c.seg)``): a run's segments (``segments``) are not runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...seam import formats
from ...seam.checkpoint import STATUSES, RunInfo, waits_for
from ...seam.document import SCHEMA
from ...seam.rules import RunFilter

PAGE = 1000
"""Listing rows per page: a projected row is a few hundred bytes."""


@dataclass
class Listing:
    """One call of ``list_runs``: a projected, parameterised query (the filters and the
    limit are the service's work; no state and no step list travel, only the fields a
    RunInfo holds) and what has been yielded so far."""

    text: str
    parameters: list[dict[str, Any]]
    limit: int | None
    filtered: bool
    yielded: int = 0

    @property
    def page_size(self) -> int:
        return min(self.limit or PAGE, PAGE)

    @property
    def done(self) -> bool:
        return self.limit is not None and self.yielded >= self.limit

    def accept(self, rows: Iterable[dict[str, Any]]) -> Iterator[RunInfo]:
        """The RunInfos of a page's rows, up to the limit. An unreadable run is listed
        (with ``error``) only when nothing is filtered, as in every store."""
        for row in rows:
            if self.done:
                return
            info = run_info(row)
            if info.error is None or not self.filtered:
                self.yielded += 1
                yield info


_PROJECTION = (
    "c.id, c.run_id, c.schema, c.status, c.done, c.step, "
    "ARRAY_SLICE(c.steps, -1) AS step_name, ARRAY_LENGTH(c.steps) AS steps, c.workflow, "
    "c.updated_at, c.owner, c.lease_expires, c.waiting_for, c.wake_at, c.attempt, c.size, "
    "c.log, c._etag, c._ts, c.version, c.deadline, c.queue, c.priority, c.partition, "
    "c.receiving, c.started_at"
)


def query_for(filters: RunFilter) -> Listing:
    """The projected query of heads that lists the runs ``filters`` asks for."""
    status, workflow, limit = filters.status, filters.workflow, filters.limit
    due_before, updated_before = filters.due_before, filters.updated_before
    where: list[str] = ["NOT IS_DEFINED(c.seg) AND NOT IS_DEFINED(c.item)"]  # heads only
    parameters: list[dict[str, Any]] = []
    if status is not None:
        parameters.append({"name": "@status", "value": status})
        # Schema 1 items (the /id layout's) have no status: their own condition.
        old = formats.id_layout.STATUS_OF_SCHEMA_1.get(status)
        where.append("(c.status = @status)" if old is None else f"(c.status = @status OR ({old}))")
    if workflow is not None:
        parameters.append({"name": "@workflow", "value": workflow})
        where.append("c.workflow = @workflow")
    if due_before is not None:
        parameters.append({"name": "@due", "value": due_before})
        where.append("(IS_NUMBER(c.wake_at) AND c.wake_at <= @due)")
    if updated_before is not None:
        parameters.append({"name": "@before", "value": updated_before})
        where.append("(NOT IS_NUMBER(c.updated_at) OR c.updated_at < @before)")
    if filters.versions is not None:  # lifecycle: runs of these versions
        where.append(_versions_clause(filters.versions, parameters))
    top = ""
    if limit is not None:
        parameters.append({"name": "@limit", "value": limit})
        top = "TOP @limit "
    # Built from constant fragments only; every value travels as a parameter.
    text = f"SELECT {top}{_PROJECTION} FROM c"  # noqa: S608
    text += " WHERE " + " AND ".join(where)
    return Listing(text, parameters, limit, len(where) > 1)


def _versions_clause(versions: tuple[str | None, ...], parameters: list[dict[str, Any]]) -> str:
    """The condition of runs pinned to one of ``versions`` (None among them: also the
    runs pinned to none, whose ``version`` is null or absent), every value a parameter."""
    named = [v for v in versions if v is not None]
    for n, v in enumerate(named):
        parameters.append({"name": f"@version{n}", "value": v})
    either = [f"c.version = @version{n}" for n in range(len(named))]
    if None in versions:
        either.append("NOT IS_DEFINED(c.version) OR IS_NULL(c.version)")
    return "(" + (" OR ".join(either) or "false") + ")"


def takeable_query(workflows: Sequence[str], at: float) -> Listing:
    """The runs of ``workflows`` a worker may take at ``at`` (``Store.takeable``), as one
    projected query the service filters: running heads with no lease or one expired by
    ``at``, waiting heads due by ``at``. The range filters on ``status``, ``workflow``,
    ``lease_expires`` and ``wake_at`` are served by the container's index (infra/
    indexes every path but the state's), so the rows read and sent are the runs to take,
    not the runs live workers hold."""
    parameters: list[dict[str, Any]] = [{"name": "@at", "value": at}]
    names = []
    for i, workflow in enumerate(workflows):
        parameters.append({"name": f"@w{i}", "value": workflow})
        names.append(f"@w{i}")
    if not names:
        names, parameters = ["@none"], [*parameters, {"name": "@none", "value": None}]
    # Built from constant fragments only; every value travels as a parameter.
    text = (
        f"SELECT {_PROJECTION} FROM c WHERE NOT IS_DEFINED(c.seg) "  # noqa: S608
        f"AND c.workflow IN ({', '.join(names)}) AND ("
        "(c.status = 'running' AND (NOT IS_NUMBER(c.lease_expires) OR c.lease_expires <= @at))"
        " OR (c.status = 'waiting' AND IS_NUMBER(c.wake_at) AND c.wake_at <= @at)"
        # run deadlines: a run past its deadline, to be cancelled
        " OR ((c.status = 'running' OR c.status = 'waiting') AND IS_NUMBER(c.deadline)"
        " AND c.deadline <= @at))"
    )
    return Listing(text, parameters, None, True)


def run_info(row: dict[str, Any]) -> RunInfo:
    """A listing row as a RunInfo; a row that no checkpoint of ours could give is
    reported with ``error`` set, never raised (one bad item never hides the others)."""
    run_id = str(row.get("id"))
    etag, stored_size, log = row.get("_etag"), row.get("size"), row.get("log")
    size = stored_size if type(stored_size) is int else 0
    if isinstance(log, list) and len(log) == 3 and all(type(n) is int for n in log):
        size += log[0] + log[2]  # its segments: the snapshot and the deltas since
    try:
        return _checked(row, run_id, etag, size)
    except ValueError as exc:
        error = (
            f"checkpoint of run {run_id!r} in Cosmos DB is unreadable: {exc}. Restore it "
            "or delete the run to start over"
        )
        return RunInfo(run_id, -1, None, False, row.get("_ts"), size, etag, error)


def row_of(head: dict[str, Any]) -> dict[str, Any]:
    """A head as the listing query projects it (for ``run_info`` of one run)."""
    row = {k: v for k, v in head.items() if k not in ("state", "calls", "signals")}
    steps = head.get("steps")
    row["step_name"], row["steps"] = (
        (steps[-1:], len(steps)) if isinstance(steps, list) else (steps, None)
    )
    return row


def _is(value: Any, kind: Any) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _checked(row: dict[str, Any], run_id: str, etag: Any, size: int) -> RunInfo:
    schema: Any = row.get("schema")
    if _is(schema, int) and schema > SCHEMA:
        raise ValueError(f"it was written with schema {schema}; upgrade durable-steps")
    if schema not in (*formats.EARLIER, SCHEMA) or isinstance(schema, bool):
        raise ValueError(f"schema is {schema!r}, expected 1 to {SCHEMA}")
    row = formats.upgrade(row)  # an earlier schema's head as today's
    if row.get("run_id") != run_id:
        raise ValueError(f"it belongs to run {row.get('run_id')!r}")
    step: Any = row.get("step")
    names, count = row.get("step_name"), row.get("steps")
    if not _is(step, int) or step < -1 or count != step + 1:
        raise ValueError(f"step {step!r} does not match {count!r} completed step names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("steps is not a list of names")
    status = row.get("status")
    if status not in STATUSES:
        raise ValueError(f"status is {status!r}")
    keys = (("workflow", str), ("owner", str), ("waiting_for", str), ("queue", str))
    for key, kind in (*keys, ("version", str), ("partition", str), ("priority", int)):
        if row.get(key) is not None and not isinstance(row.get(key), kind):
            raise ValueError(f"{key} is {row.get(key)!r}")
    for key in ("updated_at", "lease_expires", "wake_at", "deadline", "started_at"):
        if row.get(key) is not None and not _is(row.get(key), int | float):
            raise ValueError(f"{key} is not a number")
    receiving = row.get("receiving") if isinstance(row.get("receiving"), str) else None
    attempt = row.get("attempt", 1)
    if not _is(attempt, int) or not isinstance(etag, str):
        raise ValueError("attempt or etag has the wrong type")
    return RunInfo(
        run_id=run_id,
        step=step,
        step_name=names[-1] if names else None,
        done=status == "completed",
        updated_at=row.get("updated_at"),
        size=size,
        etag=etag,
        status=status,
        workflow=row.get("workflow"),
        lease_expires=row.get("lease_expires"),
        owner=row.get("owner"),
        waiting_for=waits_for(row.get("waiting_for"), receiving),
        wake_at=row.get("wake_at"),
        attempt=attempt,
        version=row.get("version"),
        deadline=row.get("deadline"),
        queue=row.get("queue"),
        priority=row.get("priority"),
        partition=row.get("partition"),
        receiving=receiving,
        started_at=row.get("started_at") or row.get("updated_at"),  # (earlier heads: none)
    )
