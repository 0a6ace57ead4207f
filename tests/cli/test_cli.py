"""The console script as a whole, driven as a real process against the file store and
cosmos-local: one-line errors, logging, the demo, doctor and migrate. (`runs ...`
has its own module, test_cli_runs.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.cli import ops as cli_ops
from durable_steps.testing import CosmosEndpoint

from ..helpers.clitools import CLEAN, SCRIPT, Cli, store_cli, unique


@pytest.fixture(params=["file", "cosmos-local"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    yield from store_cli(request, tmp_path)


def _seed(cli: Cli, run_id: str) -> None:
    with cli.store() as store:
        ds.run(
            run_id, [ds.Step("a", lambda s: {"a": 1}), ds.Step("b", lambda s: {"b": "β"})], store
        )


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


def test_demo_crashes_then_resumes_only_the_rest(cli: Cli, tmp_path: Path) -> None:
    """The demo's first attempt is killed in summarise; the second skips the two
    checkpointed steps and runs only summarise (attempt 2) and write."""
    extra = ["--dir", str(tmp_path / "demo")] if cli.env["DURABLE_STORE"] == "file" else []
    done = cli("demo", "--step-seconds", "0.2", "--json", *extra)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [(e["event"], e.get("step")) for e in events]
    killed = kinds.index(("killed", "summarise"))
    first, second = kinds[:killed], kinds[killed + 1 :]
    assert first == [
        ("start", "retrieve"),
        ("done", "retrieve"),
        ("start", "call_tool"),
        ("done", "call_tool"),
        ("start", "summarise"),
    ]
    assert events[killed]["checkpointed"] == ["retrieve", "call_tool"]
    assert second == [
        ("skip", "retrieve"),
        ("skip", "call_tool"),
        ("start", "summarise"),
        ("done", "summarise"),
        ("start", "write"),
        ("done", "write"),
        ("finished", None),
    ]
    retry = [e for e in events if e["event"] == "start" and e["step"] == "summarise"]
    assert [e["attempt"] for e in retry] == [1, 2]
    assert retry[0]["key"] == retry[1]["key"]


def test_demo_reads_well_and_its_last_line_works_from_a_clone(tmp_path: Path) -> None:
    """The human output tells the story (the kill, what was skipped, the time saved), and
    its last line is a command that works where scripts/demo ran it: from a clone whose
    .venv/bin is not on PATH."""
    clone = tmp_path / "clone"
    (clone / ".venv").parent.mkdir()
    (clone / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)
    python = clone / ".venv" / "bin" / Path(sys.executable).name
    path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    demo = Cli({"PATH": path}, cwd=clone, argv=[str(python), "-m", "durable_steps"])
    done = demo("demo", "--step-seconds", "0.1", "--crash-at", "write", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for text in ("killed (SIGKILL)", "skipped: checkpointed", "finished work", "idempotency_key"):
        assert text in done.stdout, text
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("Inspect the checkpoint: DURABLE_FILE_PATH=")
    command = last.removeprefix("Inspect the checkpoint: ")
    assert " .venv/bin/durable-steps runs show demo-" in command
    shown = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=clone,
        env={**CLEAN, "PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "status    completed" in shown.stdout
    assert Cli({})("demo", "--crash-at", "nope").returncode == 2


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
    """A run too large for Cosmos DB and an unreadable one are reported and skipped; the
    others are copied, and the exit status is 1 at the end."""
    laptop = tmp_path / "laptop"
    with ds.FileStore(laptop) as files:
        for run_id in ("a-first", "c-huge", "d-last"):
            body = "x" * (3 * 1024 * 1024) if run_id == "c-huge" else "fine"
            ds.run(run_id, [ds.Step("s", lambda s, body=body: {"body": body})], files)
        files.file_for("b-broken").write_bytes(b"{")
    fresh = cosmos_local.fresh()
    try:
        cli = Cli({k: v for k, v in fresh.env().items() if k != "DURABLE_STORE"})
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


def test_migrate_from_files_to_cosmos(cosmos_local: Any, run_id: str, tmp_path: Path) -> None:
    """Laptop files to Cosmos DB: --from file:PATH --to cosmos."""
    files = ds.FileStore(tmp_path / "laptop")
    ds.run(run_id, [ds.Step("a", lambda s: {"x": 1})], files)
    fresh = cosmos_local.fresh()
    try:
        cli = Cli({k: v for k, v in fresh.env().items() if k != "DURABLE_STORE"})
        out = cli.json("migrate", "--from", f"file:{tmp_path / 'laptop'}", "--to", "cosmos")
        assert out["copied"] == [run_id]
        with ds.store_from_env(fresh.env()) as store:
            there = store.load(run_id)
        assert there is not None
        assert there.state == {"x": 1}
    finally:
        fresh.drop()


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


class _Failing:
    """A real file store whose saves fail like an unreachable backend after ``ok`` of them."""

    def __init__(self, path: Path, ok: int) -> None:
        self.store, self.ok = ds.FileStore(path), ok

    def __enter__(self) -> _Failing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def save(self, cp: ds.Checkpoint) -> ds.Checkpoint:
        if self.ok == 0:
            raise ds.StoreError("cannot reach the store", status_code=None)
        self.ok -= 1
        return self.store.save(cp)


def test_migrate_stops_when_the_target_store_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure of a store itself (not of one run) stops migrate, which reports what it
    copied and where it stopped, and exits 1; the runs after it are not tried."""
    with ds.FileStore(tmp_path / "src") as src:
        for run_id in ("a", "b", "c"):
            ds.run(run_id, [ds.Step("s", lambda s: {"x": 1})], src)
    target = _Failing(tmp_path / "dst", ok=1)
    stores = {"env": ds.FileStore(tmp_path / "src"), "file:dst": target}
    monkeypatch.setattr(cli_ops, "store_for", stores.__getitem__)
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
