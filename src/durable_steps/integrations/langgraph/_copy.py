"""``copy_thread``: every checkpoint, pending write and channel value of one thread
written again under another, as a program of store requests (``_requests``).

A thread's items are found from what stays clear: its namespaces (``lg.ns``), per
namespace its checkpoints' and values' kinds, and the channels stored as extensions
(each checkpoint's head names them, ``x``). Each record is opened and written again,
not copied as stored: a sealed payload is authenticated with its run (the thread), so
a copy is sealed anew for the target thread. Values first, each checkpoint's record
after them (the order ``put`` keeps), every write create-only: a record the target
already has is kept, never overwritten. The source is only read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...backend import Codec, Item
from ._layout import (
    NAMESPACES,
    blobs_kind,
    checkpoints_kind,
    extensions_kind,
    payload,
    records,
    thread_run,
)
from ._requests import Append, Program, Read, append

_RECORD = frozenset({"d", "n", "c", "e"})
"""What ``records`` adds to a record's own fields (its chunking and sealing)."""


def copy_thread(
    codec: Callable[[], Codec | None], source: str, target: str, touch: Callable[[str, str], Any]
) -> Program:
    src, dst = thread_run(source), thread_run(target)
    namespaces: list[Item] = yield Read(src, NAMESPACES)
    if not namespaces:
        return None  # nothing to copy: a thread that was never written
    yield from touch(dst, target)
    for marker in namespaces:
        ns = marker.key[1:]
        checkpoints: list[Item] = yield Read(src, checkpoints_kind(ns))
        channels = sorted({c for i in checkpoints if "n" in i.value for c in i.value.get("x", ())})
        for kind in [blobs_kind(ns), *(extensions_kind(ns, c) for c in channels)]:
            items: list[Item] = yield Read(src, kind)
            yield from _copy(codec(), src, dst, kind, items)
        yield from _copy(codec(), src, dst, checkpoints_kind(ns), checkpoints)
        yield from append(Append(dst, Item(marker.key, {}), NAMESPACES, quiet=True))
    return None


def _copy(codec: Codec | None, src: str, dst: str, kind: str, items: list[Item]) -> Program:
    """Each record of ``items`` (one kind, in key order) opened and sealed anew for
    ``dst``: its chunks, then its head. A checkpoint's head comes after its writes in
    key order, so writing heads last keeps a checkpoint from showing before them."""
    by_key = {i.key: i.value for i in items}
    heads = [i for i in items if "n" in i.value]
    later = [h for h in heads if "/" not in h.key and kind.startswith("lg.cp.")]
    for head in [*(h for h in heads if h not in later), *later]:
        text = payload(head, by_key, src, codec=codec, kind_=kind)
        meta = {k: v for k, v in head.value.items() if k not in _RECORD}
        for record in records(head.key, meta, text, codec=codec, run_id=dst, kind_=kind):
            yield from append(Append(dst, record, kind, quiet=True))
