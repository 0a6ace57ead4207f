"""The saver's semantics written once, as programs: generators that yield store
requests (``Read``, ``Append``, ``Put``, ...) and are resumed with their results, so the
blocking and the async methods of ``DurableSaver`` cannot drift apart (the runner's
programs-and-drivers pattern). The package's top tells the design. One class, over
400 lines: its writes and its reads share what it remembers (the last lists of each
channel, the checkpoints it wrote), and split apart each would reach into the other.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.base import Checkpoint as LgCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from ... import ConflictError, CorruptCheckpointError
from ...backend import Codec, Item
from ._layout import (
    NAMESPACES,
    before,
    blob_key,
    blobs_kind,
    checkpoint_id_of,
    checkpoint_key,
    checkpoints_kind,
    chunk_key,
    decode,
    encode,
    extensions_kind,
    payload,
    records,
    thread_run,
)
from ._requests import (
    Append,
    DeleteRun,
    ListThreads,
    Program,
    Put,
    Read,
    Request,
    Touch,
)

PAGE = 16
TOUCH = 600.0
"""Seconds between two moves of a thread's time by one saver: a thread expires (the
store's ``finished_ttl``) that long after its last checkpoint, to within this."""
_CACHED = 512
_GROUP = re.compile(r"[/#]")


class _Seen(NamedTuple):
    """What a put needs of its parent checkpoint: its channel versions, and which of
    them are stored as extensions of an earlier version."""

    versions: dict[str, Any]
    extended: frozenset[str]


class Programs:
    """The saver's programs, and what it remembers between them in this process: the
    checkpoints it wrote or read (versions, extended channels), the last lists of each
    channel (to store an append as the items appended), the threads and namespaces
    known to exist."""

    def __init__(self, serde: SerializerProtocol, codec: Callable[[], Codec | None]) -> None:
        self.serde = serde
        self.codec = codec
        """The store's codec as it is now (a store's codec may be set after it is made)."""
        self._seen: OrderedDict[tuple[str, str, str], _Seen] = OrderedDict()
        self._lists: OrderedDict[tuple[str, str, str, str], list[Any]] = OrderedDict()
        self._threads: dict[str, float] = {}
        """Thread run -> when (monotonic) this saver last touched it."""
        self._namespaces: set[tuple[str, str]] = set()

    def _remember(self, cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _CACHED:
            cache.popitem(last=False)

    # -- put ----------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: LgCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Program:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        parent: str | None = conf.get("checkpoint_id")
        run = thread_run(thread_id)
        c: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = c.pop("channel_values")
        cid = str(c["id"])
        ckey = checkpoint_key(cid)
        seen = yield from self._parent(run, ns, parent)
        extended = set(seen.extended) - set(new_versions)
        writes: list[Append] = []
        lists: dict[tuple[str, str, str, str], list[Any]] = {}
        for channel, version in new_versions.items():
            writes += self._channel(
                run, ns, channel, version, values=values, seen=seen, extended=extended, lists=lists
            )
        md = get_serializable_checkpoint_metadata(config, metadata)
        meta = {"id": cid, "parent": parent, "x": sorted(extended), "t": ""}
        meta["t"], body = encode(
            self.serde, {"checkpoint": c, "metadata": md}, "the checkpoint", run
        )
        kind = checkpoints_kind(ns)
        *chunks, head = records(ckey, meta, body, codec=self.codec(), run_id=run, kind_=kind)
        # Everything is encoded: now the writes, the checkpoint's head last of all.
        if (run, ns) not in self._namespaces:
            yield Append(run, Item("=" + ns, {}), NAMESPACES, quiet=True)
        if time.monotonic() - self._threads.get(run, -TOUCH) >= TOUCH:
            yield Touch(run, thread_id)
        for write in writes:  # noqa: UP028 - each is sent its result: not a yield from
            yield write
        for chunk in chunks:
            yield Append(run, chunk, kind)
        try:
            yield Append(run, head, kind)
        except ConflictError as exc:
            raise ConflictError(
                f"checkpoint {cid!r} of thread {thread_id!r} (namespace {ns!r}) exists "
                "already: a checkpoint is written once, and another writer wrote this one "
                "first; nothing was overwritten. Run one graph invocation per thread at a "
                "time, and reload (get_state) before going on",
                run_id=run,
            ) from exc
        self._threads.setdefault(run, time.monotonic())
        self._namespaces.add((run, ns))
        self._remember(
            self._seen, (run, ns, cid), _Seen(dict(c["channel_versions"]), frozenset(extended))
        )
        for key, value in lists.items():
            self._remember(self._lists, key, value)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}

    def _channel(
        self,
        run: str,
        ns: str,
        channel: str,
        version: Any,
        *,
        values: dict[str, Any],
        seen: _Seen,
        extended: set[str],
        lists: dict[tuple[str, str, str, str], list[Any]],
    ) -> list[Append]:
        """The appends that store one channel's new version: the items appended to the
        list it was (an extension), or its whole value (or ``empty``)."""
        bkey = blob_key(channel, version)
        if channel not in values:  # emptied (a trigger consumed): a version with no value
            extended.discard(channel)
            return []
        value = values[channel]
        base = seen.versions.get(channel)
        earlier = self._lists.get((run, ns, channel, str(base))) if base is not None else None
        if type(value) is list:
            lists[(run, ns, channel, str(version))] = list(value)
        if (
            earlier is not None
            and type(value) is list
            and len(value) >= len(earlier)
            and all(a is b or a == b for a, b in zip(earlier, value, strict=False))
        ):
            meta = {"base": str(base), "bx": channel in seen.extended, "k": len(earlier), "t": ""}
            what = f"channel {channel!r}"
            meta["t"], body = encode(self.serde, value[len(earlier) :], what, run)
            extended.add(channel)
            kind = extensions_kind(ns, channel)
            sealed = records(str(version), meta, body, codec=self.codec(), run_id=run, kind_=kind)
            return [Append(run, r, kind, quiet=True) for r in sealed]
        extended.discard(channel)
        t, body = encode(self.serde, value, f"channel {channel!r}", run)
        kind = blobs_kind(ns)
        sealed = records(bkey, {"t": t}, body, codec=self.codec(), run_id=run, kind_=kind)
        return [Append(run, r, kind, quiet=True) for r in sealed]

    def _parent(self, run: str, ns: str, parent: str | None) -> Generator[Request, Any, _Seen]:
        if parent is None:
            return _Seen({}, frozenset())
        if (seen := self._seen.get((run, ns, parent))) is not None:
            return seen
        group = yield from self._group(run, ns, checkpoint_key(parent))
        if group is None:
            return _Seen({}, frozenset())
        cp, _ = self._checkpoint(run, ns, group)
        seen = _Seen(dict(cp["channel_versions"]), frozenset(group[0].value["x"]))
        self._remember(self._seen, (run, ns, parent), seen)
        return seen

    # -- put_writes ---------------------------------------------------------------------

    def put_writes(
        self, config: RunnableConfig, writes: Any, task_id: str, task_path: str
    ) -> Program:
        conf = config["configurable"]
        ns, cid = str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"])
        run = thread_run(conf["thread_id"])
        ckey = checkpoint_key(cid)
        kind = checkpoints_kind(ns)
        if not writes:
            return
        idx = [WRITES_IDX_MAP.get(channel, i) for i, (channel, _) in enumerate(writes)]
        # One record per call (a task's writes come in one): a call of special writes
        # only (an error, an interrupt) replaces the same one before; a task's ordinary
        # writes are kept as first written (a task run again writes the same).
        special = all(i < 0 for i in idx)
        key = f"{ckey}/{task_id}/" + ("s" + ",".join(map(str, idx)) if special else "w")
        pairs = [[c, i] for (c, _), i in zip(writes, idx, strict=True)]
        meta = {"task": task_id, "path": task_path, "w": pairs, "t": ""}
        what = f"a write of task {task_id!r} (channels {[c for c, _ in writes]})"
        meta["t"], body = encode(self.serde, [v for _, v in writes], what, run)
        *chunks, head = records(key, meta, body, codec=self.codec(), run_id=run, kind_=kind)
        for chunk in chunks:
            yield Append(run, chunk, kind)
        yield Put(run, head, kind) if special else Append(run, head, kind, quiet=True)

    # -- get_tuple and list -------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> Generator[Request, Any, CheckpointTuple | None]:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        run = thread_run(thread_id)
        cid = get_checkpoint_id(config)
        group = yield from self._group(run, ns, checkpoint_key(cid) if cid else None)
        if group is None:
            return None
        return (yield from self._tuple(run, thread_id, ns, group))

    def listing(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before_config: RunnableConfig | None,
        limit: int | None,
    ) -> Generator[Request, Any, list[CheckpointTuple]]:
        if config is None:
            threads: list[str] = yield ListThreads()
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
                namespaces = [i.key[1:] for i in (yield Read(run, NAMESPACES))]
            for ns in namespaces:
                after = checkpoint_key(cursor) if cursor else None
                if only:
                    after = before(checkpoint_key(only))
                for group in (yield from self._groups(run, ns, after)):
                    if only and group[0].key != checkpoint_key(only):
                        break
                    if limit is not None and len(found) >= limit:
                        return found
                    cp, md = self._checkpoint(run, ns, group)
                    if filter and not all(md.get(k) == v for k, v in filter.items()):
                        continue
                    found.append((yield from self._tuple(run, thread_id, ns, group, (cp, md))))
                    if only:
                        break
        return found

    def _groups(
        self, run: str, ns: str, after: str | None
    ) -> Generator[Request, Any, Iterator[list[Item]]]:
        items: list[Item] = yield Read(run, checkpoints_kind(ns), after)
        groups: list[list[Item]] = []
        for item in items:
            key = _GROUP.split(item.key, maxsplit=1)[0]
            if not groups or groups[-1][0].key != key:
                if item.key != key:  # the rest of a checkpoint whose head is not there
                    continue
                groups.append([])
            groups[-1].append(item)
        return iter(groups)

    def _group(
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
        group = [page[0], *(i for i in page[1:] if _under(i.key, head))]
        while len(page) == PAGE and _under(page[-1].key, head):
            page = yield Read(run, kind, page[-1].key, PAGE)
            group += [i for i in page if _under(i.key, head)]
        return group

    def _checkpoint(self, run: str, ns: str, group: list[Item]) -> tuple[Any, Any]:
        """A checkpoint's record decoded: (the checkpoint without its values, its metadata)."""
        by_key = {i.key: i.value for i in group}
        text = payload(group[0], by_key, run, codec=self.codec(), kind_=checkpoints_kind(ns))
        record = decode(self.serde, group[0].value["t"], text, run)
        return record["checkpoint"], record["metadata"]

    def _tuple(
        self,
        run: str,
        thread_id: str,
        ns: str,
        group: list[Item],
        decoded: tuple[Any, Any] | None = None,
    ) -> Generator[Request, Any, CheckpointTuple]:
        head = group[0]
        cp, md = decoded or self._checkpoint(run, ns, group)
        checkpoint = dict(cp)
        versions = checkpoint["channel_versions"]
        extended = set(head.value.get("x", ()))
        values: dict[str, Any] = {}
        for channel, version in versions.items():
            if channel in extended:
                values[channel] = yield from self._extended(run, ns, channel, str(version))
                continue
            found, value = yield from self._whole(run, ns, channel, version)
            if found:
                values[channel] = value
        checkpoint["channel_values"] = values
        cid = checkpoint_id_of(head.key)
        self._remember(self._seen, (run, ns, cid), _Seen(dict(versions), frozenset(extended)))
        by_key = {i.key: i.value for i in group}
        writes = []
        for item in group[1:]:
            if "/" in item.key and "#" not in item.key and "n" in item.value:
                v = item.value
                text = payload(item, by_key, run, codec=self.codec(), kind_=checkpoints_kind(ns))
                values = decode(self.serde, v["t"], text, run)
                for (channel, i), value in zip(v["w"], values, strict=True):
                    key = writes_sort_key(v["path"], v["task"], i)
                    writes.append((key, (v["task"], channel, value)))
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

    def _whole(
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
            self._remember(self._lists, (run, ns, channel, str(version)), list(value))
        return True, value

    def _extended(
        self, run: str, ns: str, channel: str, version: str
    ) -> Generator[Request, Any, Any]:
        """A list stored as extensions: every extension of the channel in one read (their
        sum is about the list's size), then the chain from ``version`` back to its base."""
        xkind = extensions_kind(ns, channel)
        items: list[Item] = yield Read(run, xkind)
        by_key = {i.key: i.value for i in items}
        heads = {i.key: i for i in items if "n" in i.value}
        chain: list[Item] = []
        at: str | None = version
        start: list[Any] = []
        while at is not None:
            head = heads.get(at)
            if head is None:
                raise CorruptCheckpointError(
                    f"thread run {run!r}: version {at!r} of channel {channel!r} is missing; "
                    "the thread's items were changed outside DurableSaver",
                    run_id=run,
                )
            chain.append(head)
            base, in_x = head.value.get("base"), head.value.get("bx")
            if base is None or in_x:
                at = base
                continue
            found, value = yield from self._whole(run, ns, channel, base)
            start = list(value) if found else []
            at = None
        value = start
        for head in reversed(chain):
            if len(value) != head.value["k"]:
                raise CorruptCheckpointError(
                    f"thread run {run!r}: channel {channel!r} at version {head.key!r} extends "
                    f"a list of {head.value['k']} items, and {len(value)} were found",
                    run_id=run,
                )
            text = payload(
                head, by_key, run, codec=self.codec(), kind_=extensions_kind(ns, channel)
            )
            value = value + decode(self.serde, head.value["t"], text, run)
            self._remember(self._lists, (run, ns, channel, head.key), list(value))
        return value

    # -- delete --------------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> Program:
        run = thread_run(thread_id)
        yield DeleteRun(run)
        self._threads.pop(run, None)
        self._namespaces = {k for k in self._namespaces if k[0] != run}
        for key in [k for k in self._seen if k[0] == run]:
            del self._seen[key]
        for lkey in [k for k in self._lists if k[0] == run]:
            del self._lists[lkey]


def _under(key: str, head: str) -> bool:
    """Whether ``key`` is a chunk or a write of the checkpoint whose key is ``head``."""
    return key.startswith(head) and key[len(head) : len(head) + 1] in ("/", "#")


def writes_sort_key(task_path: str, task_id: str, idx: int) -> tuple[str, str, int]:
    """The order LangGraph applies a superstep's writes in (``writes_sort_key`` of
    langgraph-checkpoint 4.3; written here for the releases before it)."""
    return (task_path, task_id, idx)
