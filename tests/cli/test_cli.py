"""The console script as a whole, driven as a real process: one-line errors, logging,
help and version, and what it needs of the platform. (Each group of commands has its
own module: test_cli_demo, test_cli_ops, test_cli_runs.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import durable_steps as ds

from ..helpers.clitools import SCRIPT, Cli

HIDE_AZURE = (
    "import sys\n"
    "for m in ('azure', 'azure.cosmos', 'azure.identity', 'azure.core'): sys.modules[m] = None\n"
)
"""Python code that makes the [cosmos] extra look uninstalled."""


def _python(code: str, env: dict[str, str]) -> Cli:
    """The command line run by ``python -c code`` (which ends by calling main())."""
    return Cli(env, argv=[sys.executable, "-c", code])


@pytest.mark.parametrize(
    ("args", "extra", "says"),
    [
        (["runs", "show", "a/b"], {}, "invalid run id 'a/b'"),
        (["runs", "show", "no-such-run"], {}, "has no checkpoint"),
        (["runs", "show", "job[red]x"], {}, "run 'job[red]x' has no checkpoint"),
        (["runs", "list"], {"DURABLE_STORE": "redis"}, "DURABLE_STORE='redis' is not a backend"),
        (
            ["runs", "list"],
            {
                "DURABLE_STORE": "cosmos",
                "COSMOS_ENDPOINT": "http://127.0.0.1:9/",
                "COSMOS_KEY": "a2V5",
            },
            "cannot reach Cosmos DB",
        ),
        (["migrate", "--to", "s3://bucket"], {}, "is not a store"),
    ],
    ids=["bad-run-id", "missing-run", "markup-in-run-id", "bad-backend", "unreachable", "target"],
)
def test_errors_are_one_clear_line_and_nonzero(
    tmp_path: Path, args: list[str], extra: dict[str, str], says: str
) -> None:
    """Errors exit 1 with one line on stderr, values printed as they are (never read as
    markup), and no traceback (unless --debug)."""
    ds.FileStore(tmp_path).close()  # a store that exists: these errors are about other things
    cli = Cli({"DURABLE_FILE_PATH": str(tmp_path), **extra})
    done = cli(*args)
    assert done.returncode == 1
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    debug = cli("--debug", *args)
    assert "Traceback" in debug.stderr


def test_missing_extra_prints_the_install_command_whole(tmp_path: Path) -> None:
    """Without the [cosmos] extra, asking for Cosmos DB says
    pip install 'durable-steps[cosmos]' -- brackets included -- in one line."""
    env = {"DURABLE_STORE": "cosmos", "COSMOS_ENDPOINT": "https://acct.documents.azure.com/"}
    cli = _python(HIDE_AZURE + "from durable_steps.cli.main import main; main()", env)
    listed = cli("runs", "list")
    assert listed.returncode == 1
    assert listed.stderr.count("\n") == 1
    assert listed.stderr.endswith(": pip install 'durable-steps[cosmos]'\n"), listed.stderr
    doctor = cli("doctor")
    assert doctor.returncode == 1
    assert "✗ open the store: the Cosmos DB store needs the [cosmos] extra" in doctor.stdout
    assert "pip install 'durable-steps[cosmos]'" in doctor.stdout


def test_azure_identity_warnings_only_with_verbose(tmp_path: Path) -> None:
    """Entra ID that finds no credential: one line, not azure-identity's ~14 lines of
    warnings before it; -v shows them."""
    cli = Cli(
        {
            "DURABLE_STORE": "cosmos",
            "COSMOS_ENDPOINT": "https://127.0.0.1:9/",
            "AZURE_CONFIG_DIR": str(tmp_path),  # no az login to find
        }
    )
    quiet = cli("runs", "list")
    assert quiet.returncode == 1
    assert quiet.stderr.startswith("error: ")
    assert quiet.stderr.count("\n") == 1, quiet.stderr
    verbose = cli("-v", "runs", "list")
    assert verbose.returncode == 1
    assert "WARNING azure.identity" in verbose.stderr
    assert verbose.stderr.count("\n") > 5
    assert verbose.stderr.splitlines()[-1] == quiet.stderr.strip()


FLOWS = textwrap.dedent(
    """
    import durable_steps as ds

    FLOW = ds.Workflow("flow", [ds.Step("a", lambda s: {"a": 1}), ds.Step("b", lambda s: {})])
    """
)


def test_verbose_logs_the_library_on_stderr(tmp_path: Path) -> None:
    """--verbose prints the durable_steps logger's INFO lines on stderr (-vv: DEBUG, the
    saves too); without it the library logs nothing."""
    (tmp_path / "flows.py").write_text(FLOWS)
    cli = Cli({"DURABLE_STORE": "file", "DURABLE_FILE_PATH": str(tmp_path / "s")}, cwd=tmp_path)
    logged = []
    for n, flags in enumerate([[], ["-v"], ["-vv"]]):
        with cli.store() as store:
            store.save(ds.Checkpoint(f"r{n}", 0, {"a": 1}, steps=("a",), workflow="flow"))
        done = cli(*flags, "worker", "flows:FLOW", "--once")
        assert done.returncode == 0, done.stderr
        assert f"run r{n} (flow): completed" in done.stdout
        logged.append(done.stderr)
    assert "durable_steps" not in logged[0]
    assert "INFO durable_steps: run 'r1' resumed at step 1" in logged[1]
    assert "DEBUG" not in logged[1]
    assert "INFO durable_steps: run 'r2' completed" in logged[2]
    assert "DEBUG durable_steps: " in logged[2]


def test_the_library_configures_no_logging() -> None:
    """Importing the package (and the CLI module) adds no handler beyond the package
    logger's NullHandler: only main() configures logging, for its own output."""
    code = (
        "import logging, durable_steps, durable_steps.cli.main\n"
        "ours = logging.getLogger('durable_steps').handlers\n"
        "assert [type(h).__name__ for h in ours] == ['NullHandler'], ours\n"
        "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n"
        "assert logging.getLogger('azure').handlers == []\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


WINDOWS = (
    "import os, signal, subprocess, durable_steps\n"
    "for name in ('SIGKILL', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGALRM', "
    "'SIGCHLD', 'SIGPIPE', 'SIGSTOP', 'SIGCONT'):\n"
    "    setattr(signal, '_' + name, getattr(signal, name)); delattr(signal, name)\n"
    "subprocess.Popen.kill = lambda self: os.kill(self.pid, signal._SIGKILL)  # as on Windows\n"
    "from durable_steps.cli.main import main; main()"
)
"""The command line as Windows would run it: the signals Windows lacks are gone, and
Popen.kill works without them (there it is TerminateProcess)."""


def test_demo_and_cli_need_no_posix_only_names(tmp_path: Path) -> None:
    """Without POSIX-only signals the CLI imports, and the demo still kills its worker
    (through Popen.kill) and resumes."""
    done = _python(WINDOWS, {})("demo", "--step-seconds", "0.1", "--json", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line)["event"] for line in done.stdout.splitlines()]
    assert "killed" in events and events[-1] == "finished"


COMMANDS = [
    ("demo",),
    ("doctor",),
    ("migrate",),
    ("worker",),
    ("runs", "list"),
    ("runs", "show"),
    ("runs", "signal"),
    ("runs", "delete"),
    ("runs", "prune"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_says_what_it_does(command: tuple[str, ...]) -> None:
    """--help of each command describes it; those with options to get right show an
    example."""
    done = Cli({})(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: durable-steps {' '.join(command)} ")
    description = done.stdout.split("\n\n")[1]
    assert len(description.split()) >= 6, description
    if command not in (("demo",), ("runs", "delete"), ("runs", "show")):
        text = done.stdout.split("\n", 1)[1].split("Options:")[0]
        assert re.search(rf"durable-steps {' '.join(command)}\b", text), text


def test_version_and_python_m_are_the_same_program() -> None:
    """`python -m durable_steps` is the console script."""
    script = subprocess.run([SCRIPT, "--version"], capture_output=True, text=True, check=True)
    module = Cli({}, argv=[sys.executable, "-m", "durable_steps"])("--version")
    assert script.stdout == module.stdout
    assert script.stdout.startswith("durable-steps, version ")
