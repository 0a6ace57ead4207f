"""The saver's reads, as programs of store requests (``_requests``): a checkpoint and
its pending writes (``get_tuple``), pages of them (``list``), a channel's value -- whole,
or a list rebuilt from the items appended to it, remembered in the saver's ``Memory``
(``_memory``; the package's top tells the design).

A list channel's appended items are defined either by an extension record (its own
kind, ``lg.x.``) or, when they are what a task of the superstep wrote, by a reference
in the next checkpoint's record (``xs``: the write's key and place), so the items are
stored once, as the task's write. A version without a definition (the checkpoint that
defined it pruned) is read as a whole value (the prune wrote it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol

from ... import CorruptCheckpointError
from ...backend import Codec, Item
from ._layout import (
    NAMESPACES,
    WORKFLOW,
    before,
    blob_key,
    blobs_kind,
    checkpoint_id_of,
    checkpoint_key,
    checkpoints_kind,
    chunk_key,
    decode,
    extensions_kind,
    payload,
    thread_run,
)
from ._memory import Memory, Seen
from ._requests import ListRuns, LoadRun, Read, Request

PAGE = 16
_GROUP = re.compile(r"[/#]")


class Reads:
    """The read programs, on one serializer, the store's codec and a ``Memory``."""

    def __init__(
        self, serde: SerializerProtocol, codec: Callable[[], Codec | None], memory: Memory
    ) -> None:
        self.serde = serde
        self.codec = codec
        """The store's codec as it is now (a store's codec may be set after it is made)."""
        self.memory = memory

    def get_tuple(self, config: RunnableConfig) -> Generator[Request, Any, CheckpointTuple | None]:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        run = thread_run(thread_id)
        cid = get_checkpoint_id(config)
        group = yield from self.group(run, ns, checkpoint_key(cid) if cid else None)
        if group is None:
            return None
        return (yield from self.checkpoint_tuple(run, thread_id, ns, group))

    def listing(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before_config: RunnableConfig | None,
        limit: int | None,
    ) -> Generator[Request, Any, list[CheckpointTuple]]:
        if config is None:
            threads = yield from self.threads()
        else:
            threads = [str(config["configurable"]["thread_id"])]
        wanted_ns = config["configurable"].get("checkpoint_ns") if config else None
        only = get_checkpoint_id(config) if config else None
        cursor = get_checkpoint_id(before_config) if before_config else None
        found: list[CheckpointTuple] = []
        for thread_id in threads:
            run = thread_run(thread_id)
            if wanted_ns is not None:
                namespaces = [str(wanted_ns)]
            else:
                namespaces = yield from self.namespaces(run)
            for ns in namespaces:
                after = checkpoint_key(cursor) if cursor else None
                if only:
                    after = before(checkpoint_key(only))
                items: list[Item] = yield Read(run, checkpoints_kind(ns), after)
                for group in groups(items):
                    if only and group[0].key != checkpoint_key(only):
                        break
                    if limit is not None and len(found) >= limit:
                        return found
                    cp, md = self.checkpoint(run, ns, group)
                    if filter and not all(md.get(k) == v for k, v in filter.items()):
                        continue
                    found.append(
                        (yield from self.checkpoint_tuple(run, thread_id, ns, group, (cp, md)))
                    )
                    if only:
                        break
        return found

    def threads(self) -> Generator[Request, Any, list[str]]:
        """Every thread's id (its run's state names it: a hashed run id hides it)."""
        threads = []
        for run_id in (yield ListRuns(WORKFLOW)):
            run = yield LoadRun(run_id)
            if run is not None:
                threads.append(str(run.state.get("thread_id", run_id)))
        return threads

    def namespaces(self, run: str) -> Generator[Request, Any, list[str]]:
        return [i.key[1:] for i in (yield Read(run, NAMESPACES))]

    def group(
        self, run: str, ns: str, key: str | None
    ) -> Generator[Request, Any, list[Item] | None]:
        """A checkpoint's items (its head first, then its chunks and writes): the
        checkpoint of ``key``, or the newest one; read a page at a time, so a long thread
        costs what this checkpoint holds."""
        kind = checkpoints_kind(ns)
        after = before(key) if key is not None else None
        page: list[Item] = yield Read(run, kind, after, PAGE)
        if not page or (key is not None and page[0].key != key) or "n" not in page[0].value:
            return None
        head = page[0].key
        group = [page[0], *(i for i in page[1:] if under(i.key, head))]
        while len(page) == PAGE and under(page[-1].key, head):
            page = yield Read(run, kind, page[-1].key, PAGE)
            group += [i for i in page if under(i.key, head)]
        return group

    def checkpoint(self, run: str, ns: str, group: list[Item]) -> tuple[Any, Any]:
        """A checkpoint's record decoded: (the checkpoint without its values, its metadata)."""
        by_key = {i.key: i.value for i in group}
        text = payload(group[0], by_key, run, codec=self.codec(), kind_=checkpoints_kind(ns))
        record = decode(self.serde, group[0].value["t"], text, run)
        return record["checkpoint"], record["metadata"]

    def checkpoint_tuple(
        self,
        run: str,
        thread_id: str,
        ns: str,
        group: list[Item],
        decoded: tuple[Any, Any] | None = None,
    ) -> Generator[Request, Any, CheckpointTuple]:
        head = group[0]
        cp, md = decoded or self.checkpoint(run, ns, group)
        checkpoint = dict(cp)
        versions = checkpoint["channel_versions"]
        extended = set(head.value.get("x", ()))
        values: dict[str, Any] = {}
        at: dict[str, str] = head.value.get("at", {})
        for channel, version in versions.items():
            if channel in extended:
                values[channel] = yield from self.extended(run, ns, channel, str(version))
                continue
            if channel in at:
                found, value = yield from self.inline(
                    run, ns, group, checkpoint, at[channel], channel
                )
            else:
                found, value = False, None
            if not found:
                found, value = yield from self.whole(run, ns, channel, version)
            if found:
                values[channel] = value
        checkpoint["channel_values"] = values
        cid = checkpoint_id_of(head.key)
        self.memory.remember(
            self.memory.seen, (run, ns, cid), Seen(dict(versions), frozenset(extended), dict(at))
        )
        by_key = {i.key: i.value for i in group}
        writes = []
        for item in group[1:]:
            if "/" in item.key and "#" not in item.key and "n" in item.value:
                v = item.value
                for (channel, i), value in zip(
                    v["w"], self.write_values(run, ns, item, by_key), strict=True
                ):
                    writes.append(
                        (writes_sort_key(v["path"], v["task"], i), (v["task"], channel, value))
                    )
        writes.sort(key=lambda w: w[0])
        parent = head.value.get("parent")
        return CheckpointTuple(
            config={
                "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
            },
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=md,
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None
            ),
            pending_writes=[w for _, w in writes],
        )

    def inline(  # noqa: PLR0917 - where, and what
        self, run: str, ns: str, group: list[Item], cp: dict[str, Any], key: str, channel: str
    ) -> Generator[Request, Any, tuple[bool, Any]]:
        """A small value kept in the record of the checkpoint ``key`` (this one's, ``cp``,
        or an earlier one's); not found: that checkpoint was removed, and the value was
        written whole (``_prune``)."""
        if key == group[0].key:
            own = cp.get("channel_values") or {}
            return channel in own, own.get(channel)
        other = yield from self.group(run, ns, key)
        if other is None:
            return False, None
        values = self.checkpoint(run, ns, other)[0].get("channel_values") or {}
        return channel in values, values.get(channel)

    def write_values(self, run: str, ns: str, head: Item, by_key: dict[str, Any]) -> list[Any]:
        """The values of one write record (a task's call of ``put_writes``)."""
        text = payload(head, by_key, run, codec=self.codec(), kind_=checkpoints_kind(ns))
        values: list[Any] = decode(self.serde, head.value["t"], text, run)
        return values

    def whole(
        self, run: str, ns: str, channel: str, version: Any
    ) -> Generator[Request, Any, tuple[bool, Any]]:
        kind, key = blobs_kind(ns), blob_key(channel, version)
        found: list[Item] = yield Read(run, kind, before(key), 1)
        if not found or found[0].key != key:
            return False, None
        head = found[0]
        if head.value.get("t") == "empty":
            return False, None
        chunks: list[Item] = []
        if (n := head.value.get("n", 1)) > 1:
            first = chunk_key(key, head.value.get("c", ""), 1)
            chunks = yield Read(run, kind, before(first), n - 1)
        text = payload(head, chunks, run, codec=self.codec(), kind_=kind)
        value = decode(self.serde, head.value["t"], text, run)
        if type(value) is list:
            self.memory.remember(self.memory.lists, (run, ns, channel, str(version)), list(value))
        return True, value

    def extended(
        self, run: str, ns: str, channel: str, version: str, uses: set[str] | None = None
    ) -> Generator[Request, Any, Any]:
        """A list stored as the items appended to it: every extension record of the
        channel in one read (their sum is about the list's size) -- and, when a version
        is defined by a checkpoint's reference to a task's write, the checkpoints' kind
        in one more -- then the chain from ``version`` back to a whole value. ``uses``
        collects the keys of the checkpoints the value depends on (their records hold
        its definitions or its writes)."""
        xkind, ckind = extensions_kind(ns, channel), checkpoints_kind(ns)
        items: list[Item] = yield Read(run, xkind)
        by_key = {i.key: i.value for i in items}
        defs: dict[str, tuple[Item, dict[str, Any], str]] = {
            i.key: (i, i.value, xkind) for i in items if "n" in i.value
        }
        written: dict[str, Any] | None = None
        chain: list[tuple[Item, dict[str, Any], str]] = []
        at: str | None = version
        start: list[Any] = []
        while at is not None:
            if at not in defs and written is None:
                cps: list[Item] = yield Read(run, ckind)
                written = {i.key: i.value for i in cps}
                for i in cps:
                    d = i.value.get("xs", {}).get(channel)
                    if d is not None and "n" in i.value:
                        defs.setdefault(d["v"], (i, d, ckind))
            if at not in defs:
                found, value = yield from self.whole(run, ns, channel, at)
                if not found:
                    raise CorruptCheckpointError(
                        f"thread run {run!r}: version {at!r} of channel {channel!r} is "
                        "missing; the thread's items were changed outside DurableSaver",
                        run_id=run,
                    )
                start = list(value)
                break
            chain.append(defs[at])
            d = defs[at][1]
            base = d.get("base")
            if base is None:
                break
            if d.get("bx"):
                at = base
                continue
            found, value = yield from self.whole(run, ns, channel, base)
            start = list(value) if found else []
            break
        return self._rebuild(run, ns, channel, start, chain, by_key, written, uses)

    def _rebuild(  # noqa: PLR0917 - the walk's findings, handed over
        self,
        run: str,
        ns: str,
        channel: str,
        start: list[Any],
        chain: list[tuple[Item, dict[str, Any], str]],
        by_key: dict[str, Any],
        written: dict[str, Any] | None,
        uses: set[str] | None,
    ) -> list[Any]:
        """The list from its whole ``start`` and the definitions of ``chain`` (newest
        first): each extension's items, or the task's writes it refers to."""
        xkind = extensions_kind(ns, channel)
        value = start
        for head, d, kind in reversed(chain):
            if len(value) != d["k"]:
                raise CorruptCheckpointError(
                    f"thread run {run!r}: channel {channel!r} at version {head.key!r} extends "
                    f"a list of {d['k']} items, and {len(value)} were found",
                    run_id=run,
                )
            if kind == xkind:
                text = payload(head, by_key, run, codec=self.codec(), kind_=kind)
                value = value + decode(self.serde, head.value["t"], text, run)
            else:
                assert written is not None
                if uses is not None:
                    uses.add(head.key)
                for wkey, place in d["w"]:
                    if wkey not in written:
                        raise CorruptCheckpointError(
                            f"thread run {run!r}: channel {channel!r} at version {d['v']!r} "
                            f"is a task's write ({wkey!r}) that is missing",
                            run_id=run,
                        )
                    if uses is not None:
                        uses.add(_GROUP.split(wkey, maxsplit=1)[0])
                    got = self.write_values(run, ns, Item(wkey, written[wkey]), written)[place]
                    value = value + (got if type(got) is list else [got])
            self.memory.remember(
                self.memory.lists, (run, ns, channel, d.get("v", head.key)), list(value)
            )
        return value


def groups(items: list[Item]) -> Iterator[list[Item]]:
    """A read of checkpoints' items cut into each checkpoint's (head first)."""
    out: list[list[Item]] = []
    for item in items:
        key = _GROUP.split(item.key, maxsplit=1)[0]
        if not out or out[-1][0].key != key:
            if item.key != key:  # the rest of a checkpoint whose head is not there
                continue
            out.append([])
        out[-1].append(item)
    return iter(out)


def under(key: str, head: str) -> bool:
    """Whether ``key`` is a chunk or a write of the checkpoint whose key is ``head``."""
    return key.startswith(head) and key[len(head) : len(head) + 1] in ("/", "#")


def writes_sort_key(task_path: str, task_id: str, idx: int) -> tuple[str, str, int]:
    """The order LangGraph applies a superstep's writes in (``writes_sort_key`` of
    langgraph-checkpoint 4.3; written here for the releases before it)."""
    return (task_path, task_id, idx)
