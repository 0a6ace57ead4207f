"""The hosted CI workflow: linted by actionlint (a check that can fail), and holding what
the README says it does."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from durable_steps.testing import IMAGE

from ..helpers.servers import ROOT

WORKFLOW = ROOT / ".github/workflows/ci.yml"
LINT = ROOT / "tests/helpers/actionlint.cjs"


def actionlint(path: Path) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        ["node", str(LINT), str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout, done.stderr  # the linter ran (node and the npm package are there)
    return done.returncode, json.loads(done.stdout)


def workflow() -> Any:
    return yaml.safe_load(WORKFLOW.read_text())


def test_actionlint_passes_the_workflow() -> None:
    """actionlint finds nothing wrong in .github/workflows/ci.yml."""
    assert actionlint(WORKFLOW) == (0, [])


def test_actionlint_fails_a_broken_workflow(tmp_path: Path) -> None:
    """The same file with a typo in a matrix reference and an unknown key fails the lint."""
    broken = tmp_path / "ci.yml"
    text = WORKFLOW.read_text()
    text = text.replace("${{ matrix.python }}", "${{ matrix.pyhton }}", 1)
    text = text.replace("timeout-minutes: 30", "timeout-minute: 30", 1)
    broken.write_text(text)
    code, problems = actionlint(broken)
    assert code == 1
    messages = " | ".join(p["message"] for p in problems)
    assert 'property "pyhton" is not defined' in messages
    assert 'unexpected key "timeout-minute"' in messages


def test_workflow_is_least_privilege_and_cancels_superseded_runs() -> None:
    """Read-only token; one run per ref (a newer push cancels a pull request's older run)."""
    wf = workflow()
    assert wf["permissions"] == {"contents": "read"}
    assert "github.ref" in wf["concurrency"]["group"]
    assert "cancel-in-progress" in wf["concurrency"]


def test_linux_jobs_run_every_backend_on_the_pinned_emulator() -> None:
    """Python 3.11-3.13 with the pinned image as a service, waited for on /ready, used
    through DURABLE_TEST_EMULATOR_ENDPOINT, strict; another job starts it itself."""
    jobs = workflow()["jobs"]
    test = jobs["test"]
    assert test["strategy"]["matrix"]["python"] == ["3.11", "3.12", "3.13"]
    service = test["services"]["cosmos"]
    assert service["image"] == IMAGE
    assert service["env"] == {
        "PROTOCOL": "http",
        "ENABLE_EXPLORER": "false",
        "ENABLE_TELEMETRY": "false",
    }
    assert test["env"]["DURABLE_TEST_EMULATOR_ENDPOINT"] == "http://localhost:8081/"
    runs = [s.get("run", "") for s in test["steps"]]
    assert any("curl -fsS http://localhost:8080/ready" in r for r in runs)
    assert runs[-1] == "scripts/test --durable-strict"
    container = jobs["emulator-container"]
    assert "services" not in container and "env" not in container
    assert "--durable-backends=cosmos-emulator --durable-strict" in container["steps"][-1]["run"]


def test_macos_and_windows_run_the_file_store_suite_and_must_pass() -> None:
    """file and memory on macos-latest and windows-latest: the contract suite and the file
    store's own tests, as a required job (no continue-on-error)."""
    job = workflow()["jobs"]["file-store"]
    assert job["strategy"]["matrix"]["os"] == ["macos-latest", "windows-latest"]
    assert "continue-on-error" not in job
    run = job["steps"][-1]["run"]
    assert run.startswith("python -m pytest --durable-backends=file,memory ")
    for module in (
        "stores/test_contract",
        "stores/test_listing",
        "stores/file/test_filestore",
        "stores/file/test_runfile",
        "runner/test_calls",
        "runner/test_timers",
        "runner/test_cancel",
    ):
        assert f"tests/{module}.py" in run
        assert (ROOT / f"tests/{module}.py").is_file()


def test_the_oldest_pydantic_ai_the_extra_accepts_is_tested() -> None:
    """A job installs the lower bound of the [pydantic-ai] extra and runs the
    integration's tests on it (the other jobs get the newest release)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    (bound,) = re.findall(r'pydantic-ai = \["pydantic-ai-slim>=([\d.]+),', pyproject)
    job = workflow()["jobs"]["pydantic-ai-oldest"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert any(f"pydantic-ai-slim[mcp]=={bound}.0" in r or f"=={bound}'" in r for r in runs)
    assert any("tests/integrations" in r for r in runs)


def test_the_oldest_openai_agents_the_extra_accepts_is_tested() -> None:
    """A job installs the lower bound of the [openai-agents] extra and runs the
    integration's tests on it (the other jobs get the newest release)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    (bound,) = re.findall(r'openai-agents = \["openai-agents>=([\d.]+),', pyproject)
    job = workflow()["jobs"]["openai-agents-oldest"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert any(f"'openai-agents=={bound}.0'" in r for r in runs)
    tests = next(r for r in runs if "pytest" in r)
    assert "cosmos-local" in tests
    for module in ("", "_edges", "_processes", "_package"):
        assert f"tests/integrations/test_openai_agents{module}.py" in tests
        assert (ROOT / f"tests/integrations/test_openai_agents{module}.py").is_file()


def test_the_oldest_agent_framework_the_extra_accepts_is_tested() -> None:
    """A job installs the lower bound of the [agent-framework] extra and runs the
    integration's tests on it (the other jobs get the newest release)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    (bound,) = re.findall(r'agent-framework = \["agent-framework-core>=([\d.]+),', pyproject)
    job = workflow()["jobs"]["agent-framework-oldest"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert any(f"'agent-framework-core=={bound}.0'" in r for r in runs)
    tests = next(r for r in runs if "pytest" in r)
    assert "cosmos-local" in tests
    for module in ("", "_processes", "_package"):
        assert f"tests/integrations/test_agent_framework{module}.py" in tests
        assert (ROOT / f"tests/integrations/test_agent_framework{module}.py").is_file()


def test_the_oldest_langgraph_the_extra_accepts_is_tested() -> None:
    """A job installs the lower bounds of the [langgraph] extra (langgraph and the saver
    interface, langgraph-checkpoint) and runs the integration's tests on them."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    ((graph, checkpoint),) = re.findall(
        r'langgraph = \["langgraph>=([\d.]+),<\d+", "langgraph-checkpoint>=([\d.]+),', pyproject
    )
    job = workflow()["jobs"]["langgraph-oldest"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert any(
        f"'langgraph=={graph}.0'" in r and f"'langgraph-checkpoint=={checkpoint}.0'" in r
        for r in runs
    )
    tests = next(r for r in runs if "pytest" in r)
    assert "cosmos-local" in tests
    for module in ("", "_conformance", "_processes", "_package"):
        assert f"tests/integrations/test_langgraph{module}.py" in tests
        assert (ROOT / f"tests/integrations/test_langgraph{module}.py").is_file()
