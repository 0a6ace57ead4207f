"""The codec applied by the library around a store that does not apply it
(``seam.coded``): what the registry opens, the one size limit, and a backend that says it
encodes values but does not is refused at open. (The contract suite checks every
backend's bytes: durable_steps.testing.contract.test_codec.)"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam.codec import from_env
from durable_steps.seam.coded import ROOM, AsyncCodedStore, CodedStore
from durable_steps.stores import registry


def codec() -> Any:
    key = base64.b64encode(os.urandom(32)).decode()
    return from_env({"DURABLE_CODEC": "aes256gcm", "DURABLE_KEY": key})


def test_a_backend_that_never_sees_the_codec_is_given_encoded_values(
    tmp_path: Path, run_id: str
) -> None:
    """Opened through the registry, the reference backend (examples/sqlite_store,
    installed by scripts/setup) is wrapped: opened without the codec and with room for
    encoded values, while the caller's limit stays the plain one."""
    c, backend = codec(), registry.backend_for("sqlite:")
    opening = registry.Opening(f"sqlite:{tmp_path / 'x.db'}", {}, codec=c, max_state_bytes=10_000)
    store = registry.open_store(backend, opening)
    assert isinstance(store, CodedStore) and store.codec is c
    assert (store.max_state_bytes, store.inner.max_state_bytes) == (10_000, ROOM * 10_000)
    assert store.inner.codec is None
    ds.run(run_id, [ds.Step("a", lambda s: {"secret": "TOPSECRET"})], store)
    assert b"TOPSECRET" not in (tmp_path / "x.db").read_bytes()
    assert store.inner.load(run_id).state["secret"]["k"] == "k1"  # an envelope, below
    cp = store.load(run_id)
    assert cp is not None and cp.state == {"secret": "TOPSECRET"}
    with pytest.raises(ds.StateTooLargeError):  # the plain limit binds, not the room below
        store.save(replace(cp, state={"secret": "x" * 10_001}))
    store.close()
    aio = registry.open_async_store(backend, opening)
    assert isinstance(aio, AsyncCodedStore) and aio.codec is c
    asyncio.run(aio.close())


@pytest.mark.parametrize("is_async", [False, True])
def test_a_backend_that_says_it_encodes_but_does_not_take_the_codec_is_refused(
    is_async: bool,
) -> None:
    """A backend declaring ``encodes_values`` whose store did not take the codec it was
    given would store plaintext: ConfigurationError at open, naming the backend."""
    opening = registry.Opening("mem2:", {}, codec=codec())
    backend = registry.Backend(  # its MemoryStore made without the codec it was given
        "mem2",
        open=lambda o: ds.MemoryStore(),
        open_async=lambda o: ds.AsyncMemoryStore(),
        encodes_values=True,
    )
    opener = registry.open_async_store if is_async else registry.open_store
    with pytest.raises(ds.ConfigurationError, match=r"'mem2'.*did not take the codec") as err:
        opener(backend, opening)
    assert err.value.variable == "DURABLE_CODEC"  # type: ignore[attr-defined]


def test_a_backend_of_another_package_is_given_an_encoded_delta(
    tmp_path: Path, run_id: str
) -> None:
    """Around the reference backend, a save encodes the values its update changed, not
    the whole state again: the 30th step's save encodes one value, as the 2nd's did,
    and the state it hands down keeps the earlier values' envelopes as they were."""
    inner = codec()
    places: list[bytes] = []

    class Counting:
        def encode(self, value: Any, data: bytes, where: bytes) -> Any:
            places.append(where)
            return inner.encode(value, data, where)

        def decode(self, stored: Any, where: bytes, run_id: str) -> Any:
            return inner.decode(stored, where, run_id)

    opening = registry.Opening(f"sqlite:{tmp_path / 'x.db'}", {}, codec=Counting())
    store = registry.open_store(registry.backend_for("sqlite:"), opening)
    seen: list[dict[str, Any]] = []
    real_save = store.inner.save

    def save(cp: Any) -> Any:
        seen.append(dict(cp.state))
        return real_save(cp)

    store.inner.save = save  # type: ignore[method-assign]
    steps = [ds.Step(f"s{i}", lambda s: {f"k{len(s)}": f"TOPSECRET {len(s)}"}) for i in range(30)]
    final = ds.run(run_id, steps, store, input={"k0": "first"})
    assert len(final) == 31
    counts = []
    for before, after in itertools.pairwise(seen):
        counts.append(sum(1 for k in after if k not in before or after[k] is not before[k]))
    assert counts[1:] == [1] * (len(counts) - 1), counts  # one new envelope a save
    assert len(places) == len(seen) and b"TOPSECRET" not in (tmp_path / "x.db").read_bytes()
    cp = store.load(run_id)
    assert cp is not None and cp.state == final
    store.close()
