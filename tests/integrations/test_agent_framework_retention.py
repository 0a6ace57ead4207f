"""Retention never takes an Agent Framework workflow that has not finished: a chain is
finished once its last checkpoint has no message in flight and no pending request
(``DurableCheckpointStorage``'s design). Before that, ``finished_ttl`` (the worker's
retention pass, the service's TTL on Cosmos DB) and ``runs prune`` leave it alone -- a
workflow paused for a person resumes days later; after it, the chain and its index go
as any completed run does. On the file, memory and cosmos-local stores, the prune as
the real command."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("agent_framework")

import durable_steps as ds
from durable_steps.integrations.agent_framework._storage import INDEX_WORKFLOW, WORKFLOW

from ..conftest import Cosmos
from ..helpers.clitools import Cli
from ..stores.cosmos.test_cosmos_expiry import service_ttl
from . import af_workflows

T = TypeVar("T")
TTL = 60


@dataclass
class Retaining:
    store: Any
    env: dict[str, str] | None
    """What opens the store in another process (None: a memory store)."""
    cosmos: Cosmos | None

    def expire(self, at: float) -> None:
        """Whatever retention would do by ``at``: the service's TTL, the worker's pass,
        and (where another process can reach the store) ``runs prune --older-than 0s``,
        which takes every completed or cancelled run."""
        if self.cosmos is not None:
            service_ttl(self.cosmos.raw_container(), at)
        self.store.delete_expired(now=at)
        if self.env is not None:
            done = Cli(self.env)("runs", "prune", "--older-than", "0s", "--yes")
            assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(params=["file", "memory", "cosmos-local"])
def retaining(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Retaining]:
    """A store of each kind with finished_ttl."""
    if request.param == "file":
        path = tmp_path / "store"
        env = {"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(path)}
        with ds.FileStore(path, finished_ttl=TTL) as store:
            yield Retaining(store, env, None)
    elif request.param == "memory":
        yield Retaining(ds.MemoryStore(finished_ttl=TTL), None, None)
    else:
        cosmos = request.getfixturevalue("cosmos_local").fresh()
        with cosmos.store(finished_ttl=TTL) as store:
            yield Retaining(store, cosmos.env(), cosmos)
        cosmos.drop()


def test_a_workflow_paused_for_a_person_outlives_retention_until_it_finishes(
    retaining: Retaining, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow stopped at a person's request: its chain is waiting, not completed, so
    expiry and prune, long after, leave it -- ``get_latest`` still finds the request and
    the answer finishes the workflow. The finished chain is completed: then retention
    removes it and its checkpoints' index."""
    monkeypatch.setattr(af_workflows, "effects", lambda: None)
    monkeypatch.setattr(af_workflows, "AT_GATE", [])

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    store = retaining.store
    asked = run(af_workflows.build(af_workflows.storage_on(store), "review").run("cats"))
    (request,) = [e.request_id for e in asked.get_request_info_events()]

    retaining.expire(time.time() + 10 * 3600)
    fresh = af_workflows.storage_on(store)  # as a new process, days later
    latest = run(fresh.get_latest(workflow_name="review"))
    assert latest is not None and list(latest.pending_request_info_events) == [request]
    (chain,) = store.list_runs(workflow=WORKFLOW + "review")
    assert chain.status == "waiting"
    done = run(
        af_workflows.build(fresh, "review").run(
            checkpoint_id=latest.checkpoint_id, responses={request: "ok"}
        )
    )
    assert done.get_outputs() == ["draft: cats (ok)"]
    (chain,) = store.list_runs(workflow=WORKFLOW + "review")
    assert chain.status == "completed"
    assert {i.status for i in store.list_runs(workflow=INDEX_WORKFLOW)} == {"completed"}

    retaining.expire(time.time() + 10 * 3600)
    assert run(fresh.get_latest(workflow_name="review")) is None
    assert list(store.list_runs(workflow=INDEX_WORKFLOW)) == []
