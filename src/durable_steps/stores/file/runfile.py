"""A run file as a log of records: the record format, replay, and the torn-tail rule.

Layout. A run file is a sequence of records. The first is a snapshot: the whole
checkpoint. Each later record is one save: the checkpoint's fields and what
changed in its state since the record before. Replaying the records in order
gives the checkpoint; the etag of the last record is its etag.

Record format (all lengths in bytes, numbers as lowercase hex)::

    HEAD  "\\x1e" "DSJ1 " M " " B "\\n"             24 bytes; M, B: lengths of meta, body (8 hex)
    meta  JSON object                              M bytes
    body  JSON object                              B bytes
    TAIL  "\\n" E " " M " " B " " MC " " C "\\n"    62 bytes; E: the save's etag (24 hex);
                                                  MC: crc32 of meta; C: crc32 of the record
                                                  from HEAD up to C (8 hex each)

- meta: every field of the checkpoint except the state, the step names and the
  signals (optional ones only when not null: missing reads as null), plus
  ``step_name`` (the last completed step's name) and ``sizes``:
  the bytes that the state, the step names, the signals and the journal, each as JSON, take
  in a snapshot of this checkpoint (absent in records of earlier versions). A
  listing reads the last TAIL and this, never the state.
- body: the change of the state and of the running step's journal as
  ``seam.delta`` writes it (``state``, or ``set`` and ``extend``; ``calls`` or
  ``calls+``); ``steps`` (all names) or ``steps+`` (names appended); ``signals``
  (all of them) when they changed. A snapshot has ``state``, ``steps``,
  ``signals`` and ``calls``.
- 0x1E (RS) starts every record and appears nowhere else: JSON escapes every
  control character inside strings, and HEAD and TAIL hold only hex, spaces,
  "DSJ1" and newlines. A file whose first byte is not 0x1E was written by an
  earlier version (one whole JSON document) and is read as such.

The torn-tail rule. Records are checked from the start (HEAD, lengths, TAIL, both
checksums). At the first byte offset ``o`` where no valid record starts:

- ``o == 0``: the first record is damaged: ``CorruptCheckpointError`` (it was
  written whole to a temporary file and renamed, so no crash can tear it);
- a valid record starts at some 0x1E after ``o``: damage before the tail:
  ``CorruptCheckpointError``, never a silent rollback;
- otherwise the bytes from ``o`` on are the torn tail of the one save that was not
  acknowledged (a kill mid-append, or a power cut that kept part of it, or zeros):
  they are ignored by readers and cut off by the next writer, under the run's
  lock, before it appends.

Only the last record can be torn: a save returns after its record is on disk,
and each writer first cuts off a torn tail, so records never follow a torn one.

Compaction. When a save would grow the file beyond ``compact_at(base)`` -- 4x
the length of a snapshot of the checkpoint it saves, at least ``COMPACT_MIN`` --
that save writes a new snapshot file instead of appending, so a load reads at
most about 4x the state, and a state that only grows (whose log holds nothing
superseded) is not rewritten for growing. The snapshot's length comes from
``sizes``, kept exact without encoding the state: a record's sizes are those of
the record before plus its changes (``body``: what a set key's old value took,
a list's new items and commas, new step names), or measured where it writes a
part whole. When the record before has no sizes (an earlier version wrote it),
the base is the file's first record, as earlier versions had it, until the next
snapshot measures them.

Writing (``store``). Under the run's stripe lock (``flock``, or ``msvcrt.locking``
on Windows; across processes and threads): read the etag from the last TAIL
(``runfile_tail``) and compare it (the last record is checked in full unless this store
wrote or read it; nothing is read when this store's own last append went through
the file it keeps open, which is still the run's file and as long as it left it,
see ``open_files``; the whole file is read only after a torn save); cut a torn tail
off; append the record; ``fdatasync`` -- the one sync of a save, after which it
returns. A
failed write or sync cuts the record off again. A new file (a run's first save,
a compaction, an earlier version's file migrated) is written whole: temporary
file, write, fsync, rename over the run's file, fsync of the directory
(``fileio.atomic_write``). Readers take no lock.

Promised: after a process dies at any point, a load gives the last save that
returned or the one in flight, whole, never a mix; after a power cut the same,
as far as the disk honours its syncs (macOS: ``F_FULLFSYNC``; Windows:
``FlushFileBuffers`` and no directory sync, NTFS journals its renames -- see
``platform``). Not promised: damage to the last record is taken for a torn save
(that one save is lost); network file systems, whose locks and syncs may not
mean what they mean on a local disk.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ...seam import delta, formats
from ...seam.document import dumps, loads
from ...seam.errors import StateTooLargeError, corrupt_error
from ...seam.state import Delta
from .head_place import Place, Written, meta_bytes

RS = b"\x1e"
HEAD = 24
TAIL = 62
COMPACT_RATIO = 4
COMPACT_MIN = 64 * 1024
"""Files smaller than this are never compacted: a tiny state's log may hold many saves."""
MAX_RECORD = 0xFFFFFFFF
HEAD_RE = re.compile(rb"\x1eDSJ1 ([0-9a-f]{8}) ([0-9a-f]{8})\n")
TAIL_RE = re.compile(rb"\n([0-9a-f]{24}) ([0-9a-f]{8}) ([0-9a-f]{8}) ([0-9a-f]{8}) ([0-9a-f]{8})\n")


class Record(NamedTuple):
    start: int
    end: int
    etag: str
    meta: bytes
    body: bytes


class Sizes(NamedTuple):
    """The bytes a snapshot's body gives the state, the step names, the signals and the
    running step's journal (each its JSON), as of a record: in its meta as ``"sizes":
    [state, steps, signals, calls]`` (records of 0.1 have no calls: an empty journal)."""

    state: int
    steps: int
    signals: int
    calls: int = delta.NO_CALLS


def compact_at(base: int) -> int:
    """The size beyond which a file is rewritten, for a snapshot of ``base`` bytes (that
    of the current checkpoint when its sizes are known; else the file's first record)."""
    return max(COMPACT_RATIO * base, COMPACT_MIN)


def snapshot_length(meta: int, sizes: Sizes) -> int:
    """The length of the snapshot a compaction would write now, for ``meta`` bytes of
    meta: HEAD, meta, ``{"state":..,"steps":..,"signals":..,"calls":..}`` (39 bytes
    besides the four), TAIL."""
    return HEAD + meta + 39 + sum(sizes) + TAIL


def sizes_of(meta: object) -> Sizes | None:
    """The sizes a record's meta (a dict, or its JSON) carries; None if it has none (an
    earlier version wrote it) or they make no sense."""
    if isinstance(meta, bytes):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    found = meta.get("sizes") if isinstance(meta, dict) else None
    if (
        isinstance(found, list)
        and len(found) in (3, 4)
        and all(type(n) is int and n >= 0 for n in found)
    ):
        return Sizes(*found)
    return None


def is_log(first: bytes) -> bool:
    return first[:1] == RS


def encode(meta: dict[str, Any], body: dict[str, Any], etag: str) -> bytes:
    return frame(dumps(meta), dumps(body), etag)


def frame(m: bytes, b: bytes, etag: str) -> bytes:
    """The record of meta ``m`` and body ``b`` (both JSON): HEAD, them, TAIL."""
    if len(b) > MAX_RECORD or len(m) > MAX_RECORD:  # 8 hex digits of length
        run_id = json.loads(m).get("run_id", "?")
        raise StateTooLargeError(
            f"run {run_id!r}: a checkpoint of {len(b):,} bytes does not fit a FileStore record "
            f"(at most {MAX_RECORD:,}); keep large data in files and their paths in the state",
            run_id=run_id,
            size=len(b),
            limit=MAX_RECORD,
        )
    head = b"\x1eDSJ1 %08x %08x\n" % (len(m), len(b))
    tail = b"\n%s %08x %08x %08x " % (etag.encode(), len(m), len(b), zlib.crc32(m))
    crc = zlib.crc32(tail, zlib.crc32(b, zlib.crc32(m, zlib.crc32(head))))
    return b"".join((head, m, b, tail, b"%08x\n" % crc))


def meta_of(doc: dict[str, Any]) -> dict[str, Any]:
    """The record's meta: the document (``document.to_document``) but its bulky parts,
    and but the optional fields that are null (a reader takes a missing one for null;
    every byte of a record is written and synced once per save)."""
    meta = doc.copy()
    del meta["state"], meta["steps"], meta["signals"], meta["calls"]
    meta.pop("etag", None)
    for key in _OPTIONAL:
        if meta[key] is None:
            del meta[key]
    meta["step_name"] = doc["steps"][-1] if doc["steps"] else None
    return meta


def body(
    doc: dict[str, Any],
    change: Delta | None,
    steps: tuple[str, ...] | None,
    signals: bool,
    sizes: Sizes | None,
    *,
    calls: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[bytes, Sizes | None, Written]:
    """A save's body (JSON), the sizes after it, and what of the head it writes whole
    (``head_place``). ``change``: the state's, None to
    write it whole; ``steps``: the names already stored (None: unknown, write all);
    ``signals``: whether to write them; ``sizes``: as of the record before (None:
    unknown); ``calls``: the journal as stored (None: unknown, write it whole). The
    values are as the store is given them (encoded: ``seam.encoded``); the
    state and the journal are written as ``seam.delta`` says. The sizes after are
    exact: a part written whole is measured, a change is added to what it changes;
    None when a part that is not written whole had no known size. New step names are
    appended (``steps+``) only when all of them are long: a short list is written
    whole, which keeps where the head lies known (``head_place``)."""
    before = None if sizes is None else delta.Sizes(sizes.state, sizes.calls)
    parts, data = delta.encode(doc["state"], change, doc["calls"], calls, before)
    names = doc["steps"]
    steps_size: int | None = None
    whole_steps: int | None = None
    appended = False
    prefix = steps is not None and tuple(names[: len(steps)]) == steps
    if prefix and steps is not None and len(names) > len(steps):
        whole = dumps(names)
        if len(whole) > SHORT_STEPS:
            added = dumps(names[len(steps) :])
            parts.append(b'"steps+":' + added)
            appended = True
            if sizes is not None:
                steps_size = sizes.steps + len(added) - 2 + bool(steps)
        else:
            prefix = False  # written whole below
    elif prefix and sizes is not None:
        steps_size = sizes.steps
    if not prefix:
        whole = dumps(names)
        parts.append(b'"steps":' + whole)
        steps_size = whole_steps = len(whole)
    signals_size: int | None = None if sizes is None else sizes.signals
    whole_signals: int | None = None
    if signals:
        whole = dumps(doc["signals"])
        parts.append(b'"signals":' + whole)
        signals_size = whole_signals = len(whole)
    after = (
        None
        if data is None or steps_size is None or signals_size is None
        else Sizes(data.state, steps_size, signals_size, data.calls)
    )
    return b"{" + b",".join(parts) + b"}", after, Written(whole_steps, whole_signals, appended)


SHORT_STEPS = 512
"""Step names up to this many bytes (as JSON) are written whole when one is added: a
head read then finds them where the last record says (``head_place``). Most
workflows' names fit; past it a step appends its name alone, so a long run's record
does not carry a list that grows with every step."""


def head_record(
    doc: dict[str, Any], before: Sizes, at: int, place: Place | None
) -> tuple[bytes, Sizes, Place | None]:
    """The record of a head-only save (``save_head``) of the document ``doc`` (without
    its data) on a record whose sizes are ``before``: the fields, every step name and
    every signal; no state and no journal, which stay as the records before left them.
    And the sizes after, and where the head lies (``head_place``: in this record),
    for a record written at offset ``at`` after one that placed it at ``place``."""
    steps, signals = dumps(doc["steps"]), dumps(doc["signals"])
    meta = meta_of({**doc, "state": None, "calls": None})
    sizes = Sizes(before.state, len(steps), len(signals), before.calls)
    meta["sizes"] = sizes
    body = b'{"steps":%s,"signals":%s}' % (steps, signals)
    m, placed = meta_bytes(meta, body, Written(len(steps), len(signals)), at + HEAD, place)
    return frame(m, body, doc["etag"]), sizes, placed


_OPTIONAL = (
    "workflow",
    "owner",
    "lease_expires",
    "waiting_for",
    "error",
    "trace",
    "wake_at",
    "cancel_reason",
    "forked_from",
    "version",  # lifecycle
    "resumed",
    "queue",  # queues (workers.queues)
    "priority",
    "partition",
    "parent",  # child runs (runner.children)
)


def record_at(data: bytes, o: int) -> Record | None:
    """The valid record starting at ``o`` in ``data``, or None."""
    head = HEAD_RE.fullmatch(data, o, o + HEAD)
    if head is None:
        return None
    m, b = int(head[1], 16), int(head[2], 16)
    end = o + HEAD + m + b + TAIL
    if end > len(data):
        return None
    tail = TAIL_RE.fullmatch(data, end - TAIL, end)
    if tail is None or (tail[2], tail[3]) != (head[1], head[2]):
        return None
    meta = data[o + HEAD : o + HEAD + m]
    if int(tail[4], 16) != zlib.crc32(meta):
        return None
    if int(tail[5], 16) != zlib.crc32(memoryview(data)[o : end - 9]):
        return None
    return Record(o, end, tail[1].decode(), meta, data[o + HEAD + m : end - TAIL])


def scan(data: bytes, run_id: str, where: str) -> list[Record]:
    """The file's valid records, applying the torn-tail rule (see the top)."""
    records: list[Record] = []
    o = 0
    while o < len(data) and (rec := record_at(data, o)) is not None:
        records.append(rec)
        o = rec.end
    if o < len(data):
        if not records:
            raise corrupt_error(run_id, where, "its first record is damaged")
        p = data.find(RS, o + 1)
        while p != -1:
            if record_at(data, p) is not None:
                raise corrupt_error(
                    run_id, where, f"damaged at byte {o}, before records that are intact"
                )
            p = data.find(RS, p + 1)
    return records


def replay(data: bytes, run_id: str, where: str) -> tuple[dict[str, Any], list[Record]]:
    """The document the records add up to (``document.from_document`` checks it), and them."""
    records = scan(data, run_id, where)
    doc: dict[str, Any] = {}
    state: Any = None
    steps: Any = None
    signals: Any = {}
    calls: dict[tuple[str, int], Any] = {}
    for rec in records:
        meta, body = loads(rec.meta, run_id, where), loads(rec.body, run_id, where)
        try:
            if not isinstance(meta, dict) or not isinstance(body, dict):
                raise TypeError("it is not a JSON object")
            state = delta.apply(state, calls, body)
            if "steps" in body:
                steps = body["steps"]
            elif body.get("steps+"):
                if not isinstance(steps, list) or not isinstance(body["steps+"], list):
                    raise TypeError("it adds step names to no list of them")
                steps.extend(body["steps+"])
            signals = body.get("signals", signals)
        except (TypeError, ValueError) as exc:
            raise corrupt_error(run_id, where, f"the record at byte {rec.start}: {exc}") from None
        doc = meta
    doc |= {"steps": steps, "signals": signals, "state": state, "calls": delta.journal(calls)}
    return doc, records


def parse(data: bytes, run_id: str, where: str) -> tuple[Any, str | None, list[Record] | None]:
    """A run file's document (for ``document.from_document``), its etag, and its records
    (None for an earlier version's whole document)."""
    if formats.is_whole_document(data):  # an earlier version's file (seam.formats)
        doc, etag = formats.read_whole(data, run_id, where)
        return doc, etag, None
    doc, records = replay(data, run_id, where)
    return doc, records[-1].etag, records
