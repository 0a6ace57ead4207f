"""The saver's writes, as programs of store requests (``_requests``): a checkpoint
(``put``) and a task's writes (``put_writes``); the package's top tells the design.

A superstep costs what it changed, once: a task's write is stored as it comes (its
``put_writes``), and the next checkpoint's list channels that grew by exactly those
writes (``operator.add``, ``add_messages``: the new items are what the tasks returned)
are stored as a reference to them in the checkpoint's own record (``xs``: the base
version, its length, the writes' keys and places), not as the items again. Compared
as the serializer writes them, so a value changed after it was written (a reducer that
gives a message its id) is stored as an extension of its own. Other channels that
changed: their new value, or the items appended to a list, in records of their own.
So a superstep that appends a task's message to a conversation is two appends -- the
write, then the checkpoint -- whatever the conversation's length.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.base import Checkpoint as LgCheckpoint

from ... import ConflictError
from ...backend import Checkpoint, Item, evolve
from ._layout import (
    NAMESPACES,
    WORKFLOW,
    blob_key,
    blobs_kind,
    checkpoint_key,
    checkpoints_kind,
    encode,
    extensions_kind,
    records,
    thread_run,
)
from ._memory import Seen, Written
from ._reads import Reads, writes_sort_key
from ._requests import Append, LoadHead, Program, Put, Request, SaveHead, SaveRun, Wait, append

INLINE = 512
"""A changed channel's value up to this size (encoded) is kept in the checkpoint's own
record (a trigger, a counter, a short string): a superstep is then the tasks' writes
and the checkpoint, one append each. Lists are not (a later version may extend them)."""
TOUCH = 600.0
"""Seconds between two moves of a thread's time by one saver: a thread expires (the
store's ``finished_ttl``) that long after its last checkpoint, to within this."""


class Writes(Reads):
    """The write programs (a put reads its parent checkpoint when it does not know it)."""

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
        tasks = self.memory.writes.get((run, ns, parent or ""), [])
        writes: list[Append] = []
        refs: dict[str, tuple[dict[str, Any], list[Written], list[Any]]] = {}
        lists: dict[tuple[str, str, str, str], list[Any]] = {}
        inline: dict[str, Any] = {}
        for channel, version in new_versions.items():
            writes += self._channel(
                run, ns, channel, version, values=values, seen=seen, extended=extended,
                lists=lists, tasks=tasks, refs=refs, inline=inline,
            )  # fmt: skip
        at = {ch: k for ch, k in seen.inline.items() if ch not in new_versions}
        at.update(dict.fromkeys(inline, ckey))
        c["channel_values"] = inline
        md = get_serializable_checkpoint_metadata(config, metadata)
        meta: dict[str, Any] = {"id": cid, "parent": parent, "x": sorted(extended), "t": ""}
        if at:
            meta["at"] = at
        meta["t"], body = encode(
            self.serde, {"checkpoint": c, "metadata": md}, "the checkpoint", run
        )
        kind = checkpoints_kind(ns)
        # Everything is encoded: now the writes, the checkpoint's head last of all.
        if (run, ns) not in self.memory.namespaces:
            yield from append(Append(run, Item("=" + ns, {}), NAMESPACES, quiet=True))
        if time.monotonic() - self.memory.threads.get(run, -TOUCH) >= TOUCH:
            yield from self.touch(run, thread_id)
        for write in writes:
            yield from append(write)
        if refs:  # the writes referred to are stored before the checkpoint that says so
            yield Wait(tuple({id(w): w.stored for _, u, _ in refs.values() for w in u}.values()))
            meta["xs"] = {}
            for channel, (ref, used, added) in refs.items():
                if all(w.ok for w in used):
                    meta["xs"][channel] = ref
                    continue
                extension = {k: ref[k] for k in ("base", "bx", "k")}
                for write in self._extension(run, ns, channel, ref["v"], extension, added):
                    yield from append(write)
        *chunks, head = records(ckey, meta, body, codec=self.codec(), run_id=run, kind_=kind)
        for chunk in chunks:
            yield from append(Append(run, chunk, kind))
        try:
            yield from append(Append(run, head, kind))
        except ConflictError as exc:
            raise ConflictError(
                f"checkpoint {cid!r} of thread {thread_id!r} (namespace {ns!r}) exists "
                "already: a checkpoint is written once, and another writer wrote this one "
                "first; nothing was overwritten. Run one graph invocation per thread at a "
                "time, and reload (get_state) before going on",
                run_id=run,
            ) from exc
        self.memory.threads.setdefault(run, time.monotonic())
        self.memory.namespaces.add((run, ns))
        self.memory.remember(
            self.memory.seen,
            (run, ns, cid),
            Seen(dict(c["channel_versions"]), frozenset(extended), at),
        )
        for key, value in lists.items():
            self.memory.remember(self.memory.lists, key, value)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}

    def _channel(
        self,
        run: str,
        ns: str,
        channel: str,
        version: Any,
        *,
        values: dict[str, Any],
        seen: Seen,
        extended: set[str],
        lists: dict[tuple[str, str, str, str], list[Any]],
        tasks: list[Written],
        refs: dict[str, tuple[dict[str, Any], list[Written], list[Any]]],
        inline: dict[str, Any],
    ) -> list[Append]:
        """The appends that store one channel's new version: none when it is a list that
        grew by the tasks' writes (``refs`` gets the reference), the items appended to
        the list it was (an extension), or its whole value."""
        if channel not in values:  # emptied (a trigger consumed): a version with no value
            extended.discard(channel)
            return []
        value = values[channel]
        base = seen.versions.get(channel)
        earlier = self.memory.lists.get((run, ns, channel, str(base))) if base is not None else None
        if type(value) is list:
            lists[(run, ns, channel, str(version))] = list(value)
        if (
            earlier is not None
            and type(value) is list
            and len(value) >= len(earlier)
            and all(a is b or a == b for a, b in zip(earlier, value, strict=False))
        ):
            added = value[len(earlier) :]
            meta = {"base": str(base), "bx": channel in seen.extended, "k": len(earlier)}
            extended.add(channel)
            if (used := self._written(added, channel, tasks)) is not None:
                found = [[w.key, w.place] for w in used]
                refs[channel] = ({"v": str(version), **meta, "w": found}, used, added)
                return []
            return self._extension(run, ns, channel, str(version), meta, added)
        extended.discard(channel)
        t, body = encode(self.serde, value, f"channel {channel!r}", run)
        if len(body) <= INLINE and type(value) is not list:  # a list may be extended later
            inline[channel] = value
            return []
        kind = blobs_kind(ns)
        key = blob_key(channel, version)
        sealed = records(key, {"t": t}, body, codec=self.codec(), run_id=run, kind_=kind)
        return [Append(run, r, kind, quiet=True) for r in sealed]

    def _extension(  # noqa: PLR0917 - where, and what
        self, run: str, ns: str, channel: str, version: str, meta: dict[str, Any], added: Any
    ) -> list[Append]:
        """The records of the items ``added`` to a list at ``version`` (``meta``: the
        version it extends, whether that is an extension too, its length)."""
        meta = {**meta, "t": ""}
        meta["t"], body = encode(self.serde, added, f"channel {channel!r}", run)
        kind = extensions_kind(ns, channel)
        sealed = records(version, meta, body, codec=self.codec(), run_id=run, kind_=kind)
        return [Append(run, r, kind, quiet=True) for r in sealed]

    def _written(
        self, added: list[Any], channel: str, tasks: list[Written]
    ) -> list[Written] | None:
        """The writes to ``channel`` that ``added`` is, in the order LangGraph applied
        them, or None when it is not exactly them as stored."""
        mine = sorted((w for w in tasks if w.channel == channel), key=lambda w: w.order)
        if not mine or sum(w.size for w in mine) != len(added):
            return None
        at = 0
        for w in mine:
            part = added[at : at + w.size]
            at += w.size
            try:
                if self.serde.dumps_typed(part) != w.typed:
                    return None
            except Exception:  # not encodable as a list: stored on its own, and refused there
                return None
        return mine

    def _parent(self, run: str, ns: str, parent: str | None) -> Generator[Request, Any, Seen]:
        if parent is None:
            return Seen({}, frozenset(), {})
        if (seen := self.memory.seen.get((run, ns, parent))) is not None:
            return seen
        group = yield from self.group(run, ns, checkpoint_key(parent))
        if group is None:
            return Seen({}, frozenset(), {})
        cp, _ = self.checkpoint(run, ns, group)
        seen = Seen(
            dict(cp["channel_versions"]),
            frozenset(group[0].value["x"]),
            dict(group[0].value.get("at", {})),
        )
        self.memory.remember(self.memory.seen, (run, ns, parent), seen)
        return seen

    def touch(self, run: str, thread_id: str) -> Program:
        """The thread's run (its head: what listing, deleting and ``finished_ttl`` see):
        created when missing; its time moved to now when older than ``TOUCH``. Another
        writer's write there meanwhile is as good."""
        with contextlib.suppress(ConflictError):
            head = yield LoadHead(run)
            if head is None:
                yield SaveRun(
                    Checkpoint(
                        run_id=run,
                        step=-1,
                        state={"thread_id": thread_id},
                        status="completed",
                        workflow=WORKFLOW,
                    )
                )
            elif head.updated_at is None or time.time() - head.updated_at >= TOUCH:
                yield SaveHead(evolve(head, updated_at=None))

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
        if special:
            for chunk in chunks:
                yield from append(Append(run, chunk, kind))
            yield Put(run, head, kind)
            return
        # Known before it is stored, so that a put running meanwhile (LangGraph sends a
        # task's writes and the next checkpoint at once) can refer to it: it waits.
        known = self.memory.writes.get((run, ns, cid), [])
        mine = []
        for place, ((channel, value), i) in enumerate(zip(writes, idx, strict=True)):
            as_list = value if type(value) is list else [value]
            with contextlib.suppress(Exception):  # encoded just now: it does not fail
                typed = self.serde.dumps_typed(as_list)
                order = writes_sort_key(task_path, task_id, i)
                mine.append(Written(order, channel, key, place, len(as_list), typed))
        known += mine
        self.memory.remember(self.memory.writes, (run, ns, cid), known)
        try:
            for chunk in chunks:
                yield from append(Append(run, chunk, kind))
            # A record there already (a task run again) may not be this one: not referred to.
            ok = yield from append(Append(run, head, kind, quiet=True))
            for w in mine:
                w.ok = ok
        finally:
            for w in mine:
                w.stored.set()
