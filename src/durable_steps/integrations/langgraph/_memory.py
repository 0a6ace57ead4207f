"""What a saver remembers between its programs, in this process (``Memory``), and the
shapes it keeps: a checkpoint's versions (``Seen``), a task's write as stored
(``Written``). Bounded: the least recent go. Nothing here is needed for correctness
but the writes a put waits for: a saver that remembers nothing reads what it needs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

_CACHED = 512


class Seen(NamedTuple):
    """What a put needs of its parent checkpoint: its channel versions, and which of
    them are stored as extensions of an earlier version."""

    versions: dict[str, Any]
    extended: frozenset[str]
    inline: dict[str, str]
    """Channel -> the key of the checkpoint whose record holds its value (``INLINE``)."""


@dataclass
class Written:
    """A task's write as this saver stores it: enough to find it again (the write
    record's key, its place there) and to tell whether a list channel's appended items
    are it (``typed``: the serializer's output for the value as a list). ``stored`` is
    set once its append ended, ``ok`` when it wrote the record (a put that refers to it
    waits for that: LangGraph may send a task's writes and the next checkpoint at once)."""

    order: tuple[str, str, int]
    channel: str
    key: str
    place: int
    size: int
    typed: tuple[str, bytes]
    stored: threading.Event = field(default_factory=threading.Event)
    ok: bool = False


@dataclass
class Memory:
    """What a saver remembers between programs, in this process: the checkpoints it
    wrote or read (versions, extended channels), each channel's last lists (to store an
    append as the items appended), the writes of recent checkpoints, the threads and
    namespaces known to exist. Bounded: the least recent go."""

    seen: OrderedDict[tuple[str, str, str], Seen] = field(default_factory=OrderedDict)
    lists: OrderedDict[tuple[str, str, str, str], list[Any]] = field(default_factory=OrderedDict)
    writes: OrderedDict[tuple[str, str, str], list[Written]] = field(default_factory=OrderedDict)
    threads: dict[str, float] = field(default_factory=dict)
    """Thread run -> when (monotonic) this saver last touched it."""
    namespaces: set[tuple[str, str]] = field(default_factory=set)

    @staticmethod
    def remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _CACHED:
            cache.popitem(last=False)

    def forget(self, run: str) -> None:
        """Everything of a thread (deleted, or pruned)."""
        self.threads.pop(run, None)
        self.namespaces = {k for k in self.namespaces if k[0] != run}
        for key in [k for k in self.seen if k[0] == run]:
            del self.seen[key]
        for key in [k for k in self.writes if k[0] == run]:
            del self.writes[key]
        for lkey in [k for k in self.lists if k[0] == run]:
            del self.lists[lkey]
