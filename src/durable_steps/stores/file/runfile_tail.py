"""A run file's head and tail, read without the rest: what a save needs to check
before it appends (``store``) and what a listing needs to show a run without reading
its state (``listing``). The record format these read is ``runfile``'s; the bytes
come through ``fileio``."""

from __future__ import annotations

import json
import os
import re
import zlib
from pathlib import Path
from typing import Any

from . import fileio
from .head_place import KEY, of_meta
from .runfile import HEAD, HEAD_RE, TAIL, TAIL_RE, Record, record_at


def first_length(fd: int) -> int | None:
    """The length of the file's first record (the last snapshot), from its HEAD."""
    head = HEAD_RE.fullmatch(fileio.read_at(fd, 0, HEAD))
    return None if head is None else HEAD + int(head[1], 16) + int(head[2], 16) + TAIL


def first_meta(fd: int, limit: int) -> bytes | None:
    """The meta of the file's first record, unchecked (its checksum is in the TAIL after
    the body, which may be what is damaged); None if the HEAD is not one, or says the
    meta is longer than ``limit`` or than the file."""
    head = HEAD_RE.fullmatch(fileio.read_at(fd, 0, HEAD))
    if head is None or int(head[1], 16) > limit:
        return None
    meta = fileio.read_at(fd, HEAD, int(head[1], 16))
    return meta if len(meta) == int(head[1], 16) else None


def tail_etag(fd: int, size: int) -> str | None:
    """The etag in the TAIL that ends the file, unchecked (for a writer that knows the file)."""
    tail = TAIL_RE.fullmatch(fileio.read_at(fd, size - TAIL, TAIL)) if size >= HEAD + TAIL else None
    return None if tail is None else tail[1].decode()


def last_record(fd: int, size: int) -> Record | None:
    """The record that ends the file, checked in full; None if the end is torn."""
    last = _last(fd, size)
    if last is None:
        return None
    rec = record_at(fileio.read_at(fd, last[0], size - last[0]), 0)
    return None if rec is None else rec._replace(start=last[0], end=size)


def last_meta(fd: int, size: int) -> tuple[bytes, str] | None:
    """The meta and etag of the record that ends the file, reading only those (for a
    listing: the body is not read, so only the meta's own checksum is checked); None if
    the end does not look like a whole record."""
    last = _last(fd, size)
    if last is None:
        return None
    start, tail = last
    head_meta = fileio.read_at(fd, start, HEAD + int(tail[2], 16))
    head, meta = HEAD_RE.fullmatch(head_meta, 0, HEAD), head_meta[HEAD:]
    if head is None or head[1] != tail[2] or int(tail[4], 16) != zlib.crc32(meta):
        return None
    return meta, tail[1].decode()


def _last(fd: int, size: int) -> tuple[int, re.Match[bytes]] | None:
    """Where the record that ends the file starts, by its TAIL, and the TAIL."""
    if size < HEAD + TAIL:
        return None
    tail = TAIL_RE.fullmatch(fileio.read_at(fd, size - TAIL, TAIL))
    if tail is None:
        return None
    start = size - TAIL - int(tail[3], 16) - int(tail[2], 16) - HEAD
    return (start, tail) if start >= 0 else None


def read_head(path: Path) -> tuple[dict[str, Any], str] | None:
    """The head document (``from_document``'s, with an empty state and no journal) and
    etag of the run file at ``path``, read from its last record and the two ranges
    it places; None when that cannot be done (no file, no place, a torn end): the
    caller reads the file whole."""
    fd = fileio.open_existing(path, os.O_RDONLY)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        last = last_record(fd, size)
        if last is None:
            return None
        meta = json.loads(last.meta)
        place = of_meta(meta)
        if place is None:
            return None
        steps = json.loads(fileio.read_at(fd, place.steps, place.steps_len))
        signals = json.loads(fileio.read_at(fd, place.signals, place.signals_len))
    except (ValueError, OSError):
        return None
    finally:
        os.close(fd)
    if not isinstance(meta, dict) or not isinstance(steps, list) or not isinstance(signals, dict):
        return None
    del meta[KEY]
    meta.pop("step_name", None)
    meta.pop("sizes", None)
    return {**meta, "steps": steps, "signals": signals, "state": {}, "calls": None}, last.etag
