"""Segments that no head reaches (orphans), on the real SDK against cosmos-local through
the test proxy: a save avoids making them where it can know beforehand -- a create of
a run that exists writes nothing, a save whose head lost to another writer deletes its
own segments, ``migrate`` reads the target before writing -- and ``runs prune`` removes
those that are left once they are old enough (``removal``), whatever their fold number
(a stale writer's fold is numbered after the head's) or their place in the head's own
generation (a stale writer's delta)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.stores.cosmos import saves

from ...conftest import Cosmos, SyncFacade
from ...helpers.clitools import Cli
from ...helpers.proxy import Proxy, in_front_of
from .test_cosmos_layout import KB5, grow, items_of, segmented, split

BIG = {"big": "b" * 20_000}
"""Past the 4 KiB a head holds inline: a create writes a snapshot segment first."""


def another(through: tuple[Any, Proxy, Cosmos], loop: asyncio.AbstractEventLoop) -> Any:
    """A second store of the kind under test (sync, or async behind the facade) through
    the proxy, which knows no run: each of its saves is a fold."""
    store, proxy, direct = through
    endpoint = replace(direct, endpoint=proxy.endpoint)
    if isinstance(store, SyncFacade):
        return SyncFacade(endpoint.async_store(), loop)
    return endpoint.store()


def stale_saves(store: Any, direct: Cosmos, run_id: str) -> tuple[ds.Checkpoint, ds.Checkpoint]:
    """A run that ``store`` knows at version 1 and another writer saved on from (a delta,
    version 2); and the checkpoint version 2 is."""
    v1 = segmented(store, run_id, saves=2)
    with direct.store() as other:
        seen = other.load(run_id)
        assert seen is not None
        v2 = grow(other, seen, winner=KB5)
    return v1, v2


def test_a_create_of_a_run_that_exists_writes_nothing(
    through: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """A save with etag=None whose data needs segments reads the head first: the run
    exists, so it is a ConflictError that says nothing was written -- and nothing was
    (a create that wrote its snapshot, then lost, left it there for good)."""
    store, proxy, direct = through
    store.save(ds.Checkpoint(run_id, -1, {"small": 1}))
    before = items_of(direct, run_id)
    proxy.clear()
    with pytest.raises(ds.ConflictError, match=r"already has a checkpoint\. Nothing was written"):
        store.save(ds.Checkpoint(run_id, -1, BIG))
    assert [e.method for e in proxy.store_calls()] == ["GET"]
    assert items_of(direct, run_id) == before


def test_a_save_whose_head_lost_deletes_its_own_segments(
    through: tuple[Any, Proxy, Cosmos], run_id: str, loop: asyncio.AbstractEventLoop
) -> None:
    """A stale writer's delta and its fold: the head's write loses to the other writer's
    (412, read back: not this save's), so the segments this save wrote can never be
    reached; it deletes them before it raises ConflictError."""
    store, _, direct = through
    folder = another(through, loop)
    try:
        for kind in ("delta", "fold"):
            rid = f"{run_id}-{kind}"
            v1, v2 = stale_saves(store, direct, rid)
            before = sorted(i["id"] for i in items_of(direct, rid))
            saver, state = (store, v1.state) if kind == "delta" else (folder, dict(v1.state))
            with pytest.raises(ds.ConflictError):
                grow(saver, replace(v1, state=state), loser=KB5)
            assert sorted(i["id"] for i in items_of(direct, rid)) == before
            loaded = store.load(rid)
            assert loaded is not None and loaded.etag == v2.etag and loaded.state == v2.state
    finally:
        folder.close()


def test_prune_removes_old_orphans_that_no_head_reaches(
    through: tuple[Any, Proxy, Cosmos], run_id: str, loop: asyncio.AbstractEventLoop
) -> None:
    """The segments of a stale writer's fold (a generation numbered after the head's)
    and of its delta (the head's generation, off its chain), left behind when the
    writer could not delete them: prune keeps them while they are young (a save may
    still be committing them), removes them once old enough, and the run loads as it
    was. Before, a fold numbered after the head's was kept forever as "in flight"."""
    store, proxy, direct = through
    folder = another(through, loop)
    try:
        v1, v2 = stale_saves(store, direct, run_id)
        proxy.drop_request("DELETE", times=None)  # the losing saves' cleanup never arrives
        with pytest.raises(ds.ConflictError):
            grow(store, v1, loser=KB5)  # a delta: the head's generation
        with pytest.raises(ds.ConflictError):
            grow(folder, replace(v1, state=dict(v1.state)), loser=KB5)  # a fold, a later one
        proxy.heal()
    finally:
        folder.close()
    head, segs = split(direct, run_id)
    stray = [s for s in segs if s["gen"] != head["gen"] or "loser" in str(s.get("change"))]
    assert len(stray) == 2 and any(s["fold"] > head["fold"] for s in stray), stray
    with direct.store() as sweeper:
        assert sweeper.prune_orphans() == 0  # younger than an hour: may be a save's
        assert sweeper.prune_orphans(older_than=-60) == 2
        after = {s["id"] for s in split(direct, run_id)[1]}
        assert after == {s["id"] for s in segs} - {s["id"] for s in stray}
        loaded = sweeper.load(run_id)
    assert loaded is not None and loaded.etag == v2.etag and loaded.state == v2.state


def test_a_save_slower_than_a_save_may_be_commits_nothing(
    through: tuple[Any, Proxy, Cosmos], run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save whose segments took longer to write than SAVE_LIMIT does not write its
    head (prune may take such segments for a failed save's): StoreError, nothing saved,
    the run loads at the save before."""
    store, _, _ = through
    v1 = segmented(store, run_id, saves=1)
    monkeypatch.setattr(saves, "SAVE_LIMIT", -1.0)  # every save is too slow
    with pytest.raises(ds.StoreError, match=r"took over -1 s.*Nothing was saved") as err:
        grow(store, v1, late=KB5)
    assert not isinstance(err.value, ds.ConflictError)
    monkeypatch.undo()
    loaded = store.load(run_id)
    assert loaded is not None and loaded.etag == v1.etag and "late" not in loaded.state


def test_migrate_onto_a_run_already_there_writes_nothing_to_it(
    cosmos_local: Cosmos, run_id: str
) -> None:
    """`durable-steps migrate` reads a run in the target before it writes: a run already
    there (the same, or another checkpoint) is reported and sent no write at all."""
    with in_front_of(cosmos_local) as (target, proxy):
        source = cosmos_local.fresh()
        try:
            with source.store() as src, target.store() as dst:
                for rid, mine, theirs in (
                    (f"{run_id}-same", BIG, BIG),
                    (f"{run_id}-other", {"n": 2}, {"n": 1}),  # (inline: a create is one write)
                ):
                    src.save(ds.Checkpoint(rid, -1, mine))
                    dst.save(ds.Checkpoint(rid, -1, theirs))
            proxy.clear()
            done = Cli(target.env())(
                "migrate", "--from", f"cosmos:{source.container}", "--to", "env", "--json"
            )
            assert done.returncode == 1, done.stderr  # (a conflict is reported as a failure)
            moved = json.loads(done.stdout)
            assert moved["identical"] == [f"{run_id}-same"]
            assert moved["conflicts"] == [f"{run_id}-other"]
            writes = [e for e in proxy.store_calls() if e.method in ("POST", "PUT", "PATCH")]
            assert [e for e in writes if f"/colls/{target.container}/" in e.path] == []
        finally:
            source.drop()
