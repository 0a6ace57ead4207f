"""A save of the /run layout broken at every request, on the real SDK against
cosmos-local through the test proxy: each request of a delta save (segment, head), of
a delta larger than an item (its two items, head) and of a fold (snapshot, head, the
query of superseded segments, their deletes) is lost
before it reaches the server, or its answer is lost after it landed, or it is answered
429, 503 or 500 after it landed. Whatever happens, a load gives the last acknowledged
save or the one in flight, whole (compared exactly), never a mix; the save's error, if
any, tells the truth (read-back settlement); saving on from the loaded checkpoint
works; and the orphans a fault leaves are removed by the next fold."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds

from ...conftest import Cosmos
from ...helpers.proxy import Proxy
from .test_cosmos_layout import KB5, grow, segmented, split

# aiohttp (under the async SDK) warns about request bodies over 1 MiB sent as raw bytes.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Sending a large body directly with raw bytes:ResourceWarning"
)
FAULTS = {
    "request lost": ("lose", 0),
    "answer lost": ("drop", 0),
    "429 after it landed": ("after", 429),
    "503 after it landed": ("after", 503),
    "500 after it landed": ("after", 500),
}
REQUESTS = {"delta": 2, "chunked": 3, "fold": 6}
"""Requests of the save under test: a segment and the head; a change larger than an
item, in two items, and the head; or a snapshot, the head, the query of superseded
segments and their three deletes."""
LARGE = "L" * 2_200_000
"""A change larger than one item (2 MB): a segment of two items."""
NOTHING = "Nothing was saved"
"""A segment failed: the head, which commits a save, was never sent."""
UNSURE = ("has not landed yet", "outcome is unknown")
"""The head was sent and not confirmed: it has not landed yet (but may still: the test
proxy lost it for good, which the store cannot know), or the read-back failed too."""


def the_save(
    kind: str, store: Any, direct: Cosmos, run_id: str
) -> tuple[ds.Checkpoint, ds.Checkpoint]:
    """The last acknowledged checkpoint of a run with a snapshot and two deltas, and the
    checkpoint the save under test writes: one more 5 KB key (a delta, on a store that
    knows the run), a 2.2 MB one (a delta of two items), or a 5 KB key through a store
    that does not know the run (a fold)."""
    if kind != "fold":
        base = segmented(store, run_id, saves=3)
        new = KB5 if kind == "delta" else LARGE
        state = base.state.updated({"new": new}, run_id)  # type: ignore[attr-defined]
    else:
        with direct.store() as other:
            base = segmented(other, run_id, saves=3)
        state = {**base.state, "new": KB5}
    target = replace(base, step=base.step + 1, steps=(*base.steps, "new"), state=state)
    return base, replace(target, updated_at=None)


def settle(store: Any, proxy: Proxy, target: ds.Checkpoint) -> tuple[ds.Checkpoint | None, str]:
    try:
        return store.save(target), ""
    except ds.ConflictError as exc:
        pytest.fail(f"a save with no other writer met a conflict: {exc}")
    except ds.StoreError as exc:
        return None, str(exc)
    finally:
        proxy.heal()


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (fault, kind)
        for kind in REQUESTS
        for fault in FAULTS
        # a large delta's items meet the faults of any item: lost, or landed unanswered
        if kind != "chunked" or fault in ("request lost", "answer lost", "503 after it landed")
    ],
)
def test_a_save_broken_at_any_request_leaves_one_whole_checkpoint(
    through: tuple[Any, Proxy, Cosmos], run_id: str, kind: str, fault: str
) -> None:
    """For each request of the save in turn (and none): the load gives the save in
    flight if it returned, the one before if its error says nothing was saved, either
    if the outcome is unknown -- exactly, never a mix; saving on from it works."""
    store, proxy, direct = through
    action, status = FAULTS[fault]
    fired = 0
    for k in range(REQUESTS[kind] + 1):
        rid = f"{run_id}-{k}"
        base, target = the_save(kind, store, direct, rid)
        proxy.clear()
        happened = proxy.arm(k, action, status=status)
        saved, error = settle(store, proxy, target)
        fired += happened.is_set()
        with direct.store() as reader:
            loaded = reader.load(rid)
            assert loaded is not None
            if saved is not None:
                assert (loaded.state, loaded.etag) == (target.state, saved.etag), (k, fault)
            elif NOTHING in error:
                assert (loaded.state, loaded.etag) == (base.state, base.etag), (k, error)
            else:
                assert any(words in error for words in UNSURE), (k, error)
                assert loaded.state in (base.state, target.state)
            assert loaded.steps[-1] == ("new" if loaded.state == target.state else "s2")
            after = reader.save(replace(loaded, state={**loaded.state, "on": 1}, updated_at=None))
            again = reader.load(rid)
            assert again is not None and again.etag == after.etag
            assert again.state == {**loaded.state, "on": 1}
    assert fired >= REQUESTS[kind], f"the fault fired {fired} times"


@pytest.mark.parametrize("kind", REQUESTS)
def test_orphans_left_by_failed_saves_go_with_the_next_fold(
    through: tuple[Any, Proxy, Cosmos], run_id: str, kind: str
) -> None:
    """A save whose segment landed but whose head never did leaves an orphan; the run
    loads without it, and the next fold removes it with everything it superseded."""
    store, proxy, direct = through
    base, target = the_save(kind, store, direct, run_id)
    proxy.clear()
    proxy.drop_request("PUT", "/docs/", times=None)  # the head never arrives, nor a retry
    saved, error = settle(store, proxy, target)
    assert saved is None and UNSURE[0] in error, error
    upstream = replace(direct, endpoint=proxy.upstream_url)
    head, segments = split(upstream, run_id)
    assert head["_etag"] == base.etag
    stray = [s for s in segments if s["gen"] != head["gen"] or s["seq"] > head["seq"]]
    assert stray, "the failed save left no segment"
    with direct.store() as other:  # a store that does not know the version: it folds
        loaded = other.load(run_id)
        assert loaded is not None and loaded.state == base.state
    with direct.store() as other:
        other.save(replace(loaded, state={**loaded.state, "x": 1}, updated_at=None))
    head, segments = split(upstream, run_id)
    assert [s["seq"] for s in segments] == [0] and segments[0]["gen"] == head["gen"]
    with direct.store() as reader:
        assert reader.load(run_id).state == {**base.state, "x": 1}  # type: ignore[union-attr]


def test_a_delta_save_after_a_failed_one_does_not_pick_up_its_orphan(
    through: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """A delta whose head was lost shares its number with the next save's delta: the
    chain (each segment names the one before) keeps the orphan out of every load."""
    store, proxy, direct = through
    base, target = the_save("delta", store, direct, run_id)
    proxy.clear()
    proxy.drop_request("PUT", "/docs/", times=None)
    assert settle(store, proxy, target)[0] is None
    cp = grow(store, base, other=KB5)
    with direct.store() as reader:
        loaded = reader.load(run_id)
    assert loaded is not None and loaded.etag == cp.etag
    assert loaded.state == {**base.state, "other": KB5} and "new" not in loaded.state
    head, segments = split(replace(direct, endpoint=proxy.upstream_url), run_id)
    assert sorted(s["seq"] for s in segments).count(head["seq"]) == 2
