"""A run file read and written in place: its end without the rest, and bytes at an
offset -- what a save needs to check and append (``_file``) and what a listing needs
to show a run without reading its state (``_filelist``). The record format these
read is ``_journal``'s."""

from __future__ import annotations

import os
import re
import zlib

from ._journal import HEAD, HEAD_RE, TAIL, TAIL_RE, Record, record_at


def read_at(fd: int, offset: int, n: int) -> bytes:
    """Up to ``n`` bytes at ``offset`` (lseek + read: Windows has no pread)."""
    os.lseek(fd, offset, os.SEEK_SET)
    chunks = []
    while n > 0 and (chunk := os.read(fd, n)):
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_all(fd: int) -> bytes:
    """The whole file, read until its end (it may have grown since it was measured)."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    size = max(os.fstat(fd).st_size, 0) + 1
    while chunk := os.read(fd, size):
        chunks.append(chunk)
    return b"".join(chunks)


def write_at(fd: int, offset: int, data: bytes) -> None:
    """All of ``data`` at ``offset``: ``pwrite``, one system call (lseek + write where
    there is none: Windows)."""
    view = memoryview(data)
    if hasattr(os, "pwrite"):
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
        return
    os.lseek(fd, offset, os.SEEK_SET)
    while view:
        view = view[os.write(fd, view) :]


def first_length(fd: int) -> int | None:
    """The length of the file's first record (the last snapshot), from its HEAD."""
    head = HEAD_RE.fullmatch(read_at(fd, 0, HEAD))
    return None if head is None else HEAD + int(head[1], 16) + int(head[2], 16) + TAIL


def tail_etag(fd: int, size: int) -> str | None:
    """The etag in the TAIL that ends the file, unchecked (for a writer that knows the file)."""
    tail = TAIL_RE.fullmatch(read_at(fd, size - TAIL, TAIL)) if size >= HEAD + TAIL else None
    return None if tail is None else tail[1].decode()


def last_record(fd: int, size: int) -> Record | None:
    """The record that ends the file, checked in full; None if the end is torn."""
    last = _last(fd, size)
    if last is None:
        return None
    rec = record_at(read_at(fd, last[0], size - last[0]), 0)
    return None if rec is None else rec._replace(start=last[0], end=size)


def last_meta(fd: int, size: int) -> tuple[bytes, str] | None:
    """The meta and etag of the record that ends the file, reading only those (for a
    listing: the body is not read, so only the meta's own checksum is checked); None if
    the end does not look like a whole record."""
    last = _last(fd, size)
    if last is None:
        return None
    start, tail = last
    head_meta = read_at(fd, start, HEAD + int(tail[2], 16))
    head, meta = HEAD_RE.fullmatch(head_meta, 0, HEAD), head_meta[HEAD:]
    if head is None or head[1] != tail[2] or int(tail[4], 16) != zlib.crc32(meta):
        return None
    return meta, tail[1].decode()


def _last(fd: int, size: int) -> tuple[int, re.Match[bytes]] | None:
    """Where the record that ends the file starts, by its TAIL, and the TAIL."""
    if size < HEAD + TAIL:
        return None
    tail = TAIL_RE.fullmatch(read_at(fd, size - TAIL, TAIL))
    if tail is None:
        return None
    start = size - TAIL - int(tail[3], 16) - int(tail[2], 16) - HEAD
    return (start, tail) if start >= 0 else None
