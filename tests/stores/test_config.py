"""store_from_env(): the configuration table, its errors, and the import-time promise."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

import durable_steps as ds
from durable_steps.stores.config import describe
from durable_steps.stores.cosmos.backend import cosmos_location, cosmos_settings


def test_default_is_a_file_store_in_dot_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing set, the store is FileStore('.durable') (here: in tmp_path, not in
    the checkout the tests run from)."""
    monkeypatch.chdir(tmp_path)
    store = ds.store_from_env({})
    assert (tmp_path / ".durable" / "runs").is_dir()
    assert isinstance(store, ds.FileStore)
    assert store.path == Path(".durable")


def test_create_false_opens_only_a_store_that_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """create=False (the CLI's reading commands): no store there is a StoreError with
    status 404 that names the absolute path and what named it, and nothing is created;
    a store that exists opens as usual, sync or async, and through store_for."""
    from durable_steps.stores.config import store_for

    monkeypatch.chdir(tmp_path)
    cases = [
        (lambda: ds.store_from_env({}, create=False), "DURABLE_FILE_PATH is not set"),
        (lambda: ds.async_store_from_env({}, create=False), "DURABLE_FILE_PATH is not set"),
        (
            lambda: ds.store_from_env({"DURABLE_FILE_PATH": "x"}, create=False),
            "DURABLE_FILE_PATH=x names no store",
        ),
        (lambda: store_for("file:x", {}, create=False), "file:x names no store"),
    ]
    for open_, says in cases:
        with pytest.raises(ds.StoreError, match="there is no store at ") as missing:
            open_()
        assert missing.value.status_code == 404
        assert str(tmp_path) in str(missing.value) and says in str(missing.value)
    assert list(tmp_path.iterdir()) == []
    ds.FileStore(".durable").close()
    assert isinstance(ds.store_from_env({}, create=False), ds.FileStore)
    assert isinstance(ds.async_store_from_env({}, create=False), ds.AsyncFileStore)


def test_file_path_and_memory(tmp_path: Path) -> None:
    """DURABLE_FILE_PATH moves the file store; DURABLE_STORE=memory gives a MemoryStore."""
    store = ds.store_from_env({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path)})
    assert isinstance(store, ds.FileStore)
    assert store.path == tmp_path
    assert isinstance(ds.store_from_env({"DURABLE_STORE": "memory"}), ds.MemoryStore)


@pytest.mark.parametrize(
    ("env", "variable", "says"),
    [
        ({"DURABLE_STORE": "redis"}, "DURABLE_STORE", "file, cosmos, memory"),
        ({"DURABLE_STORE": "cosmos"}, "COSMOS_ENDPOINT", "https://ACCOUNT.documents.azure.com"),
        (
            {"DURABLE_STORE": "cosmos", "COSMOS_ENDPOINT": "acct.documents.azure.com"},
            "COSMOS_ENDPOINT",
            "is not a URL",
        ),
        (
            {
                "DURABLE_STORE": "cosmos",
                "COSMOS_ENDPOINT": "https://a/",
                "COSMOS_VERIFY_TLS": "nah",
            },
            "COSMOS_VERIFY_TLS",
            "true (default) or false",
        ),
    ],
    ids=["unknown-backend", "no-endpoint", "endpoint-not-url", "bad-verify"],
)
def test_bad_configuration_names_the_variable(
    env: dict[str, str], variable: str, says: str
) -> None:
    """A bad value raises ConfigurationError naming the variable and the accepted values."""
    for factory in (ds.store_from_env, ds.async_store_from_env):
        with pytest.raises(ds.ConfigurationError) as err:
            factory(env)
        assert err.value.variable == variable
        assert variable in str(err.value)
        assert says in str(err.value)


COSMOS = {"DURABLE_STORE": "cosmos", "COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("", False), ("true", True), ("1", True), (" ON ", True), ("no", False)],
)
def test_create_if_missing_is_a_boolean_defaulting_to_false(
    value: str | None, expected: bool
) -> None:
    """COSMOS_CREATE_IF_MISSING (emulators only) is off unless set to a true value."""
    env = COSMOS if value is None else {**COSMOS, "COSMOS_CREATE_IF_MISSING": value}
    assert describe(env)["create_if_missing"] is expected


@pytest.mark.parametrize("variable", ["COSMOS_CREATE_IF_MISSING", "COSMOS_VERIFY_TLS"])
def test_a_malformed_boolean_names_the_variable_and_the_accepted_values(variable: str) -> None:
    """A boolean variable that is not one says which and what it accepts."""
    for factory in (ds.store_from_env, ds.async_store_from_env):
        with pytest.raises(ds.ConfigurationError) as err:
            factory({**COSMOS, variable: "maybe"})
        assert err.value.variable == variable
        assert f"{variable}='maybe' is not a boolean; use " in str(err.value)
        assert "also accepted: true/1/yes/on and false/0/no/off" in str(err.value)


KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


@pytest.mark.parametrize(
    "env",
    [
        {
            "COSMOS_ENDPOINT": f"AccountEndpoint=https://a.documents.azure.com:443/;AccountKey={KEY};"
        },
        {"COSMOS_ENDPOINT": KEY},
        {"COSMOS_VERIFY_TLS": KEY},
        {"COSMOS_CREATE_IF_MISSING": KEY},
        {"DURABLE_STORE": KEY},
    ],
    ids=["connection-string", "key-as-endpoint", "key-as-verify", "key-as-create", "key-as-store"],
)
def test_a_configuration_error_never_repeats_a_key(env: dict[str, str]) -> None:
    """A key put where it does not belong (a connection string in COSMOS_ENDPOINT, a
    key in the wrong variable) fails naming the variable, without repeating the key."""
    with pytest.raises(ds.ConfigurationError) as err:
        ds.store_from_env({**COSMOS, **env})
    assert err.value.variable in env
    assert KEY not in str(err.value) and KEY[:20] not in str(err.value)
    assert "not repeated here" in str(err.value)


def test_a_key_is_passed_without_surrounding_whitespace() -> None:
    """A key read from a mounted secret often ends in a newline; it is stripped, and a
    blank key means Entra ID."""
    endpoint = COSMOS["COSMOS_ENDPOINT"]
    env = {**COSMOS, "COSMOS_KEY": f" {KEY}\n"}
    assert cosmos_settings(env, endpoint, "d", "c", True)["key"] == KEY
    assert describe({**COSMOS, "COSMOS_KEY": " \n"})["auth"].startswith("Entra ID")


def test_import_does_not_load_azure_or_the_cli() -> None:
    """`import durable_steps` imports no Azure SDK and no CLI library."""
    code = (
        "import sys, durable_steps; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('azure', 'click', 'rich')]; "
        "print(bad); sys.exit(bool(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_cosmos_without_the_extra_names_the_install_command() -> None:
    """Asking for Cosmos when azure-cosmos is missing says: pip install 'durable-steps[cosmos]'."""
    code = (
        "import sys; sys.modules['azure.cosmos'] = None; import durable_steps as ds\n"
        "try:\n  ds.store_from_env({'DURABLE_STORE': 'cosmos', "
        "'COSMOS_ENDPOINT': 'https://a.documents.azure.com/'})\n"
        "except ds.DurableError as e: print(e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'durable-steps[cosmos]'" in out.stdout


HIDE_AZURE = (
    "import sys\n"
    "for m in ('azure', 'azure.cosmos', 'azure.identity', 'azure.core'): sys.modules[m] = None\n"
)


def test_without_the_extra_the_package_surface_still_works() -> None:
    """Without azure-cosmos: `from durable_steps import *` and hasattr work; using a
    Cosmos store (the class, store_from_env, async_store_from_env) raises
    MissingExtraError -- a ConfigurationError and an ImportError -- with the exact
    install command; nothing of Azure is imported."""
    code = HIDE_AZURE + textwrap.dedent(
        """
        from durable_steps import *
        import durable_steps as ds
        assert hasattr(ds, "CosmosStore") and hasattr(ds, "AsyncCosmosStore")
        assert not isinstance(MemoryStore(), CosmosStore)
        env = {"DURABLE_STORE": "cosmos", "COSMOS_ENDPOINT": "https://a.documents.azure.com/"}
        for use in (lambda: CosmosStore("https://a/"), lambda: ds.AsyncCosmosStore("https://a/"),
                    lambda: ds.store_from_env(env), lambda: ds.async_store_from_env(env)):
            try:
                use()
            except ImportError as e:
                assert isinstance(e, ds.MissingExtraError) and isinstance(e, ds.ConfigurationError)
                print(e)
        loaded = [m for m, v in sys.modules.items() if m.startswith("azure") and v is not None]
        assert loaded == [], loaded
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4
    assert all(line.endswith(": pip install 'durable-steps[cosmos]'") for line in lines), lines
    assert lines[0].startswith("CosmosStore: the Cosmos DB store needs the [cosmos] extra")


def test_public_names_are_pinned(tmp_path: Path) -> None:
    """The public surface changes only on purpose."""
    assert sorted(ds.__all__) == sorted(
        [
            "PendingMessage",
            "pending_messages",
            "pending_messages_async",
            "StreamInfo",
            "list_streams",
            "list_streams_async",
            "stream_info",
            "stream_info_async",
            # code-first workflows and run handles
            "durable",
            "RunHandle",
            "AsyncRunHandle",
            "handle_for",
            "handle_for_async",
            "AsyncCosmosStore",
            "AsyncFileStore",
            "AsyncMemoryStore",
            "AsyncStore",
            "Checkpoint",
            "CodecError",
            "Compression",  # the codec (docs/security.md)
            "Keyring",
            "ValueCodec",
            "ConfigurationError",
            "ConflictError",
            "CorruptCheckpointError",
            "CosmosStore",
            "DurableError",
            "FileStore",
            "InvalidRunIdError",
            "InvalidStateError",
            "LeaseLostError",
            "MemoryStore",
            "MessageTimeoutError",
            "MissingExtraError",
            "NondeterminismError",
            "Queue",  # queues
            "Recorded",
            "Recovered",
            "Retry",
            "RunInfo",
            "RunCancelledError",
            "RunFailedError",
            "RunLeasedError",
            "RunNotFoundError",
            "RunWaiting",
            "Schedule",  # schedules
            "fleet",  # the fleet overview (console, runs workers)
            "Fleet",
            "WorkerInfo",
            "QueueInfo",
            "ScheduleInfo",
            "owner_label",
            "SignalTimeoutError",
            "StateTooLargeError",
            "Step",
            "StepContext",
            "StepMismatchError",
            "StepNotKeptError",
            "StepRecord",
            "Attempt",
            "CallEntry",
            "Store",
            "StoreError",
            "StreamNotFoundError",  # streams
            "TooManyAttemptsError",
            "Workflow",
            "__version__",
            "async_store_for",
            "async_store_from_env",
            "await_child",  # child runs
            "await_child_async",  # child runs
            "call",
            "call_async",
            "cancel_run",
            "cancel_run_async",
            "current_step",
            "fork_run",
            "fork_run_async",
            "load_at",
            "load_at_async",
            "patched",  # lifecycle (issue 33)
            # talking to a running run: streams and events
            "StreamReset",
            "close_stream",
            "close_stream_async",
            "get_event",
            "get_event_async",
            "get_events",
            "get_events_async",
            "read_stream",
            "read_stream_async",
            "set_event",
            "set_event_async",
            "write_stream",
            "write_stream_async",
            "receive",
            "receive_async",
            "recover",
            "recover_async",
            "resume_run",  # lifecycle (issue 33)
            "resume_run_async",
            "run",
            "run_async",
            "run_history",
            "run_history_async",
            "running_steps",
            "send_message",
            "send_message_async",
            "send_signal",
            "send_signal_async",
            "sleep",
            "sleep_until",
            "start_child",  # child runs
            "start_child_async",  # child runs
            "store_for",
            "store_from_env",
            "track_tasks",
            "typed_as",
            "upgrade_run",  # lifecycle (issue 33)
            "upgrade_run_async",
            "wait_for_signal",
            "wait_for_result",
            "wait_for_result_async",
        ]
    )
    exported = {name: getattr(ds, name) for name in ds.__all__}  # the Cosmos ones lazily
    assert isinstance(exported.pop("__version__"), str)
    assert exported.pop("durable").__name__ == "durable_steps.durable"  # a namespace: durable.step
    for name, value in exported.items():  # our object of that name, not an alias or a stray
        assert (value.__module__.split(".")[0], value.__name__) == ("durable_steps", name)
    assert isinstance(ds.FileStore(tmp_path), ds.Store)
    assert isinstance(ds.AsyncFileStore(tmp_path), ds.AsyncStore)


def test_package_metadata_tells_the_truth() -> None:
    """The declared license is the LICENSE file's, and the Python versions the package
    claims are the ones CI tests, from requires-python up."""
    root = Path(__file__).parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    license_text = (root / "LICENSE").read_text()
    assert project["license"] == "MIT"
    assert (
        license_text.startswith("MIT License\n") and "Permission is hereby granted" in license_text
    )
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639
    claimed = [
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    ci = yaml.safe_load((root / ".github/workflows/ci.yml").read_text())
    tested = ci["jobs"]["test"]["strategy"]["matrix"]["python"]
    assert claimed == tested
    assert project["requires-python"] == f">={claimed[0]}"
    assert project["authors"] and project["keywords"]


@pytest.mark.parametrize("value", ["lots", "-5", "0", "1.5", "64MiB"])
def test_a_bad_state_limit_is_a_configuration_error(value: str) -> None:
    """DURABLE_MAX_STATE_BYTES must be a positive whole number of bytes, for every
    backend: anything else names the variable and the default."""
    for backend in ("file", "memory", "cosmos"):
        env = {"DURABLE_STORE": backend, "COSMOS_ENDPOINT": "https://a/"}
        with pytest.raises(ds.ConfigurationError, match="67108864, 64 MiB") as err:
            ds.store_from_env({**env, "DURABLE_MAX_STATE_BYTES": value})
        assert err.value.variable == "DURABLE_MAX_STATE_BYTES"


def test_the_state_limit_reaches_every_store_and_doctor_shows_it(tmp_path: Path) -> None:
    """DURABLE_MAX_STATE_BYTES becomes the store's max_state_bytes (file, memory; the
    Cosmos DB stores take it the same way: the contract suite shows it); describe()
    gives the limit in force, the default when unset."""
    env = {"DURABLE_FILE_PATH": str(tmp_path), "DURABLE_MAX_STATE_BYTES": "1_000_000"}
    for backend in ("file", "memory"):
        store = ds.store_from_env({**env, "DURABLE_STORE": backend})
        assert store.max_state_bytes == 1_000_000
        assert describe({**env, "DURABLE_STORE": backend})["max_state_bytes"] == 1_000_000
    assert describe({})["max_state_bytes"] == 64 * 1024 * 1024


def test_a_cosmos_container_is_named_on_the_command_line() -> None:
    """store_for("cosmos:NAME") is the configured Cosmos DB account and database with
    another container (what migrate --to cosmos:NEW uses)."""
    from durable_steps.stores import config

    env = {"DURABLE_STORE": "file", "COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/"}
    url = config.url_for("cosmos:checkpoints2", env)
    assert cosmos_location(url) == (
        "https://acct.documents.azure.com:443/",
        "durable",
        "checkpoints2",
    )
    with pytest.raises(ds.ConfigurationError, match="cosmos:CONTAINER"):
        config.store_for("cosmos:")
