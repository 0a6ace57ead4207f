"""Where a run file's head lies: each record says where its run's step names and
signals are, so that a head read (``load_head``: what a send, a signal or a cancel
reads before its head-only save) reads the last record and those two, not the file.

Why. A run's head is the last record's meta (every field, the mailbox among them)
plus its step names and signals -- which a record writes only when they change
(``runfile``: ``steps+``, ``signals``). Replaying the file for them reads the whole
log, which grows with every save up to its compaction (4x the snapshot): a chat
run's step holds a journal record per message it took, so a send after 1,000 taken
messages read 262 KB where the first read 5 KB. Reading the last record and two
ranges is flat: what it reads does not grow with the saves before it.

How. A record's meta may begin with ``"hd": "SSSSSSSSSSSSLLLLLLLLGGGGGGGGGGGGKKKKKKKK"``
(hex): the byte offset in the file and the length of the JSON of the step names
(S, L) and of the signals (G, K) as of that record -- in the record itself when its
body writes them whole (a snapshot, a head-only save, a save that changed them), or
where the record before said. The field has a fixed width, so the meta's length, and
so where the record's own body begins, is known before the offsets are written in.
A record whose step names or signals cannot be placed (it appends names with
``steps+``, or the record before it has no ``hd``: an earlier version wrote it) has
none; a head read then replays the file, as before, and the next record that writes
them whole places them again. Earlier files load as they always did.

What a head read (``runfile_tail.read_head``) checks: the last record in full (both
checksums: a torn save is never taken for the head), then that each range is JSON of
the right kind, and ``document.from_document`` the rest. The ranges lie in earlier records, which no
save changes (only the last record can be torn; a compaction replaces the file by a
rename, and the read keeps its one descriptor): they are read without their
records' checksums, as a listing reads a meta.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...seam.document import dumps

KEY = "hd"
SLOT = "0" * 40
"""The field's value before its offsets are written in: the same width."""
_SLOT = b'{"hd":"' + SLOT.encode() + b'"'
_SIGNALS_KEY = len(b',"signals":')


class Place(NamedTuple):
    """Where, in the file, the JSON of the step names and of the signals lie."""

    steps: int
    steps_len: int
    signals: int
    signals_len: int

    def text(self) -> bytes:
        return b"%012x%08x%012x%08x" % self


class Written(NamedTuple):
    """What of the head a record's body writes whole: the JSON lengths of the step
    names and of the signals (None: not written whole)."""

    steps: int | None
    signals: int | None
    appended: bool = False
    """Step names appended (``steps+``): where the names are is then not known."""


def meta_bytes(
    meta: dict[str, Any], body: bytes, written: Written, at: int, before: Place | None
) -> tuple[bytes, Place | None]:
    """The JSON of a record's ``meta`` with its ``hd`` (see the top), for a record
    whose meta begins at offset ``at`` of its file, with ``body``, after a record whose
    place was ``before``; and the place it records (None: none can be placed)."""
    signals_rel = None if written.signals is None else len(body) - 1 - written.signals
    steps_rel = None
    if written.steps is not None:
        steps_end = len(body) - 1 if signals_rel is None else signals_rel - _SIGNALS_KEY
        steps_rel = steps_end - written.steps
    if before is None or written.appended:
        if written.appended or steps_rel is None or signals_rel is None:
            return dumps(meta), None
        before = Place(0, 0, 0, 0)  # (not used: both are in this record)
    m = dumps({KEY: SLOT, **meta})
    start = at + len(m)  # where the body begins
    place = Place(
        before.steps if steps_rel is None else start + steps_rel,
        before.steps_len if written.steps is None else written.steps,
        before.signals if signals_rel is None else start + signals_rel,
        before.signals_len if written.signals is None else written.signals,
    )
    return b'{"hd":"' + place.text() + b'"' + m[len(_SLOT) :], place


def of_meta(meta: object) -> Place | None:
    """The place a record's meta (a dict) records; None if none (or not one)."""
    text = meta.get(KEY) if isinstance(meta, dict) else None
    if not isinstance(text, str) or len(text) != len(SLOT):
        return None
    try:
        return Place(*(int(text[a:b], 16) for a, b in ((0, 12), (12, 20), (20, 32), (32, 40))))
    except ValueError:
        return None
