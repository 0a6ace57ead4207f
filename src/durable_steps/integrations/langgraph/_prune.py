"""Removing some or all of a thread's checkpoints, as programs of store requests:
``delete_thread`` (the thread's run, with everything), ``prune`` (keep each namespace's
latest checkpoint, or nothing) and ``delete_for_runs`` (the checkpoints whose metadata
names one of the given LangGraph run ids, in every thread).

A checkpoint goes with its record's items: its head, chunks and pending writes
(``Store.delete_items``). A checkpoint that stays may need what goes -- a list channel
defined by a reference to a removed checkpoint's writes, or by a removed record's
reference -- so before anything is removed, each such list is written whole under
its version, and the staying checkpoint's record is rewritten to read it whole (only
its clear fields: which channels are extended; the sealed payload is kept as it is).
A small value kept in a removed checkpoint's record (``INLINE``) is written whole
the same way. Order: whole values, rewritten records, then the removals; a crash in between leaves
every staying checkpoint readable. Channel values no staying checkpoint names are
left in place (they go with the thread): removing them would need a walk of every
checkpoint's versions, and they cost storage only.

Not for a thread a graph is writing meanwhile: a saver of another process may still
take a pruned checkpoint's list as the base of its next one.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from ...backend import Item
from ._layout import blob_key, blobs_kind, checkpoints_kind, encode, records, thread_run
from ._reads import groups
from ._requests import Append, DeleteRun, Program, Put, Read, Remove, Request, append
from ._writes import Writes


class Removals(Writes):
    """``delete_thread``, ``prune`` and ``delete_for_runs``."""

    def delete_thread(self, thread_id: str) -> Program:
        run = thread_run(thread_id)
        yield DeleteRun(run)
        self.memory.forget(run)

    def prune(self, thread_ids: Sequence[str], strategy: str) -> Program:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(
                f"prune strategy {strategy!r}: DurableSaver knows 'keep_latest' (each "
                "namespace's latest checkpoint stays) and 'delete' (the thread goes)"
            )
        for thread_id in thread_ids:
            if strategy == "delete":
                yield from self.delete_thread(str(thread_id))
                continue
            run = thread_run(str(thread_id))
            for ns in (yield from self.namespaces(run)):
                yield from self._remove(run, ns, lambda i, head, md: i > 0)

    def delete_for_runs(self, run_ids: Sequence[str]) -> Program:
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        for thread_id in (yield from self.threads()):
            run = thread_run(thread_id)
            for ns in (yield from self.namespaces(run)):
                yield from self._remove(
                    run, ns, lambda i, head, md: str(md.get("run_id")) in wanted
                )

    def _remove(self, run: str, ns: str, goes: Any) -> Generator[Request, Any, None]:
        """Remove the checkpoints of a namespace that ``goes(i, head, metadata)`` (``i``:
        its place, newest first), keeping the others readable (see the top)."""
        kind = checkpoints_kind(ns)
        items: list[Item] = yield Read(run, kind)
        gone: list[list[Item]] = []
        staying: list[list[Item]] = []
        for i, group in enumerate(groups(items)):
            _, md = self.checkpoint(run, ns, group)
            (gone if goes(i, group[0], md) else staying).append(group)
        if not gone:
            return
        removed = {g[0].key for g in gone}
        for group in staying:
            yield from self._keep_readable(run, ns, group, removed)
        self.memory.forget(run)
        keys = tuple(i.key for g in gone for i in g)
        yield Remove(run, kind, keys)

    def _keep_readable(
        self, run: str, ns: str, group: list[Item], removed: set[str]
    ) -> Generator[Request, Any, None]:
        """Each extended list of a staying checkpoint that depends on a removed one:
        written whole under its version, and the checkpoint's record rewritten to read it
        whole."""
        head = group[0]
        cp, _ = self.checkpoint(run, ns, group)
        versions = cp["channel_versions"]
        whole: list[str] = []
        for channel in head.value.get("x", ()):
            uses: set[str] = set()
            value = yield from self.extended(run, ns, channel, str(versions[channel]), uses)
            if not uses & removed:
                continue
            yield from self._write_whole(run, ns, channel, versions[channel], value)
            whole.append(channel)
        at = dict(head.value.get("at", {}))
        for channel, key in list(at.items()):
            if key not in removed:
                continue
            found, value = yield from self.inline(run, ns, group, cp, key, channel)
            if found:
                yield from self._write_whole(run, ns, channel, versions[channel], value)
            del at[channel]
        if not whole and at == head.value.get("at", {}):
            return
        meta = dict(head.value)
        meta["x"] = [c for c in meta.get("x", ()) if c not in whole]
        refs = {c: d for c, d in meta.pop("xs", {}).items() if c not in whole}
        if refs:
            meta["xs"] = refs
        meta.pop("at", None)
        if at:
            meta["at"] = at
        yield Put(run, Item(head.key, meta), checkpoints_kind(ns))

    def _write_whole(
        self, run: str, ns: str, channel: str, version: Any, value: Any
    ) -> Generator[Request, Any, None]:
        t, body = encode(self.serde, value, f"channel {channel!r}", run)
        key, kind = blob_key(channel, version), blobs_kind(ns)
        for record in records(key, {"t": t}, body, codec=self.codec(), run_id=run, kind_=kind):
            yield from append(Append(run, record, kind, quiet=True))
