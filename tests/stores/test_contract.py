"""The store contract: every backend (see conftest.BACKENDS) passes the shipped suite
(``durable_steps.testing.contract``, run here with this project's backends: cosmos-live,
the encrypted ones), and the configuration of the state limit by the environment."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.testing.contract.fixtures import first
from durable_steps.testing.contract.test_codec import *  # noqa: F403 - the shipped suite
from durable_steps.testing.contract.test_runs import *  # noqa: F403
from durable_steps.testing.contract.test_store import *  # noqa: F403

from ..conftest import SyncFacade, store_env

pytestmark = pytest.mark.filterwarnings(
    "ignore:Sending a large body directly with raw bytes:ResourceWarning"
)


@pytest.mark.parametrize(
    "case",
    [(kind, is_async) for is_async in (False, True) for kind in ("file", "memory", "cosmos-local")],
    ids=lambda case: f"{case[0]}{'-async' if case[1] else ''}",
)
def test_the_state_limit_is_configured_by_durable_max_state_bytes(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    loop: asyncio.AbstractEventLoop,
    case: tuple[str, bool],
    run_id: str,
) -> None:
    """DURABLE_MAX_STATE_BYTES sets every store's limit (max_state_bytes=), sync and
    async: 4 KiB here, so a 5 KB state is refused and a 3 KB one is not."""
    kind, is_async = case
    env = {**store_env(request, tmp_path, kind), "DURABLE_MAX_STATE_BYTES": "4096"}
    make = ds.async_store_from_env if is_async else ds.store_from_env
    store: Any = SyncFacade(make(env), loop) if is_async else make(env)
    try:
        saved = store.save(first(run_id, {"text": "s" * 3000}))
        with pytest.raises(ds.StateTooLargeError) as err:
            store.save(replace(saved, state={"text": "l" * 5000}))
        assert (err.value.size, err.value.limit) == (len('{"text":""}') + 5000 + 2, 4096)
        loaded = store.load(run_id)
        assert loaded is not None and loaded.state == {"text": "s" * 3000}
    finally:
        store.close()
