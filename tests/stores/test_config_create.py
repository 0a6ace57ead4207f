"""When the configured file store is not there (a mistyped DURABLE_FILE_PATH, an app
started from another directory): a new one is created with a WARNING that says where,
or, with DURABLE_CREATE_IF_MISSING=false, refused with a ConfigurationError."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.stores.config import describe, store_for

OFF = {"DURABLE_CREATE_IF_MISSING": "false"}

OPENERS: dict[str, Callable[[dict[str, str]], Any]] = {
    "store_from_env": ds.store_from_env,
    "async_store_from_env": ds.async_store_from_env,
    "store_for-env": lambda env: store_for("env", env),
}


def created(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "durable_steps" and r.levelno == logging.WARNING and "created" in r.message
    ]


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
def test_creating_a_file_store_is_a_warning_that_says_where_and_how_to_refuse(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, opener: Callable[[dict[str, str]], Any]
) -> None:
    """A store created where there was none logs one WARNING on the durable_steps logger
    with the absolute path, the variable that named it and the switch that refuses;
    opening it again, now that it exists, logs nothing."""
    caplog.set_level(logging.WARNING, logger="durable_steps")
    env = {"DURABLE_FILE_PATH": str(tmp_path / "typo")}
    opener(env)
    (line,) = created(caplog)
    assert f"created a new, empty file store at {tmp_path / 'typo'} " in line
    assert f"named by DURABLE_FILE_PATH={tmp_path / 'typo'}" in line
    assert "set DURABLE_CREATE_IF_MISSING=false to refuse creating a store" in line
    caplog.clear()
    opener(env)
    assert created(caplog) == []


def test_the_warning_names_the_current_directory_when_the_path_is_not_set(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With DURABLE_FILE_PATH unset, the warning gives .durable's absolute path in the
    directory the app started from, and says that the variable is not set; a file:PATH
    store named on a command line is named as such."""
    caplog.set_level(logging.WARNING, logger="durable_steps")
    monkeypatch.chdir(tmp_path)
    ds.store_from_env({})
    store_for("file:other", {})
    first, second = created(caplog)
    assert f"at {tmp_path / '.durable'} (DURABLE_FILE_PATH is not set: .durable in the" in first
    assert f"at {tmp_path / 'other'} (named by file:other)" in second


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
def test_create_if_missing_false_refuses_a_missing_store_naming_path_and_variable(
    tmp_path: Path, opener: Callable[[dict[str, str]], Any]
) -> None:
    """DURABLE_CREATE_IF_MISSING=false: a missing file store is a ConfigurationError (not
    a new store) naming the absolute path, DURABLE_FILE_PATH as set and the switch, and
    nothing is created; a store that exists opens as usual."""
    env = {"DURABLE_FILE_PATH": str(tmp_path / "typo"), **OFF}
    with pytest.raises(ds.ConfigurationError) as refused:
        opener(env)
    assert refused.value.variable == "DURABLE_CREATE_IF_MISSING"
    message = str(refused.value)
    assert f"there is no store at {tmp_path / 'typo'}, " in message
    assert "DURABLE_CREATE_IF_MISSING=false forbids creating one" in message
    assert f"DURABLE_FILE_PATH={tmp_path / 'typo'} names no store" in message
    assert list(tmp_path.iterdir()) == []
    ds.FileStore(tmp_path / "typo").close()
    opener(env)


def test_create_false_still_says_what_the_command_does_not_do(tmp_path: Path) -> None:
    """create=False (the CLI's reading commands) keeps its 404 StoreError whatever the
    switch says: the switch is for the stores an application opens."""
    with pytest.raises(ds.StoreError) as missing:
        ds.store_from_env({"DURABLE_FILE_PATH": str(tmp_path / "x"), **OFF}, create=False)
    assert missing.value.status_code == 404


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, True), ("", True), ("false", False), ("0", False), (" NO ", False), ("on", True)],
)
def test_create_if_missing_is_a_boolean_defaulting_to_true(
    value: str | None, expected: bool
) -> None:
    """DURABLE_CREATE_IF_MISSING creates a missing store unless set to a false value;
    doctor shows it among the configuration."""
    env = {} if value is None else {"DURABLE_CREATE_IF_MISSING": value}
    assert describe(env)["create_if_missing"] is expected


@pytest.mark.parametrize("backend", ["file", "memory", "cosmos"])
def test_a_malformed_switch_names_the_variable_and_the_accepted_values(backend: str) -> None:
    """A value of DURABLE_CREATE_IF_MISSING that is not a boolean is a ConfigurationError
    naming the variable and what it accepts, whatever the backend (a typo is an error
    even where it would not apply)."""
    env = {
        "DURABLE_STORE": backend,
        "COSMOS_ENDPOINT": "https://acct.documents.azure.com:443/",
        "DURABLE_CREATE_IF_MISSING": "maybe",
    }
    for factory in (ds.store_from_env, ds.async_store_from_env):
        with pytest.raises(ds.ConfigurationError) as err:
            factory(env)
        assert err.value.variable == "DURABLE_CREATE_IF_MISSING"
        assert "DURABLE_CREATE_IF_MISSING='maybe' is not a boolean; use true (default" in str(
            err.value
        )
        assert "also accepted: true/1/yes/on and false/0/no/off" in str(err.value)
