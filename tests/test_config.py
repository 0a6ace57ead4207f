"""store_from_env(): the configuration table, its errors, and the import-time promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import durable_steps as ds


def test_default_is_a_file_store_in_dot_durable() -> None:
    """With nothing set, the store is FileStore('.durable')."""
    store = ds.store_from_env({})
    assert isinstance(store, ds.FileStore)
    assert store.path == Path(".durable")


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


def test_public_names_are_pinned(tmp_path: Path) -> None:
    """The public surface changes only on purpose."""
    assert sorted(ds.__all__) == sorted(
        [
            "AsyncCosmosStore",
            "AsyncFileStore",
            "AsyncMemoryStore",
            "AsyncStore",
            "Checkpoint",
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
            "MissingExtraError",
            "Recovered",
            "Retry",
            "RunInfo",
            "RunLeasedError",
            "RunNotFoundError",
            "RunWaiting",
            "StateTooLargeError",
            "Step",
            "StepContext",
            "StepMismatchError",
            "Store",
            "StoreError",
            "Workflow",
            "__version__",
            "async_store_from_env",
            "current_step",
            "recover",
            "recover_async",
            "run",
            "run_async",
            "send_signal",
            "send_signal_async",
            "store_from_env",
            "wait_for_signal",
        ]
    )
    for name in ds.__all__:
        assert getattr(ds, name) is not None
    assert isinstance(ds.FileStore(tmp_path), ds.Store)
    assert isinstance(ds.AsyncFileStore(tmp_path), ds.AsyncStore)
