"""The runs list: filters, columns, sorting and paging over the store's listing.

Cost. ``list_runs(status=, workflow=, updated_before=, limit=)`` applies those filters in
the store and streams ``RunInfo`` (never a state): a FileStore reads the directory's
names, then one run file's tail per run it yields; Cosmos DB runs one projected query,
paged. The console asks for no more than a page needs:

- In the store's own order (the default), a page is the next ``size`` runs of a listing
  the console holds open (``Listings``): the first page lists anew and reads about
  ``size`` runs, page *k* the runs of page *k* only. A listing not held (the console
  restarted, or dropped it after ``IDLE`` seconds or when more than ``HELD`` were
  open) is listed again and the earlier pages skipped, which reads their runs again.
- Sorted by a column, every run that passes the filters is read once (no state), sorted
  and held; pages are then free. Reading 100,000 runs takes seconds on a FileStore
  (``docs/console.md`` has the numbers): the page says how many runs it read and how
  long it took. At most ``MAX_SORTED`` runs are sorted.
- The run id prefix and "updated within" filters, and filters on columns a store does
  not filter on, are applied here, to what the store yields: a rare match may read many
  runs to fill a page.
- A time range: ``until`` (a time, ``moment``) is the store's ``updated_before``,
  ``since`` is applied here. ``error`` (text in the last error) reads each listed run's
  head (``load_head``: never its state) unless it is completed -- a filter on status
  ``failed`` keeps that to the failed runs.

``EXTRA`` lists the columns that appear only when some run on the page carries them
(``version``: a run pinned to a version of its workflow's code; ``queue``: a run
admitted through a queue): each is offered as a filter -- the version passed to
``list_runs(version=)``, the queue applied here to what the store yields.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from durable_steps import RunInfo, Store, owner_label

STATUSES = ("running", "waiting", "failed", "completed", "cancelled")
SIZES = (25, 50, 100, 200)
HELD, IDLE, MAX_SORTED = 8, 600.0, 200_000
_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class FilterError(ValueError):
    """A filter the console cannot apply; the message says what to type instead."""


def status_of(info: RunInfo) -> str:
    if info.error is not None:
        return "unreadable"
    return info.status or ("completed" if info.done else "running")


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    sort_key: Callable[[RunInfo], Any] | None


COLUMNS = (
    Column("run_id", "run id", lambda i: i.run_id),
    Column("status", "status", status_of),
    Column("workflow", "workflow", lambda i: i.workflow or ""),
    Column("step", "last step", lambda i: i.step),
    Column("attempt", "attempt", lambda i: i.attempt),
    Column("holding", "waits for / lease", None),
    Column("size", "size", lambda i: i.size),
    Column("updated", "updated", lambda i: i.updated_at or 0.0),
)
EXTRA = ("version", "queue")
"""Fields of ``RunInfo`` shown when present (see the top): a column and a filter each."""
STORE_FILTERS = frozenset({"version"})
"""Of ``EXTRA``, those ``Store.list_runs`` filters on."""


def extra_value(info: RunInfo, name: str) -> str | None:
    return info.version if name == "version" else info.queue


def moment(text: str, what: str) -> float:
    """A point in time as typed: epoch seconds, or an ISO 8601 date or date and time
    (UTC unless it names its offset: ``2026-12-06``, ``2026-12-06T07:30``)."""
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        raise FilterError(
            f"{what}: {text!r} is not a time; give an ISO 8601 date or time in UTC "
            "(2026-12-06 or 2026-12-06T07:30:00Z) or epoch seconds"
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def age(text: str, what: str) -> float:
    match = _AGE.match(text.strip().lower())
    if not match:
        raise FilterError(
            f"{what}: {text!r} is not an age; give a number and a unit (s, m, h, d, w), "
            "e.g. 30m, 12h, 7d or 2w"
        )
    return float(match[1]) * _UNIT[match[2]]


@dataclass(frozen=True)
class Filters:
    status: str | None = None
    workflow: str | None = None
    prefix: str | None = None
    older: str | None = None
    """Updated more than this long ago (an age: 7d): the store's ``updated_before``."""
    newer: str | None = None
    """Updated within this long (an age: 1h): applied here."""
    since: str | None = None
    """Updated at or after this time (``moment``): applied here."""
    until: str | None = None
    """Updated before this time (``moment``): the store's ``updated_before``."""
    error: str | None = None
    """Text in the run's last error (type and message, any case): applied here, with
    one head read (never the state) per run listed that is not completed."""
    extra: tuple[tuple[str, str], ...] = ()
    sort: str | None = None
    desc: bool = False
    size: int = 50

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Filters:
        def text(name: str) -> str | None:
            value = params.get(name, "").strip()
            return value or None

        status = text("status")
        if status is not None and status not in STATUSES:
            raise FilterError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        for name, what in (("older", "updated more than"), ("newer", "updated within")):
            if (value := text(name)) is not None:
                age(value, what)
        since, until = text("since"), text("until")
        start = None if since is None else moment(since, "since")
        end = None if until is None else moment(until, "until")
        if start is not None and end is not None and start >= end:
            raise FilterError(
                f"the time range is empty: since {since!r} is not before until {until!r}"
            )
        sort = text("sort")
        sortable = {c.key for c in COLUMNS if c.sort_key} | set(EXTRA)
        if sort is not None and sort not in sortable:
            raise FilterError(
                f"cannot sort by {sort!r}; sort by one of {', '.join(sorted(sortable))}"
            )
        size = int(params["size"]) if params.get("size", "").isdigit() else 50
        extra = tuple((n, v) for n in EXTRA if (v := text(n)) is not None)
        return cls(
            status, text("workflow"), text("prefix"), text("older"), text("newer"),
            since, until, text("error"), extra,
            sort, params.get("dir") == "desc", size if size in SIZES else 50,
        )  # fmt: skip

    def params(self, **changes: Any) -> dict[str, str]:
        f = replace(self, **changes)
        out = {
            "status": f.status, "workflow": f.workflow, "prefix": f.prefix,
            "older": f.older, "newer": f.newer, "since": f.since, "until": f.until,
            "error": f.error, **dict(f.extra), "sort": f.sort,
            "dir": "desc" if f.desc and f.sort else None,
            "size": str(f.size) if f.size != 50 else None,
        }  # fmt: skip
        return {k: v for k, v in out.items() if v}

    def query(self, **changes: Any) -> str:
        return urlencode(self.params(**changes))

    @property
    def listing(self) -> Filters:
        """What identifies a listing: the filters and the order, not the page size."""
        return replace(self, size=50)

    @property
    def any(self) -> bool:
        ages = (self.older, self.newer, self.since, self.until)
        return any((self.status, self.workflow, self.prefix, *ages, self.error, self.extra))


@dataclass
class Page:
    rows: list[RunInfo]
    number: int
    more: bool
    read: int
    """Runs the store yielded for this listing so far (the cost of getting here)."""
    seconds: float
    total: int | None = None
    """Runs that pass the filters, when known (a sorted listing reads them all)."""
    truncated: bool = False
    extra: tuple[str, ...] = ()
    """The ``EXTRA`` columns some row on the page has a value for."""


@dataclass
class Held:
    """A listing held open between pages: what it yielded so far, and the rest."""

    rest: Iterator[RunInfo] | None
    seen: list[RunInfo] = field(default_factory=list)
    read: list[int] = field(default_factory=lambda: [0])
    seconds: float = 0.0
    truncated: bool = False
    listed: float = field(default_factory=time.monotonic)
    used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def upto(self, n: int) -> None:
        t0 = time.perf_counter()
        while self.rest is not None and len(self.seen) < n:
            info = next(self.rest, None)
            if info is None:
                self.rest = None
            else:
                self.seen.append(info)
        self.seconds += time.perf_counter() - t0


class Listings:
    """The listings the console holds for paging (``HELD`` at most, ``IDLE`` seconds)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._held: OrderedDict[Filters, Held] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, filters: Filters, number: int, *, max_age: float = IDLE) -> Page:
        """Page ``number`` (0-based) of the listing, from the one held if it was listed
        less than ``max_age`` seconds ago (0: list anew)."""
        key = filters.listing
        with self._lock:
            now = time.monotonic()
            for k in [k for k, h in self._held.items() if now - h.used > IDLE]:
                del self._held[k]
            held = self._held.get(key)
            if held is not None and now - held.listed >= max_age:
                held = None
            if held is None:
                held = self._held[key] = Held(None)
                held.lock.acquire()  # (filled below, outside the listings' lock)
                fill = True
            else:
                fill = False
            self._held.move_to_end(key)
            while len(self._held) > HELD:
                self._held.popitem(last=False)
        if fill:
            try:
                self._start(held, filters)
            except BaseException:
                with self._lock:
                    if self._held.get(key) is held:
                        del self._held[key]  # not held half-listed: the next page lists anew
                raise
            finally:
                held.lock.release()
        with held.lock:
            held.used = time.monotonic()
            first = number * filters.size
            held.upto(first + filters.size + 1)
            rows = held.seen[first : first + filters.size]
            more = len(held.seen) > first + filters.size
            total = len(held.seen) if held.rest is None else None
            present = tuple(n for n in EXTRA if any(extra_value(r, n) is not None for r in rows))
            return Page(
                rows, number, more, held.read[0], held.seconds, total, held.truncated, present
            )

    def _start(self, held: Held, f: Filters) -> None:
        held.rest = self._matching(f, held.read)
        if f.sort is None:
            return
        t0 = time.perf_counter()
        every = []
        for info in held.rest:
            every.append(info)
            if len(every) >= MAX_SORTED:
                held.truncated = True
                break
        column = next((c for c in COLUMNS if c.key == f.sort), None)
        if column is not None and column.sort_key is not None:
            by: Callable[[RunInfo], Any] = column.sort_key
        else:
            name = f.sort

            def by(i: RunInfo) -> Any:
                value = extra_value(i, name)
                return (value is None, str(value) if value is not None else "")

        every.sort(key=lambda i: (by(i), i.run_id), reverse=f.desc)
        held.seen, held.rest = every, None
        held.seconds += time.perf_counter() - t0

    def _matching(self, f: Filters, read: list[int]) -> Iterator[RunInfo]:
        """The store's listing with the filters it takes, and the others applied here."""
        now = time.time()
        kwargs: dict[str, Any] = {"status": f.status, "workflow": f.workflow}
        bounds = [now - age(f.older, "updated more than")] if f.older is not None else []
        if f.until is not None:
            bounds.append(moment(f.until, "until"))
        if bounds:
            kwargs["updated_before"] = min(bounds)
        here = []
        for name, value in f.extra:
            if name in STORE_FILTERS:
                kwargs[name] = value
            else:
                here.append((name, value))
        starts = [now - age(f.newer, "updated within")] if f.newer is not None else []
        if f.since is not None:
            starts.append(moment(f.since, "since"))
        since = max(starts) if starts else None
        needle = f.error.lower() if f.error is not None else None
        for info in self.store.list_runs(**kwargs):
            read[0] += 1
            if f.prefix is not None and not info.run_id.startswith(f.prefix):
                continue
            if since is not None and (info.updated_at or 0) < since:
                continue
            if any(str(extra_value(info, n)) != v for n, v in here):
                continue
            if needle is not None and needle not in self._error_text(info):
                continue
            yield info

    def _error_text(self, info: RunInfo) -> str:
        """The run's last error as the error filter reads it (lower case; "" for none)."""
        if info.status == "completed":
            return ""
        cp = self.store.load_head(info.run_id)
        if cp is None or cp.error is None:
            return ""
        return f"{cp.error['type']}: {cp.error['message']}".lower()

    def reread(self, run_ids: list[str]) -> list[RunInfo | None]:
        """The runs of a page as they are now (None: deleted since), for a live refresh
        of a page that is not listed again."""
        return [self.store.run_info(r) for r in run_ids]


def holding(info: RunInfo, now: float) -> tuple[str, float | None]:
    """What holds a run up, and until when: the signal it waits for (its deadline), its
    timer, or the worker that leases it."""
    status = status_of(info)
    if status == "waiting" and info.receiving is not None:  # the mailbox
        return f"message on {info.receiving}" + (", deadline" if info.wake_at else ""), info.wake_at
    if status == "waiting" and info.waiting_for:
        return f"signal {info.waiting_for}" + (", deadline" if info.wake_at else ""), info.wake_at
    if status == "waiting" and info.wake_at is not None:
        return "sleeps until", info.wake_at
    if info.owner is None or info.lease_expires is None:
        return "", None
    if info.lease_expires <= now:
        return f"lease expired ({owner(info.owner)})", None
    return f"leased by {owner(info.owner)} until", info.lease_expires


def owner(name: str) -> str:
    """A default owner id (ds1:host:boot:pid:start:random) as host and pid."""
    return owner_label(name)
