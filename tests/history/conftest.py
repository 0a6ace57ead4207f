"""History needs a store that keeps it: the Cosmos DB stores keep none by default (their
small runs stay inline in the head, one request per save; ``stores.cosmos.history``),
so ``api`` here turns it on for them, as ``CosmosStore(history="steps")`` does."""

from __future__ import annotations

import asyncio

import pytest

from durable_steps.seam.history import keep

from ..conftest import Api, Backend


@pytest.fixture
def api(backend: Backend, loop: asyncio.AbstractEventLoop) -> Api:
    store = getattr(backend.store, "aio", backend.store)
    items = getattr(store, "_items", None)
    if items is not None and not isinstance(items, dict):  # Cosmos DB: history="steps"
        items.history = store.history = keep("steps")
    return Api(backend, loop)
