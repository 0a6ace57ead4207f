"""``durable-steps doctor`` and ``migrate`` as real processes on the file store and
cosmos-local: a store checked by writing and reading back, what to fix, an emulator's
database created on demand; runs copied intact, the ones that cannot be reported, and a
failing store stopping the copy."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.cli import ops as cli_ops
from durable_steps.cli.copying import MIGRATE_OWNER
from durable_steps.testing import CosmosEndpoint

from ..helpers.clitools import Cli, Unreachable, unique


def _seed(cli: Cli, run_id: str) -> None:
    with cli.store() as store:
        ds.run(
            run_id, [ds.Step("a", lambda s: {"a": 1}), ds.Step("b", lambda s: {"b": "β"})], store
        )


def test_doctor_checks_write_and_read_back(cli: Cli) -> None:
    """doctor passes on a working store and leaves no probe behind."""
    before = {r["run_id"] for r in cli.json("runs", "list")}
    done = cli("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "read it back" in done.stdout and "the store is ready" in done.stdout
    assert {r["run_id"] for r in cli.json("runs", "list")} == before


def test_doctor_names_what_to_fix(tmp_path: Path) -> None:
    """doctor on a broken configuration exits 1 and says which variable to set."""
    done = Cli({"DURABLE_STORE": "cosmos"})("doctor")
    assert done.returncode == 1
    assert "✗ configuration" in done.stdout and "COSMOS_ENDPOINT" in done.stdout


def test_an_emulator_needs_no_python_code(cosmos_local: CosmosEndpoint) -> None:
    """COSMOS_CREATE_IF_MISSING=true: doctor and demo create the database and container
    they are pointed at; without it, a missing container is a failure that says so."""
    fresh = CosmosEndpoint(
        cosmos_local.endpoint,
        cosmos_local.key,
        database=unique("doctor-db"),
        container=unique("doctor-c"),
    )
    cli = Cli(fresh.env())
    refused = cli("doctor")
    assert refused.returncode == 1
    assert "✗ open the store: " in refused.stdout
    assert "set COSMOS_CREATE_IF_MISSING=true (emulators only)" in refused.stdout
    try:
        created = cli("doctor", COSMOS_CREATE_IF_MISSING="true")
        assert created.returncode == 0, created.stdout
        assert "create_if_missing=True" in created.stdout
        demo = cli("demo", "--step-seconds", "0.1", "--json", COSMOS_CREATE_IF_MISSING="1")
        assert demo.returncode == 0, demo.stderr
        assert cli("doctor").returncode == 0  # now it exists: no creation needed
    finally:
        fresh.drop_database()
    bad = cli("doctor", COSMOS_CREATE_IF_MISSING="maybe")
    assert "✗ configuration: COSMOS_CREATE_IF_MISSING='maybe' is not a boolean" in bad.stdout


def test_doctor_names_the_indexes_a_workers_look_needs(cosmos_local: CosmosEndpoint) -> None:
    """A container whose indexing policy leaves out the lease expiry and the status (what
    a worker's look filters on): doctor exits 1 and names both paths; the container the
    store creates (as infra/ provisions it) passes. The local server keeps the policy a
    container is created with and answers it, as the service does."""
    from durable_steps.stores.cosmos.sdk import CosmosClient, PartitionKey

    bare = replace(cosmos_local, container=unique("noidx"))
    policy = {
        "indexingMode": "consistent",
        "includedPaths": [{"path": "/*"}],
        "excludedPaths": [{"path": "/lease_expires/?"}, {"path": "/status/*"}],
    }
    with CosmosClient(
        bare.endpoint, credential=bare.key, connection_verify=False, enable_endpoint_discovery=False
    ) as client:
        client.get_database_client(bare.database).create_container(
            bare.container, partition_key=PartitionKey(path="/run"), indexing_policy=policy
        )
    try:
        done = Cli(bare.env())("doctor")
        assert done.returncode == 1, done.stdout
        line = next(x for x in done.stdout.splitlines() if "container indexes" in x)
        assert line.startswith("✗") and "/status/?" in line and "/lease_expires/?" in line
        assert "/workflow/?" not in line and "infra/main.bicep" in done.stdout
    finally:
        bare.drop()
    good = cosmos_local.fresh()
    try:
        done = Cli(good.env())("doctor")
        assert done.returncode == 0, done.stdout
        assert "✓ container indexes: seg, workflow, status, lease_expires" in done.stdout
    finally:
        good.drop()


def test_doctor_fails_when_finished_ttl_is_set_and_the_containers_ttl_is_off(
    cosmos_local: CosmosEndpoint,
) -> None:
    """A container created without TTL (as create_if_missing made them before) ignores
    the ttl that finished_ttl stamps: with DURABLE_FINISHED_TTL set, doctor exits 1 and
    names the fix; without it, the check passes and says runs are kept. The container
    the store creates has TTL on with no default (defaultTtl -1, as infra/main.bicep
    sets) and passes. (The local server keeps and answers a container's defaultTtl, as
    the service does, though it expires nothing.)"""
    bare = cosmos_local.fresh("/run")  # created directly: no defaultTtl
    try:
        assert "defaultTtl" not in bare.raw_container().read()
        cli = Cli(bare.env())
        done = cli("doctor", DURABLE_FINISHED_TTL="604800")
        assert done.returncode == 1, done.stdout
        line = next(x for x in done.stdout.splitlines() if "container TTL" in x)
        assert line.startswith("✗") and "TTL is off" in line, line
        assert "az cosmosdb sql container update --ttl -1" in line, line
        kept = cli("doctor")
        assert kept.returncode == 0, kept.stdout
        assert "✓ container TTL: off (no finished_ttl" in kept.stdout
    finally:
        bare.drop()
    good = cosmos_local.fresh()
    try:
        assert good.raw_container().read()["defaultTtl"] == -1
        done = Cli(good.env())("doctor", DURABLE_FINISHED_TTL="604800")
        assert done.returncode == 0, done.stdout
        assert "✓ container TTL: on: completed runs expire 604800 s" in done.stdout
    finally:
        good.drop()


def test_doctor_fails_on_a_default_ttl_that_would_expire_running_runs(
    cosmos_local: CosmosEndpoint,
) -> None:
    """A container with a positive default TTL deletes every item that long after its
    last write -- running and waiting runs too: doctor exits 1 and says so, with or
    without finished_ttl."""
    from durable_steps.stores.cosmos.sdk import CosmosClient, PartitionKey

    hourly = replace(cosmos_local, container=unique("ttl3600"))
    with CosmosClient(
        hourly.endpoint, credential=hourly.key, enable_endpoint_discovery=False
    ) as client:
        client.get_database_client(hourly.database).create_container(
            hourly.container, partition_key=PartitionKey(path="/run"), default_ttl=3600
        )
    try:
        done = Cli(hourly.env())("doctor")
        assert done.returncode == 1, done.stdout
        line = next(x for x in done.stdout.splitlines() if "container TTL" in x)
        assert line.startswith("✗") and "default TTL is 3600 s" in line, line
        assert "running and waiting runs too" in line and "--ttl -1" in line, line
    finally:
        hourly.drop()


def test_migrate_copies_runs_intact(cli: Cli, run_id: str, tmp_path: Path) -> None:
    """migrate --to file:PATH copies steps, state and age; a second migrate finds them there."""
    _seed(cli, run_id)
    with cli.store() as store:
        src = store.load(run_id)
    target = tmp_path / "copy"
    first = cli.json("migrate", "--to", f"file:{target}")
    assert run_id in first["copied"]
    assert (first["failed"], first["stopped"]) == ([], None)
    copy = ds.FileStore(target).load(run_id)
    assert copy is not None and src is not None
    assert (copy.state, copy.steps, copy.done, copy.updated_at) == (
        src.state,
        src.steps,
        src.done,
        src.updated_at,
    )
    again = cli.json("migrate", "--to", f"file:{target}")
    assert run_id in again["identical"]
    assert again["copied"] == []


def test_migrate_records_runs_it_cannot_copy_and_carries_on(
    cosmos_local: CosmosEndpoint, tmp_path: Path
) -> None:
    """A run over the state limit (DURABLE_MAX_STATE_BYTES, 2 MB here) and an unreadable
    one are reported and skipped; the others are copied, and the exit status is 1 at the
    end."""
    laptop = tmp_path / "laptop"
    with ds.FileStore(laptop) as files:
        for run_id in ("a-first", "c-huge", "d-last"):
            body = "x" * (3 * 1024 * 1024) if run_id == "c-huge" else "fine"
            ds.run(run_id, [ds.Step("s", lambda s, body=body: {"body": body})], files)
        files.file_for("b-broken").write_bytes(b"{")
    fresh = cosmos_local.fresh()
    try:
        env = {k: v for k, v in fresh.env().items() if k != "DURABLE_STORE"}
        cli = Cli({**env, "DURABLE_MAX_STATE_BYTES": "2000000"})
        done = cli("migrate", "--from", f"file:{laptop}", "--to", "cosmos", "--json")
        assert done.returncode == 1, done.stderr
        result = json.loads(done.stdout)
        assert result["copied"] == ["a-first", "d-last"]
        failures = {f["error"] for f in result["failed"]}
        assert failures == {"CorruptCheckpointError", "StateTooLargeError"}
        assert all(f["run_id"] and f["message"] for f in result["failed"])
        text = cli("migrate", "--from", f"file:{laptop}", "--to", "cosmos")
        assert text.returncode == 1
        assert "failed c-huge: StateTooLargeError: " in text.stderr
        assert "copied 0 run(s)" in text.stderr and "2 already there" in text.stderr
        assert "2 failed (listed above): not copied" in text.stderr
    finally:
        fresh.drop()


def test_migrate_from_files_to_cosmos_copies_the_history(
    cosmos_local: Any, run_id: str, tmp_path: Path
) -> None:
    """Laptop files to Cosmos DB (--from file:PATH --to cosmos): each run with its
    history -- every kept step loads in the target as in the source, with its time and
    attempts. A copy that stopped half-way (leased to migrate, a prefix of the source's
    steps) is continued by the next migrate, not reported as a conflict."""
    files = ds.FileStore(tmp_path / "laptop")
    steps = [ds.Step(f"s{i}", lambda s, i=i: {"log": [*s.get("log", []), i]}) for i in range(4)]
    for rid in (run_id, f"{run_id}-2"):
        ds.run(rid, steps, files)
    fresh = cosmos_local.fresh()
    try:
        with fresh.store() as target:  # a copy of the second run that stopped after step 1
            etag = None
            for k in (0, 1):
                half = files.load_at(f"{run_id}-2", k)
                assert half is not None
                held = replace(half, etag=etag, owner=MIGRATE_OWNER, lease_expires=time.time() + 60)
                etag = target.save(held).etag
        cli = Cli({k: v for k, v in fresh.env().items() if k != "DURABLE_STORE"})
        out = cli.json("migrate", "--from", f"file:{tmp_path / 'laptop'}", "--to", "cosmos")
        assert sorted(out["copied"]) == [run_id, f"{run_id}-2"]
        assert (out["conflicts"], out["latest_only"], out["history_steps"]) == ([], [], 3 + 1)
        with ds.store_from_env(fresh.env()) as store:
            for rid in (run_id, f"{run_id}-2"):
                there, source = store.run_history(rid), files.run_history(rid)
                assert there is not None and source is not None
                assert [(h.step, h.name, h.at) for h in there] == [
                    (h.step, h.name, h.at) for h in source
                ]
                for k in range(4):
                    assert store.load_at(rid, k).state == {"log": list(range(k + 1))}  # type: ignore[union-attr]
                final = store.load(rid)
                assert final is not None and final.done and final.owner is None
        again = cli("migrate", "--from", f"file:{tmp_path / 'laptop'}", "--to", "cosmos")
        assert "copied 0 run(s)" in again.stderr and "2 already there" in again.stderr
    finally:
        fresh.drop()


def test_migrate_stops_when_the_target_store_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure of a store itself (not of one run) stops migrate, which reports what it
    copied and where it stopped, and exits 1; the runs after it are not tried."""
    with ds.FileStore(tmp_path / "src") as src:
        for run_id in ("a", "b", "c"):
            ds.run(run_id, [ds.Step("s", lambda s: {"x": 1})], src)
    target = Unreachable(tmp_path / "dst", saves=1)
    stores = {"env": ds.FileStore(tmp_path / "src"), "file:dst": target}
    monkeypatch.setattr(cli_ops, "store_for", lambda spec, **_: stores[spec])
    with pytest.raises(SystemExit) as exit_:
        cli_ops.migrate.callback(target="file:dst", source="env", as_json=True)  # type: ignore[misc]
    assert exit_.value.code == 1
    result = json.loads(capsys.readouterr().out)
    assert (result["copied"], result["failed"]) == (["a"], [])
    assert result["stopped"] == {
        "run_id": "b",
        "error": "StoreError",
        "message": "cannot reach the store",
    }
    assert target.store.load("c") is None
