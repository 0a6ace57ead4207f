"""durable_steps.testing as users get it: the entry point, the fixtures on file, memory and
cosmos-local (pytest run in a subprocess on a user's test file), the running-emulator
path against the local protocol server, and the local server's 404 wrapper."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from azure.core.pipeline.transport import RequestsTransport
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError

import durable_steps.testing as plugin
from durable_steps.devtools import cosmos_server as _local

from ..helpers.servers import ROOT, start_cosmosdb_server, stop

TESTING = (ROOT / "docs" / "testing.md").read_text()
# pytester removes the modules a test imported when the test ends; a CosmosClient made
# inside such a test would import the HTTP stack (requests) anew, and later clients
# would mix two copies of it. Imported here, it is there before any pytester test.
assert RequestsTransport


def test_import_durable_steps_imports_neither_the_plugin_nor_pytest() -> None:
    """`import durable_steps` stays light: the plugin and pytest load only under pytest."""
    code = (
        "import sys, durable_steps\n"
        "print(sorted(m for m in ('durable_steps.testing', 'pytest') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_loading_the_plugin_imports_no_cosmos_or_docker_library() -> None:
    """Every pytest run of a user with durable-steps installed loads the plugin: it must
    not load azure-cosmos, docker or testcontainers until a Cosmos backend is used."""
    code = (
        "import sys, durable_steps.testing\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(loaded & {'azure', 'docker', 'testcontainers'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_plugin_is_registered_through_the_pytest11_entry_point(
    pytestconfig: pytest.Config,
) -> None:
    """pytest finds the plugin by the installed entry point 'durable_steps', not by a conftest."""
    (point,) = [e for e in entry_points(group="pytest11") if e.name == "durable_steps"]
    assert point.value == "durable_steps.testing"
    assert pytestconfig.pluginmanager.get_plugin("durable_steps") is plugin


def test_cosmos_local_can_run_here(pytestconfig: pytest.Config) -> None:
    """Where cosmos-local is selected (this project's default), its server is installed:
    a missing one must fail this run, not quietly skip every cosmos-local test."""
    if "cosmos-local" not in plugin.selected_backends(pytestconfig):
        pytest.skip("cosmos-local is not among --durable-backends")
    try:
        proc, endpoint = start_cosmosdb_server()
    except _local.ServerError as exc:
        pytest.fail(f"{exc}: run scripts/setup (npm ci)")
    stop(proc)
    assert endpoint.startswith("http://127.0.0.1:")


# -- a user's test file, run by pytest in a subprocess ------------------------------------

USER_TESTS = """
import asyncio
import pytest
import durable_steps as ds
from durable_steps import Step


@pytest.mark.parametrize("n", [1, 2])
def test_fixed_run_id_starts_fresh_in_every_test(durable_store, n):
    assert durable_store.load("order-1") is None
    assert list(durable_store.list_runs()) == []
    assert ds.run("order-1", [Step("a", lambda s: {"n": n})], durable_store) == {"n": n}


def test_async_store_opens_in_the_tests_loop(async_durable_store):
    async def main():
        async with async_durable_store as store:
            assert isinstance(store, ds.AsyncStore)
            return await ds.run_async("order-1", [Step("a", lambda s: {"ok": True})], store)

    assert asyncio.run(main()) == {"ok": True}


@pytest.mark.parametrize("durable_store", ["memory"], indirect=True)
def test_pinned_to_one_backend(durable_store):
    assert isinstance(durable_store, ds.MemoryStore)
"""


@pytest.fixture
def user(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project: their test file; the npm server found through NODE_PATH."""
    monkeypatch.setenv("NODE_PATH", str(ROOT / "node_modules"))
    for name in ("DURABLE_TEST_EMULATOR_ENDPOINT", "DOCKER_HOST", "COSMOS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_user=USER_TESTS)
    return pytester


def test_default_backends_are_file_and_memory(user: pytest.Pytester) -> None:
    """Without options each durable_store test runs on file and on memory; a test pinned
    with an indirect parametrize runs once."""
    result = user.runpytest_subprocess("-v")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(
        [
            "durable-steps backends: file,memory",
            "*test_fixed_run_id_starts_fresh_in_every_test?file-1? PASSED*",
            "*test_async_store_opens_in_the_tests_loop?memory? PASSED*",
        ]
    )


def test_fixtures_work_on_file_memory_and_cosmos_local(user: pytest.Pytester) -> None:
    """--durable-backends=file,memory,cosmos-local runs every test on all three: fixed run
    ids and list_runs see an empty store each time (a container per test on Cosmos)."""
    result = user.runpytest_subprocess("-v", "--durable-backends=file,memory,cosmos-local")
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(["*test_async_store_opens_in_the_tests_loop?cosmos-local? PASSED*"])


def test_unknown_backend_is_a_usage_error(user: pytest.Pytester) -> None:
    """A typo in --durable-backends stops the run at once and lists the backends."""
    result = user.runpytest_subprocess("--durable-backends=file,cosmos")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'cosmos' is not a backend; choose from file,memory,*"])


def test_a_backend_not_selected_skips_with_its_reason(user: pytest.Pytester) -> None:
    """A test asking for cosmos_local itself, when cosmos-local is not selected, says so."""
    user.makepyfile(test_direct="def test_direct(cosmos_local):\n    assert cosmos_local\n")
    result = user.runpytest_subprocess("test_direct.py", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*cosmos-local is not among --durable-backends (file,memory)*"])


def test_missing_npm_server_skips_with_how_to_install(
    user: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No @vercel/cosmosdb-server where node looks: one skip line with the npm command."""
    monkeypatch.delenv("NODE_PATH")
    user.makepyfile(test_direct="def test_direct(cosmos_local):\n    assert cosmos_local\n")
    result = user.runpytest_subprocess("test_direct.py", "-rs", "--durable-backends=cosmos-local")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*cosmos-local: @vercel/cosmosdb-server cannot be found*npm install @vercel/*@1.0.1*"]
    )


def test_running_emulator_path_end_to_end(
    user: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DURABLE_TEST_EMULATOR_ENDPOINT (here: the local protocol server) is used as the
    running emulator: the tests pass on it and the session's database is deleted after."""
    proc, endpoint = start_cosmosdb_server()
    try:
        monkeypatch.setenv("DURABLE_TEST_EMULATOR_ENDPOINT", endpoint)
        result = user.runpytest_subprocess("-v", "--durable-backends=cosmos-emulator")
        result.assert_outcomes(passed=4)  # 3 on cosmos-emulator, 1 pinned to memory
        result.stdout.fnmatch_lines(["*test_fixed_run_id*cosmos-emulator-2? PASSED*"])
        with CosmosClient(endpoint, plugin.EMULATOR_KEY, enable_endpoint_discovery=False) as c:
            assert [d["id"] for d in c.list_databases()] == []
    finally:
        stop(proc)


def test_readme_example_runs_under_the_plugin(
    user: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example file of docs/testing.md passes on file, memory and cosmos-local."""
    code = re.search(r"```py\n(.*?)```", TESTING, re.DOTALL)
    assert code is not None
    user.makepyfile(test_support_flow=code[1])
    result = user.runpytest_subprocess(
        "test_support_flow.py", "--durable-backends=file,memory,cosmos-local"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 6 and set(outcomes) == {"passed"}, result.stdout.str()


# -- the local server's 404 wrapper ----------------------------------------------------------


def test_the_wrapper_fixes_the_servers_500_for_a_missing_document() -> None:
    """The installed server answers 500 for a missing document on its own; started
    through the plugin it answers 404, as the service does."""
    cli = ROOT / "node_modules/@vercel/cosmosdb-server/lib/cli.js"
    raw = subprocess.Popen(
        ["node", str(cli), "-p", "0", "--host", "127.0.0.1", "--no-ssl"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert raw.stdout is not None
    port = raw.stdout.readline().strip().rsplit(":", 1)[1]
    wrapped, endpoint = start_cosmosdb_server()
    try:
        statuses = []
        for url in (f"http://127.0.0.1:{port}/", endpoint):
            with CosmosClient(url, plugin.EMULATOR_KEY, enable_endpoint_discovery=False) as c:
                db = c.create_database_if_not_exists("d")
                container = db.create_container_if_not_exists("c", PartitionKey(path="/id"))
                with pytest.raises(CosmosHttpResponseError) as err:
                    container.read_item("missing", partition_key="missing", retry_total=0)
                statuses.append(err.value.status_code)
        assert statuses == [500, 404]
    finally:
        stop(raw)
        stop(wrapped)


def test_the_server_ends_when_its_parent_goes() -> None:
    """Closing the server's stdin (what a killed pytest does) ends it: no orphan server."""
    proc, _ = start_cosmosdb_server()
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    stop(proc)


def test_no_node_is_a_missing_server_with_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without node on PATH: ServerMissing (a skip for the plugin) naming Node.js and npm."""
    monkeypatch.setenv("PATH", os.devnull)
    with pytest.raises(
        _local.ServerMissing, match=r"Node\.js \(node\) is not on PATH.*npm install"
    ):
        _local.start_cosmosdb_server(Path.cwd())
