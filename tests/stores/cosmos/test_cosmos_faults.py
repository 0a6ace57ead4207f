"""A save whose answer never arrives is settled by reading the run back, on the real SDK
against cosmos-local through a loopback proxy that breaks the connection on purpose.

The sync SDK raises a transport error when the connection drops after a write went
out; the async SDK retries the write, and the retry meets the first one (412 for a
replace, 409 for a create). Either way the write may have landed, so the store reads
the run back and looks for its save's nonce. A save that has not landed yet is sent
again, conditional on the same version: landing, it fences out the first, which the
network may still deliver (a proxy that delays a request past the client's timeout
shows it). It never says "nothing was written" -- of a write that landed, or of one
that may still land -- and never reports success for one that did not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds

from ...conftest import Cosmos, SyncFacade
from ...helpers.proxy import Proxy
from ...helpers.waiting import wait_until

WRITES = {"create": "POST", "replace": "PUT"}


def _first(store: Any, write: str, run_id: str) -> tuple[ds.Checkpoint, ds.Checkpoint]:
    """The checkpoint the save under test starts from (saved first for a replace), and
    the one it writes."""
    fresh = ds.Checkpoint(run_id, -1, {"v": 0})
    if write == "create":
        return fresh, fresh
    base = store.save(fresh)
    return base, replace(base, step=0, steps=("a",), state={"v": 1}, updated_at=None)


@pytest.mark.parametrize("write", WRITES)
def test_a_write_that_landed_is_a_success_though_its_answer_was_lost(
    through: tuple[Any, Proxy, Cosmos], write: str, run_id: str
) -> None:
    """The connection drops after a create or replace reached Cosmos DB: the save reads
    the run back, finds its own write, and returns it with the stored etag."""
    store, proxy, _ = through
    _, target = _first(store, write, run_id)
    proxy.clear()
    proxy.drop_answer(WRITES[write], "/docs")
    saved = store.save(target)
    assert [e.status for e in proxy.store_calls() if e.fault == "dropped"] == [
        201 if write == "create" else 200
    ]
    assert proxy.store_calls()[-1].method == "GET"  # the read-back
    loaded = store.load(run_id)
    assert loaded is not None
    assert (loaded.etag, loaded.state, loaded.step) == (saved.etag, target.state, target.step)
    after = store.save(replace(saved, step=saved.step + 1, steps=(*saved.steps, "b")))
    assert after.etag != saved.etag  # the returned etag is the stored one: saving on works


@pytest.mark.parametrize("write", WRITES)
def test_a_write_lost_once_is_sent_again(
    through: tuple[Any, Proxy, Cosmos], write: str, run_id: str
) -> None:
    """The write is lost before reaching the server: read back, it has not landed, so
    it is sent again, lands, and the save returns the stored etag."""
    store, proxy, _ = through
    _, target = _first(store, write, run_id)
    proxy.clear()
    proxy.drop_request(WRITES[write], "/docs")
    saved = store.save(target)
    loaded = store.load(run_id)
    assert loaded is not None and (loaded.etag, loaded.state) == (saved.etag, target.state)


@pytest.mark.parametrize("write", WRITES)
def test_a_write_that_never_arrived_has_not_landed_yet(
    through: tuple[Any, Proxy, Cosmos], write: str, run_id: str
) -> None:
    """Every attempt of the write is lost before reaching the server, the one sent
    again too: the read-back shows the stored run is still the one the save meant to
    replace (or none), so the error says it has not landed yet -- not that nothing was
    written, which the store cannot know of a request that may be on its way -- and the
    stored run is unchanged."""
    store, proxy, _ = through
    base, target = _first(store, write, run_id)
    proxy.clear()
    proxy.drop_request(WRITES[write], "/docs", times=None)
    with pytest.raises(ds.StoreError, match=r"has not landed yet.*may still land") as err:
        store.save(target)
    assert not isinstance(err.value, ds.ConflictError)
    assert "othing was written" not in str(err.value)
    proxy.heal()
    loaded = store.load(run_id)
    assert (loaded.etag if loaded else None) == base.etag


@pytest.mark.parametrize("write", WRITES)
def test_a_write_overwritten_before_the_read_back_is_a_checked_conflict(
    through: tuple[Any, Proxy, Cosmos], write: str, run_id: str
) -> None:
    """The write lands, its answer is lost, and another writer saves the run before the
    read-back: ConflictError that says it was checked, never "nothing was written"."""
    store, proxy, direct = through
    _, target = _first(store, write, run_id)

    def other_writer() -> None:
        with direct.store() as other:
            current = other.load(run_id)
            assert current is not None
            other.save(replace(current, state={"v": "other"}, updated_at=None))

    proxy.clear()
    proxy.drop_answer(WRITES[write], "/docs", then=other_writer)
    with pytest.raises(ds.ConflictError, match="checked by reading it back") as err:
        store.save(target)
    assert "othing was written" not in str(err.value)
    loaded = store.load(run_id)
    assert loaded is not None and loaded.state == {"v": "other"}


def test_when_the_read_back_fails_too_the_outcome_is_unknown(
    through: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """The answer is lost and the read-back fails as well: StoreError saying the outcome
    is unknown and to load the run before retrying (it did land, here)."""
    store, proxy, _ = through
    _, target = _first(store, "replace", run_id)
    proxy.clear()
    proxy.drop_answer("PUT", "/docs")
    proxy.answer("GET", 503, {"code": "ServiceUnavailable", "message": "down"}, "/docs/")
    with pytest.raises(ds.StoreError, match=r"outcome is unknown\. Load the run again") as err:
        store.save(target)
    assert "503" in str(err.value), str(err.value)
    proxy.heal()
    loaded = store.load(run_id)
    assert loaded is not None and loaded.state == target.state


def test_a_transport_error_names_its_cause(through: tuple[Any, Proxy, Cosmos], run_id: str) -> None:
    """A dropped connection on a load is a StoreError that quotes the underlying error's
    first line, not only its type name."""
    store, proxy, _ = through
    proxy.drop_request("GET", "/docs/", times=None)
    cause = r"cannot reach Cosmos DB at .*\(\w+: \S.*\): check"
    with pytest.raises(ds.StoreError, match=cause) as err:
        store.load(run_id)
    assert err.value.__cause__ is not None


@pytest.fixture(params=["sync", "async"])
def impatient(
    request: pytest.FixtureRequest,
    proxied: tuple[Cosmos, Proxy],
    loop: asyncio.AbstractEventLoop,
) -> Iterator[tuple[Any, Proxy, Cosmos]]:
    """``through``, with a client that waits one second for an answer (five by default)."""
    endpoint, proxy = proxied
    store: Any = (
        endpoint.store(read_timeout=1)
        if request.param == "sync"
        else SyncFacade(endpoint.async_store(read_timeout=1), loop)
    )
    try:
        store.load("warm-up")
        proxy.clear()
        yield store, proxy, replace(endpoint, endpoint=proxy.upstream_url)
    finally:
        proxy.release()
        store.close()


def late_ones(proxy: Proxy, count: int) -> list[int]:
    """The statuses the server gave the delayed requests, once it answered ``count``."""

    def answered() -> list[int]:
        return [e.status for e in proxy.of("PUT") if e.fault == "delayed" and e.status]

    wait_until(lambda: len(answered()) >= count, "the delayed writes to reach the server")
    return sorted(answered())


def test_a_head_write_delayed_past_its_timeout_is_sent_again_and_the_late_one_fenced(
    impatient: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """The head's write is delayed in the network past the client's timeout; read back,
    it has not landed, so it is sent again (the same write, conditional on the same
    version): that one lands and the save returns. The delayed write reaches the server
    later and is refused (412): it was fenced out, and the etag returned stays current.
    (Before, the save said "nothing was written" -- and the delayed write landed.)"""
    store, proxy, _ = impatient
    _, target = _first(store, "replace", run_id)
    proxy.clear()
    proxy.delay("PUT", "/docs/")
    saved = store.save(target)
    proxy.release()
    assert late_ones(proxy, 1) == [412]
    loaded = store.load(run_id)
    assert loaded is not None and (loaded.etag, loaded.state) == (saved.etag, target.state)


def test_a_head_write_that_has_not_landed_yet_is_not_called_unwritten(
    impatient: tuple[Any, Proxy, Cosmos], run_id: str
) -> None:
    """Every write of the head is delayed past the timeout, the one sent again too: read
    back, the save has not landed yet, and the error says so -- and that it may still
    land; never "nothing was written". Released, one of the writes lands (the others
    are refused), as the error warned."""
    store, proxy, _ = impatient
    base, target = _first(store, "replace", run_id)
    proxy.clear()
    proxy.delay("PUT", "/docs/", times=None)
    with pytest.raises(ds.StoreError, match=r"has not landed yet.*may still land") as err:
        store.save(target)
    assert "othing was written" not in str(err.value)
    assert not isinstance(err.value, ds.ConflictError)
    sent = len(proxy.of("PUT"))
    proxy.release()
    statuses = late_ones(proxy, sent)
    assert statuses[0] == 200 and set(statuses[1:]) <= {412}, statuses
    loaded = store.load(run_id)
    assert loaded is not None and loaded.state == target.state and loaded.etag != base.etag
