"""A store backend of another package passes the contract suite that ships in the
package: the proof that the store interface and the registry are enough to write one.
The reference backend (examples/sqlite_store: SQLite) is installed with pip into a
directory of its own, found through its entry point (``durable_steps.stores``), and
``pytest --pyargs durable_steps.testing.contract --durable-backends=sqlite,sqlite+aes``
runs on it -- sync and async, damaged checkpoints included, the codec on: no secret
in its bytes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "examples" / "sqlite_store"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The backend package, installed by pip into a directory of its own."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(PACKAGE)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PIP_CACHE_DIR": str(build), "TMPDIR": str(build)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(target.glob("durable_sqlite-*.dist-info/entry_points.txt"))
    return target


def pytest_in(site: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip


def test_a_backend_of_another_package_passes_the_shipped_contract_suite(site: Path) -> None:
    """The shipped suite, run as its docs say, from a directory with no tests of ours:
    every test passes on the registered backend, plain and encrypted, sync and async."""
    run = pytest_in(
        site,
        "--pyargs",
        "durable_steps.testing.contract",
        "-rs",
        "--durable-backends=sqlite,sqlite+aes",
        cwd=site,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", run.stdout).group(1))  # type: ignore[union-attr]
    assert passed >= 200 and "skipped" not in run.stdout, run.stdout[-500:]


def test_the_project_tests_of_history_and_items_pass_on_it(site: Path) -> None:
    """History, fork and rewind, and the per-run items (streams, events), which the
    reference backend keeps (both optional for a backend)."""
    run = pytest_in(
        site,
        "tests/history/test_history.py",
        "tests/stores/test_items.py",
        "-rs",
        "--durable-backends=sqlite",
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    skips = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("cosmos-local is not among --durable-backends" in s for s in skips), skips


def test_the_registry_opens_it_by_its_url_and_the_environment(site: Path, tmp_path: Path) -> None:
    """store_for("sqlite:PATH") and DURABLE_STORE=sqlite:PATH open it; a run goes through."""
    code = (
        "import durable_steps as ds, sys\n"
        "db = sys.argv[1]\n"
        "s = ds.store_for('sqlite:' + db)\n"
        "print(type(s.inner).__name__, ds.run('r', [ds.Step('a', lambda st: {'a': 1})], s))\n"
        "e = ds.store_from_env({'DURABLE_STORE': 'sqlite:' + db})\n"
        "print(e.load('r').state)\n"
    )
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "x.db")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # (the library's codec layer around the backend's own store)
    assert done.stdout.splitlines() == ["SqliteStore {'a': 1}", "{'a': 1}"]


def test_a_backend_that_is_not_there_says_which_exist(tmp_path: Path) -> None:
    """A scheme no package registered is no backend: a ConfigurationError naming those
    there are, and the plugin refuses the name before any test runs."""
    import durable_steps as ds

    with pytest.raises(ds.ConfigurationError, match=r"file:\.\.\., memory:\.\.\., cosmos:\.\.\."):
        ds.store_for(f"nosuchdb:{tmp_path / 'x.db'}")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "--pyargs", "durable_steps.testing.contract", "--durable-backends=nosuchdb"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode != 0 and "'nosuchdb' is not a backend" in run.stdout + run.stderr
