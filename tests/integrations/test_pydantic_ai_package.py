"""The Pydantic AI integration as a package: loaded only when asked for, a clear error
without its extra or on a version it does not support, the versions it pins, and the
call names it gives each kind of operation."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from pydantic_ai.durable_exec import (
    CapabilityOperationId,
    EventStreamHandlerId,
    ModelCompactMessagesId,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)

from durable_steps.integrations import pydantic_ai as integration

PYPROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_import_durable_steps_loads_no_integration() -> None:
    """``import durable_steps`` imports neither the integration nor Pydantic AI."""
    done = python(
        "import sys, durable_steps\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.startswith(('pydantic_ai', 'durable_steps.integrations'))))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_the_import_names_the_pip_command() -> None:
    """Without pydantic-ai installed, importing the integration raises MissingExtraError
    (an ImportError) with the command that installs the extra."""
    done = python(
        "import sys\n"
        "sys.modules['pydantic_ai'] = None  # as if it were not installed\n"
        "import durable_steps as ds\n"
        "try:\n"
        "    import durable_steps.integrations.pydantic_ai\n"
        "except ds.MissingExtraError as e:\n"
        "    assert isinstance(e, ImportError)\n"
        "    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'durable-steps[pydantic-ai]'" in done.stdout


@pytest.mark.parametrize("other", ["2.61.0", "3.0.0"])
def test_an_unsupported_version_is_refused_at_import(other: str) -> None:
    """A pydantic-ai version outside the supported range: MissingExtraError at import,
    naming the range and the installed version."""
    done = python(
        "import pydantic_ai, durable_steps as ds\n"
        f"pydantic_ai.__version__ = {other!r}\n"
        "try:\n"
        "    import durable_steps.integrations.pydantic_ai\n"
        "except ds.MissingExtraError as e:\n"
        "    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert f">=2.62,<3, and {other} is installed" in done.stdout


def test_the_installed_version_is_one_the_extra_pins() -> None:
    """The extra pins the range the module accepts, the dev extra (what scripts/test and
    CI install) includes it, and the installed pydantic-ai-slim is in it."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    (low, high), pin = integration.SUPPORTED, extras["pydantic-ai"]
    assert pin == [f"pydantic-ai-slim>={low[0]}.{low[1]},<{high[0]}"]
    assert any("pydantic-ai" in extra for extra in extras["dev"] if extra.startswith("durable"))
    installed = tuple(int(p) for p in re.findall(r"\d+", version("pydantic-ai-slim"))[:2])
    assert low <= installed < high


def test_the_public_surface() -> None:
    """The integration exports Durable and nothing else."""
    assert integration.__all__ == ["Durable"]
    assert "step" in (integration.Durable.__doc__ or "")


def test_each_kind_of_operation_has_its_call_name() -> None:
    """Call names by kind and tool name, through Pydantic AI's own invocation names (the
    one object of theirs not exported by name, rebuilt with ``dataclasses.replace``: this
    fails if it stops being a dataclass with ``operation_name``)."""
    names = integration._Names("agent")

    def name(op: object, label: str | None = None) -> str:
        return names.invocation_name(op, label=label).operation_name  # type: ignore[arg-type]

    assert name(ModelRequestId(None, model_name="m")) == "model.request"
    assert name(ModelRequestId(None, streaming=True, model_name="m")) == "model.request_stream"
    assert name(ModelRequestId("alt", model_name="m")) == "model.request:alt"
    assert name(ModelCompactMessagesId(None, model_name="m")) == "model.compact_messages"
    assert name(ToolsetCallToolId("function", toolset_id="<agent>"), "add") == "tool.add"
    assert name(ToolsetCallToolId("mcp", toolset_id="fs"), "read") == "tool.read"
    assert (
        name(ToolsetValidateToolArgumentsId("function", toolset_id="x"), "add")
        == "tool.add.validate_args"
    )
    assert name(ToolsetGetToolsId("mcp", toolset_id="fs")) == "toolset.fs.get_tools"
    assert name(ToolsetGetInstructionsId("fs")) == "toolset.fs.get_instructions"
    assert name(EventStreamHandlerId()) == "event_stream_handler"
    assert name(CapabilityOperationId("memo", operation="save")) == "capability.memo.save"
