"""infra/ checked offline: checkov's Cosmos DB rules, and agreement with the code."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import durable_steps as ds
from durable_steps.stores import config
from durable_steps.stores.cosmos import store as cosmos_store

INFRA = Path(__file__).parents[2] / "infra"
BICEP = (INFRA / "main.bicep").read_text()
COSMOS_CHECKS = {"CKV_AZURE_99", "CKV_AZURE_101", "CKV_AZURE_132", "CKV_AZURE_140"}


def test_checkov_passes_every_cosmos_db_check(tmp_path: Path) -> None:
    """checkov parses main.bicep and every Cosmos DB check passes (none suppressed)."""
    checkov = Path(sys.executable).with_name("checkov")
    done = subprocess.run(
        [
            str(checkov),
            "-f",
            str(INFRA / "main.bicep"),
            "--framework",
            "bicep",
            "--compact",
            "--skip-download",
            "-o",
            "json",
        ],  # --skip-download: no network, no guideline fetch
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    report = json.loads(done.stdout)
    report = report[0] if isinstance(report, list) else report
    summary, results = report["summary"], report["results"]
    assert summary["parsing_errors"] == 0
    failed = [(c["check_id"], c["check_name"]) for c in results.get("failed_checks", [])]
    assert failed == []
    passed = {c["check_id"] for c in results["passed_checks"]}
    assert passed >= COSMOS_CHECKS
    assert summary["skipped"] == 0
    assert done.returncode == 0


def _param_default(name: str) -> str:
    match = re.search(rf"^param {name} \w+ = '([^']*)'", BICEP, re.MULTILINE)
    assert match, f"param {name} with a default not found in main.bicep"
    return match[1]


def test_infra_and_code_agree_on_names_and_partition_key() -> None:
    """Database, container and partition key in the Bicep are the code's defaults; the
    data the store never queries is not indexed, as in the containers it creates."""
    env = config.describe({"DURABLE_STORE": "cosmos", "COSMOS_ENDPOINT": "https://a/"})
    params = inspect.signature(ds.CosmosStore.__init__).parameters
    assert _param_default("databaseName") == env["database"] == params["database"].default
    assert _param_default("containerName") == env["container"] == params["container"].default
    pk = re.search(r"partitionKey: \{\s*paths: \[\s*'([^']+)'", BICEP)
    assert pk is not None
    assert pk[1] == cosmos_store.PARTITION_KEY == "/run"
    excluded = set(re.findall(r"path: '([^']+)'", BICEP.split("excludedPaths", 1)[1]))
    assert excluded == {p["path"] for p in cosmos_store.INDEXING["excludedPaths"]}


def test_outputs_are_the_apps_environment_variables() -> None:
    """The deployment's outputs are named exactly like the variables store_from_env reads."""
    outputs = set(re.findall(r"^output (\w+) ", BICEP, re.MULTILINE))
    assert outputs == {"COSMOS_ENDPOINT", "COSMOS_DATABASE", "COSMOS_CONTAINER"}
    # each output, set as the app's variable, is what store_from_env then uses
    values = {"COSMOS_ENDPOINT": "https://out.example/", "COSMOS_DATABASE": "outdb"}
    values["COSMOS_CONTAINER"] = "outcontainer"
    env = config.describe({"DURABLE_STORE": "cosmos", **values})
    used = {"endpoint": "COSMOS_ENDPOINT", "database": "COSMOS_DATABASE"}
    used["container"] = "COSMOS_CONTAINER"
    assert {name: env[key] for key, name in used.items()} == values


def test_security_settings_are_on_by_default() -> None:
    """Keys off, metadata writes off, TLS 1.2, public access off, continuous backup, TTL on."""
    for setting in (
        "disableLocalAuth: true",
        "disableKeyBasedMetadataWriteAccess: true",
        "minimalTlsVersion: 'Tls12'",
        "type: 'Continuous'",
        "enableMultipleWriteLocations: false",
    ):
        assert setting in BICEP, setting
    assert _param_default("publicNetworkAccess") == "Disabled"
    assert re.search(r"^param defaultTtlSeconds int = -1$", BICEP, re.MULTILINE)
    assert "'00000000-0000-0000-0000-000000000002'" in BICEP  # Built-in Data Contributor


def test_infra_indexes_what_a_workers_look_filters_on() -> None:
    """The indexing policy in the Bicep (and the one the store creates) indexes every
    path the takeable query filters on -- as ``doctor`` checks it on a live container."""
    from durable_steps.stores.cosmos.container import INDEXING, unindexed

    block = BICEP.split("indexingPolicy:", 1)[1].split("options:", 1)[0]
    included, excluded = block.split("excludedPaths", 1)
    policy = {
        "indexingMode": re.findall(r"indexingMode: '(\w+)'", block)[0],
        "includedPaths": [{"path": p} for p in re.findall(r"path: '([^']+)'", included)],
        "excludedPaths": [{"path": p} for p in re.findall(r"path: '([^']+)'", excluded)],
    }
    assert policy["includedPaths"] == [{"path": "/*"}]
    assert unindexed(policy) == [] and unindexed(INDEXING) == []
    assert unindexed({**policy, "excludedPaths": [{"path": "/wake_at/?"}]}) == ["/wake_at/?"]
