"""A run in a container partitioned by ``/run``: its head, and its state in segments.

Layout. Every item of a run has ``run`` = the run id (the partition key), so a run
is one logical partition and every request about it is single-partition.

- The *head*: ``id`` = the run id. The checkpoint document (``document.to_document``)
  but its data, plus ``nonce`` (random per save: a save whose answer was lost
  recognises its own write by it), ``size`` (the head's bytes as sent), ``sizes``
  (``[state, calls]``: the bytes of the state's JSON and of the running step's
  journal's, exact, ``seam.delta.Sizes``) and ``ttl`` once a run completes with
  ``finished_ttl``. The head is the unit of every conditional write: leases,
  heartbeats, signals, cancellation, result polling and listing read and write it
  alone. Its data is either *inline* -- ``state`` and ``calls`` in the head, while
  they take at most ``INLINE_MAX`` bytes and the run has no segments: one request
  per save, as in the earlier layout; with history on (the default, ``history``)
  only until its first step records a call or completes -- or in segments, to which
  the head points:
  ``gen`` (the generation: the nonce of its snapshot), ``fold`` (the generation's
  number, below), ``seq`` (the last segment's number), ``tip`` (its nonce) and
  ``log`` (``[snapshot bytes, deltas, delta bytes]``).
- A *segment*: an immutable item, ``id`` = ``"~"`` + its nonce (16 hex digits),
  ``seg`` (that nonce), ``gen``, ``fold``, ``seq`` (0: the snapshot; 1, 2, ...: a
  save's change each), ``prev`` (the nonce of the segment before; None for the
  snapshot) and the change as ``seam.delta`` writes it -- the file log's
  format: a snapshot holds ``state`` and ``calls``, a delta ``set``/``extend`` and
  ``calls``/``calls+`` -- as a JSON object in ``change`` when it fits one item, or,
  when it does not, that object's compact JSON cut into ``text`` chunks, one item
  each: ``id`` = ``"~"`` + nonce + ``"."`` + part, with ``part`` and ``parts``.

Saving (``plan``): a save whose data changed writes a delta segment, then the head
(replace, If-Match on the loaded etag): two requests, the bytes of the update plus a
small head. Segments first, the head last: the head is the commit. A failed segment
write fails the save, the head untouched (a segment that landed is an orphan, below);
the head write keeps the read-back settlement by nonce (``programs``). A save whose data
is unchanged (a heartbeat, a claim, a signal) writes the head alone, a PATCH where
the store knows the stored version. No transactional batch: the local protocol
server has none, and the vNext emulator's was reported non-atomic
(azure-cosmos-db-emulator-docker #303, #304).

A change larger than one item is cut into several items of one segment (``text``
chunks, above), like a large snapshot: a step that adds 2.5 MB sends its 2.5 MB in
two items, then the head -- never a fold of the whole state (which a 60 MB state
grown 2.5 MB a step paid at every step: 750 MB sent where 60 MB do). All of a
segment's items are written before the head, so a crash or a lost answer leaves the
save before or this one, whole: a head never names a segment some of whose items
are missing, and a load applies only the segments its chain names.

Folding. A save writes a new generation instead -- a snapshot of the whole data,
chunked when it is larger than an item -- when the log since the snapshot would
outweigh the data (log bytes over ``FOLD_RATIO`` x the data and over ``FOLD_MIN``:
a load then reads at most about twice the state), or hold more than ``MAX_DELTAS``
deltas, or when the store does not know the stored version (its sizes, its chain),
or when a run completes with ``finished_ttl`` (the new segments carry a ``ttl``;
``until`` in the head says when they expire, and the head is given a ``ttl`` that
ends ``TTL_MARGIN`` before). A fold
whose data fits ``INLINE_MAX`` goes back inline. A state that only grows never
outweighs its log, so it is not rewritten for growing. After the head is committed,
the fold deletes the segments it superseded: those of an earlier fold number, or
of its own number and another generation (one single-partition query of ids, then
deletes; a failure is logged and left for the next fold or ``prune``). Fold numbers
grow: ``max(milliseconds now, the previous one + 1)``, so a fold that a later
writer made on top of this one is never taken for superseded.

Loading. One point read of the head and, when it points to segments, one
single-partition query for the segments of its generation with ``seq`` up to the
head's (in pages of at most 4 MB). The state is rebuilt by walking from ``tip``
back through ``prev`` to the snapshot and applying the changes forward: orphans of
failed saves may share a ``seq``, the chain tells them apart; a missing link is
``CorruptCheckpointError``, never a mix of two saves.

Deleting: the ids of the run's segments are listed, then the head is deleted
(If-Match when an etag is given), then those segments.

Orphans: segments that no head reaches. A save avoids making them where it can know
beforehand: a create (``etag=None``) with segments reads the head first and, if the
run exists, loses without writing anything; a replace whose head loses to another
writer (checked by reading back) deletes its own segments at once, since its head,
conditional on a version that is gone, can never land. What is left -- a save that
failed or crashed after its segments, a create that lost a race, a crashed delete,
an expired head -- is swept by ``durable-steps runs prune`` (``removal``): every
segment older than ``ORPHAN_AGE`` (an hour) that is not on its head's chain. A save
commits its head at most ``SAVE_LIMIT`` (ten minutes) after it began writing its
segments, or gives up, so no segment that old belongs to a save in flight.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...seam import delta
from ...seam.errors import corrupt_error

INLINE_MAX = 4 * 1024
"""Data (state and journal, JSON) up to this stays in the head: one request per save.
Small enough that an inline save sends no more than a delta save does."""
FOLD_RATIO = 2
FOLD_MIN = 64 * 1024
MAX_DELTAS = 1000
TTL_MARGIN = 3600
"""Segments of a completed run expire this many seconds after its head."""
MAX_ITEM_BYTES = 2 * 1024 * 1024
"""Cosmos DB's item limit, system properties (_rid, _etag, _ts, ...) included."""
SYSTEM_RESERVE = 1024
"""Room left for the system properties the service adds to every item."""
MAX_BODY = MAX_ITEM_BYTES - SYSTEM_RESERVE


def nonce() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Chain:
    """What a head points to: its generation and the segments saved since its snapshot."""

    gen: str
    fold: int
    seq: int
    tip: str
    snap: int
    count: int = 0
    bytes: int = 0

    @property
    def log(self) -> int:
        """The bytes of the changes a load reads: the snapshot's and the deltas'."""
        return self.snap + self.bytes

    def fields(self) -> dict[str, Any]:
        return {
            "gen": self.gen,
            "fold": self.fold,
            "seq": self.seq,
            "tip": self.tip,
            "log": [self.snap, self.count, self.bytes],
        }

    def then(self, seg: str, size: int) -> Chain:
        """The chain after one more delta of ``size`` bytes."""
        return replace(
            self, seq=self.seq + 1, tip=seg, count=self.count + 1, bytes=self.bytes + size
        )


def _int(head: dict[str, Any], key: str) -> int:
    value = head.get(key)
    if type(value) is not int or value < 0:
        raise ValueError(f"{key} is {value!r}")
    return value


def chain_of(head: dict[str, Any]) -> Chain | None:
    """The chain a head points to; None for inline data. TypeError or ValueError names
    what is wrong."""
    if "gen" not in head or "state" in head:
        return None
    gen, tip, log = head.get("gen"), head.get("tip"), head.get("log")
    if not isinstance(gen, str) or not isinstance(tip, str):
        raise TypeError("its segment pointers (gen, tip) are not text")
    if not (isinstance(log, list) and len(log) == 3 and all(type(n) is int for n in log)):
        raise ValueError(f"log is {log!r}")
    return Chain(gen, _int(head, "fold"), _int(head, "seq"), tip, *log)


def sizes_of(head: dict[str, Any]) -> delta.Sizes | None:
    found = head.get("sizes")
    if isinstance(found, list) and len(found) == 2 and all(type(n) is int for n in found):
        return delta.Sizes(*found)
    return None


def fold_of(head: dict[str, Any]) -> int | None:
    """The number of the run's last fold, which an inline head keeps too."""
    fold = head.get("fold")
    return fold if type(fold) is int else None


def blob(parts: list[bytes]) -> bytes:
    """The JSON object of a change's members (``seam.delta.encode``)."""
    return b"{" + b",".join(parts) + b"}"


# -- segment items ---------------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    """How the client serialises a body: ``dump`` a value, ``length`` of its text."""

    dump: Callable[[Any], str]
    length: Callable[[str], int]

    def piece(self, key: str, n: int) -> int:
        """Bytes of ``"key":value`` and its comma, for a value of ``n`` bytes."""
        return self.length(self.dump(key)) + 1 + n + 1

    def body(self, fields: dict[str, Any]) -> int:
        return 1 + sum(self.piece(k, self.length(self.dump(v))) for k, v in fields.items())


def segment_items(
    measure: Measure,
    escaped: bool,
    head: dict[str, Any],
    change: Any,
    data: bytes,
    *,
    split: bool,
) -> list[tuple[dict[str, Any], int]] | None:
    """The items of one segment and the bytes of each as sent: ``head`` (its fields but
    the change) with ``change`` (the object; ``data``: its compact JSON) as one item
    when it fits, else the JSON in ``text`` chunks -- or None when it does not fit one
    item and ``split`` is False."""
    whole = len(data) if not escaped else measure.length(measure.dump(change))
    size = measure.body(head) + measure.piece("change", whole)
    if size <= MAX_BODY:
        return [({**head, "change": change}, size)]
    if not split:
        return None
    text = data.decode()
    room = MAX_BODY - measure.body({**head, "part": 99_999, "parts": 99_999, "text": ""})
    chunks = _chunks(text, room, lambda s: measure.length(measure.dump(s)) - 2)
    seg, found = head["seg"], []
    for i, chunk in enumerate(chunks):
        item = {**head, "id": f"~{seg}.{i}", "part": i, "parts": len(chunks), "text": chunk}
        found.append((item, measure.body(item)))
    return found


def _chunks(text: str, room: int, measure: Callable[[str], int]) -> list[str]:
    """``text`` cut into pieces of at most ``room`` bytes each once serialised."""
    out: list[str] = []
    i = 0
    while i < len(text):
        n = min(room, len(text) - i)
        while (m := measure(text[i : i + n])) > room:
            n = max(1, n * room // m - 64)
        out.append(text[i : i + n])
        i += n
    return out


def segment_head(
    run_id: str,
    seg: str,
    *,
    gen: str,
    fold: int,
    seq: int,
    prev: str | None,
    hist: dict[str, Any] | None = None,
    back: str | None = None,
) -> dict[str, Any]:
    head: dict[str, Any] = {
        "id": f"~{seg}",
        "run": run_id,
        "seg": seg,
        "gen": gen,
        "fold": fold,
        "seq": seq,
        "prev": prev,
    }
    if hist is not None:  # history: this save completed a step
        head["hist"] = hist
    if back is not None:  # history: the tip of the chain this snapshot supersedes
        head["back"] = back
    return head


# -- rebuilding a run's data -----------------------------------------------------------


def rebuild(
    run_id: str, chain: Chain, found: list[dict[str, Any]], where: str
) -> tuple[dict[str, Any], list[Any]]:
    """The state and the journal that the chain ending at the head's ``tip`` adds up to.
    Walks back through ``prev`` to the snapshot (other items of the generation are
    orphans of failed saves), then applies the changes forward."""
    by_seg: dict[Any, list[dict[str, Any]]] = {}
    for item in found:
        by_seg.setdefault(item.get("seg"), []).append(item)
    changes = []
    seg: Any = chain.tip
    for seq in range(chain.seq, -1, -1):
        parts = by_seg.get(seg)
        if not parts:
            raise corrupt_error(run_id, where, f"its segment {seg!r} (number {seq}) is missing")
        first = parts[0]
        if first.get("seq") != seq or first.get("gen") != chain.gen:
            raise corrupt_error(run_id, where, f"its segment {seg!r} is not number {seq}")
        changes.append(_change(parts, run_id, where))
        seg = first.get("prev")
    state: dict[str, Any] | None = None
    calls: dict[tuple[str, int], Any] = {}
    try:
        for change in reversed(changes):
            state = delta.apply(state, calls, change)
    except (TypeError, ValueError) as exc:
        raise corrupt_error(run_id, where, f"a segment does not apply: {exc}") from None
    if state is None:
        raise corrupt_error(run_id, where, "its snapshot holds no state")
    return state, delta.journal(calls)


def _change(parts: list[dict[str, Any]], run_id: str, where: str) -> dict[str, Any]:
    """A segment's change: its ``change`` object, or its ``text`` chunks joined and read."""
    if len(parts) == 1 and "change" in parts[0]:
        change = parts[0]["change"]
    else:
        parts = sorted(parts, key=_part)
        count = parts[0].get("parts")
        if (
            [p.get("part") for p in parts] != list(range(len(parts)))
            or count != len(parts)
            or not all(p.get("parts") == count and isinstance(p.get("text"), str) for p in parts)
        ):
            seg = parts[0].get("seg")
            raise corrupt_error(run_id, where, f"segment {seg!r} lacks some of its parts")
        try:
            change = json.loads("".join(p["text"] for p in parts))
        except (ValueError, RecursionError):
            raise corrupt_error(run_id, where, "a segment's text is not JSON") from None
    if not isinstance(change, dict):
        raise corrupt_error(run_id, where, "a segment's change is not a JSON object")
    return change


def _part(item: dict[str, Any]) -> int:
    part = item.get("part")
    return part if type(part) is int else -1


# -- queries -------------------------------------------------------------------------
# Each names the run as well as passing its partition key: the local protocol server
# ignores the partition key of a query. Built from constants; values are parameters.


def _query(text: str, run_id: str, **values: Any) -> dict[str, Any]:
    parameters = [{"name": "@run", "value": run_id}]
    parameters += [{"name": f"@{k}", "value": v} for k, v in values.items()]
    return {"query": text, "parameters": parameters, "partition_key": run_id}


def of_generation(run_id: str, chain: Chain) -> dict[str, Any]:
    """The segments a load reads: those of the head's generation up to its ``seq``."""
    return _query(
        "SELECT * FROM c WHERE c.run = @run AND IS_DEFINED(c.seg) AND c.gen = @gen "
        "AND c.seq <= @seq",
        run_id,
        gen=chain.gen,
        seq=chain.seq,
    )


def superseded(run_id: str, fold: int, gen: str) -> dict[str, Any]:
    """The ids of the segments a fold (number ``fold``, generation ``gen``; "" when it
    went inline) supersedes."""
    return _query(
        "SELECT c.id FROM c WHERE c.run = @run AND IS_DEFINED(c.seg) "
        "AND (c.fold < @fold OR (c.fold = @fold AND c.gen != @gen))",
        run_id,
        fold=fold,
        gen=gen,
    )


def every_segment(run_id: str) -> dict[str, Any]:
    return _query("SELECT c.id FROM c WHERE c.run = @run AND IS_DEFINED(c.seg)", run_id)


def older_segments(before: float) -> dict[str, Any]:
    """Every segment of the container written before ``before`` (epoch seconds), with
    what tells whether its head still needs it (cross-partition: for ``prune``)."""
    return {
        "query": "SELECT c.id, c.run, c.gen, c.fold, c.seq, c.seg FROM c "
        "WHERE IS_DEFINED(c.seg) AND c._ts < @before",
        "parameters": [{"name": "@before", "value": before}],
        "enable_cross_partition_query": True,
    }


def links(run_id: str, gen: str) -> dict[str, Any]:
    """The links of a generation's segments (each one's nonce and the one before): its
    chain, walked from the head's ``tip`` (``on_chain``)."""
    return _query(
        "SELECT c.seg, c.prev FROM c WHERE c.run = @run AND IS_DEFINED(c.seg) AND c.gen = @gen",
        run_id,
        gen=gen,
    )


# -- history (``stores.cosmos.history``) -----------------------------------------------
# With history on, a fold keeps the generations it supersedes and its snapshot names
# the tip of the chain before it (``back``); a step's completing segment carries
# ``hist``: {"step", "name", "at", "attempts", "size", "calls"} (``calls``: the step's
# call index, ``seam.callindex``; absent on markers written before it was kept).


def history_links(run_id: str) -> dict[str, Any]:
    """The links and history markers of every segment of the run (no data)."""
    return _query(
        "SELECT c.id, c.seg, c.prev, c.back, c.gen, c.fold, c.seq, c.hist FROM c "
        "WHERE c.run = @run AND IS_DEFINED(c.seg)",
        run_id,
    )


def history_chain(chain: Chain, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The committed versions of the run, oldest first: the head's chain from its tip
    back to its snapshot, then through ``back`` to the chain before, and so on -- so
    that orphans of failed saves (which no link reaches) are never taken for history.
    Stops where a link is missing (history trimmed, or never kept)."""
    by_seg = {item.get("seg"): item for item in found}
    out: list[dict[str, Any]] = []
    seen: set[Any] = set()
    seg: Any = chain.tip
    while seg is not None and seg in by_seg and seg not in seen:
        seen.add(seg)
        item = by_seg[seg]
        out.append(item)
        seg = item.get("back") if item.get("seq") == 0 else item.get("prev")
    out.reverse()
    return out


def older_than(chain: Chain, found: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    """``keep_last``: the items of the generations that the history before ``step``
    alone needs (those before the generation that completed ``step``, or the first one
    after it), from ``history_links`` -- none when that step is not along the chain."""
    versions = history_chain(chain, found)
    first = next(
        (v for v in versions if isinstance(v.get("hist"), dict) and _step(v["hist"]) >= step),
        None,
    )
    if first is None:
        return []
    older: list[Any] = []
    for v in versions:
        if v.get("gen") == first.get("gen"):
            break
        if v.get("gen") not in older:
            older.append(v.get("gen"))
    return [item for item in found if item.get("gen") in older]


def _step(hist: dict[str, Any]) -> int:
    step = hist.get("step")
    return step if type(step) is int else -1


def up_to(item: dict[str, Any]) -> Chain:
    """A chain that ends at ``item`` (a version in history), for ``of_generation`` and
    ``rebuild``."""
    return Chain(item["gen"], item.get("fold") or 0, item["seq"], item["seg"], 0)
