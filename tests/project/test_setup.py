"""The browser is installed for the suite, not for the demo: scripts/demo runs no browser
test, so a fresh machine's first command must not wait for apt-get; scripts/test runs
scripts/browser, which installs Debian's chromium where none is found."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]


def run_browser_script(tmp_path: Path, *, chromium: bool) -> tuple[str, list[str]]:
    """Run the real scripts/browser with a stand-in apt-get that logs what it is asked, an
    `id` that says root (so the install branch is taken wherever the test runs) and, when
    `chromium`, a browser at DURABLE_TEST_CHROMIUM."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    browser = tmp_path / "chromium"
    tools = {"apt-get": f'#!/bin/sh\necho "$@" >> {log}\n', "id": "#!/bin/sh\necho 0\n"}
    if chromium:
        tools[browser.name] = "#!/bin/sh\n"
    for name, body in tools.items():
        path = (tmp_path if name == browser.name else bin_dir) / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    for name in ("env", "true"):
        found = shutil.which(name)
        assert found, name
        (bin_dir / name).symlink_to(found)
    bash = shutil.which("bash")
    assert bash
    done = subprocess.run(
        [bash, str(ROOT / "scripts" / "browser")],
        env={"PATH": str(bin_dir), "DURABLE_TEST_CHROMIUM": str(browser), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr, log.read_text().splitlines() if log.exists() else []


def test_the_browser_script_installs_chromium_where_none_is_found(tmp_path: Path) -> None:
    """No Chromium anywhere: it asks apt-get for Debian's chromium and says so."""
    stderr, apt = run_browser_script(tmp_path, chromium=False)
    assert "installing Debian's chromium" in stderr
    assert any(line.split()[:1] == ["install"] and "chromium" in line.split() for line in apt), apt


def test_the_browser_script_leaves_an_installed_chromium_alone(tmp_path: Path) -> None:
    """A Chromium already there: nothing is installed, nothing printed."""
    stderr, apt = run_browser_script(tmp_path, chromium=True)
    assert (stderr, apt) == ("", [])


def test_the_demo_needs_no_browser_and_the_suite_gets_one() -> None:
    """scripts/demo runs only scripts/setup, which installs no browser; scripts/test runs
    scripts/browser before the tests."""
    demo = (ROOT / "scripts" / "demo").read_text()
    setup = (ROOT / "scripts" / "setup").read_text()
    suite = (ROOT / "scripts" / "test").read_text().splitlines()
    assert "scripts/browser" not in demo and "apt-get" not in setup
    before_tests = suite[: next(i for i, line in enumerate(suite) if "pytest" in line)]
    assert "scripts/browser" in " ".join(before_tests)
