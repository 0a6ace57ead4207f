"""The LangGraph integration as a package: loaded only when asked for, a clear error
without its extra or on a version it does not support, the versions it pins."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from durable_steps.integrations import langgraph as integration

PYPROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_import_durable_steps_loads_neither_the_integration_nor_langgraph() -> None:
    done = python(
        "import sys, durable_steps\n"
        "print(sorted(m for m in sys.modules if m.startswith(\n"
        "    ('langgraph', 'langchain', 'durable_steps.integrations.langgraph'))))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_the_import_names_the_pip_command() -> None:
    """Without LangGraph installed, importing the integration raises MissingExtraError
    (an ImportError) with the command that installs the extra."""
    done = python(
        "import sys\n"
        "sys.modules['langgraph.checkpoint.base'] = None  # as if it were not installed\n"
        "import durable_steps as ds\n"
        "try:\n"
        "    import durable_steps.integrations.langgraph\n"
        "except ds.MissingExtraError as e:\n"
        "    assert isinstance(e, ImportError)\n"
        "    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'durable-steps[langgraph]'" in done.stdout


def test_an_unsupported_version_is_refused_at_import() -> None:
    """A langgraph-checkpoint outside the supported range (below, above):
    MissingExtraError at import, naming the range and the installed version."""
    done = python(
        "import importlib.metadata as m, durable_steps as ds\n"
        "for other in ('3.0.1', '5.0.0'):\n"
        "    m.version = lambda name, other=other: other\n"
        "    try:\n"
        "        import durable_steps.integrations.langgraph\n"
        "    except ds.MissingExtraError as e:\n"
        "        print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for i, other in enumerate(["3.0.1", "5.0.0"]):
        assert f"langgraph-checkpoint>=4.1,<5, and {other} is installed" in lines[i]


def test_the_installed_version_is_one_the_extra_pins() -> None:
    """The extra pins the range the module accepts, the dev extra includes it, and the
    installed langgraph-checkpoint is in it."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    (low, high), pin = integration.SUPPORTED, extras["langgraph"]
    assert f"langgraph-checkpoint>={low[0]}.{low[1]},<{high[0]}" in pin
    assert any("langgraph" in e for e in extras["dev"] if e.startswith("durable"))
    installed = tuple(int(p) for p in version("langgraph-checkpoint").split(".")[:2])
    assert low <= installed < high
