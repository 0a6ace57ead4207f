"""The OpenAI Agents integration as a package: loaded only when asked for, a clear error
without its extra or on a version it does not support, the versions it pins, and how it
installs its runner."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner

from durable_steps.integrations import openai_agents as integration

PYPROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_import_durable_steps_loads_no_integration() -> None:
    """``import durable_steps`` imports neither the integration nor the SDK."""
    done = python(
        "import sys, durable_steps\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m == 'agents' or m.startswith(('agents.', 'durable_steps.integrations'))))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_the_import_names_the_pip_command() -> None:
    """Without openai-agents installed, importing the integration raises MissingExtraError
    (an ImportError) with the command that installs the extra."""
    done = python(
        "import sys\n"
        "sys.modules['agents'] = None  # as if it were not installed\n"
        "import durable_steps as ds\n"
        "try:\n"
        "    import durable_steps.integrations.openai_agents\n"
        "except ds.MissingExtraError as e:\n"
        "    assert isinstance(e, ImportError)\n"
        "    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'durable-steps[openai-agents]'" in done.stdout


def test_an_unsupported_version_is_refused_at_import() -> None:
    """An openai-agents version outside the supported range (below, above): MissingExtraError
    at import, naming the range and the installed version, and no runner installed."""
    done = python(
        "import agents, durable_steps as ds\n"
        "from agents.run import get_default_agent_runner\n"
        "for other in ('0.19.4', '0.25.0'):\n"
        "    agents.__version__ = other\n"
        "    try:\n"
        "        import durable_steps.integrations.openai_agents\n"
        "    except ds.MissingExtraError as e:\n"
        "        print(e)\n"
        "print(type(get_default_agent_runner()).__name__)\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for i, other in enumerate(["0.19.4", "0.25.0"]):
        assert f">=0.20,<0.25, and {other} is installed" in lines[i]
    assert lines[-1] == "AgentRunner"


def test_the_installed_version_is_one_the_extra_pins() -> None:
    """The extra pins the range the module accepts, the dev extra (what scripts/test and
    CI install) includes it, and the installed openai-agents is in it."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    (low, high), pin = integration.SUPPORTED, extras["openai-agents"]
    assert pin == [f"openai-agents>={low[0]}.{low[1]},<{high[0]}.{high[1]}"]
    assert any("openai-agents" in extra for extra in extras["dev"] if extra.startswith("durable"))
    installed = tuple(int(p) for p in re.findall(r"\d+", version("openai-agents"))[:2])
    assert low <= installed < high


def test_the_public_surface() -> None:
    """The integration exports its runner and install(), nothing else."""
    assert integration.__all__ == ["DurableRunner", "install"]
    assert "step" in (integration.DurableRunner.__doc__ or "")


def test_importing_installs_the_runner_chained_to_the_default_it_replaces() -> None:
    """The import made a DurableRunner the SDK's default; install() again keeps it, and
    after something else replaced the default, install() chains to that."""
    installed = get_default_agent_runner()
    assert isinstance(installed, integration.DurableRunner)
    assert integration.install() is installed
    other = AgentRunner()
    set_default_agent_runner(other)
    try:
        again = integration.install()
        assert get_default_agent_runner() is again and again.inner is other
    finally:
        set_default_agent_runner(installed)
