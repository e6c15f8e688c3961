import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.common import ROOT  # the tests import it from here too

# Lines for the end of the run: tests/test_browser.py puts its per-page table here.
BROWSER_REPORT = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site built once per test session with `mkdocs build --strict`."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    if proc.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}", pytrace=False)
    return out


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(BROWSER_REPORT, None)
    if lines:
        terminalreporter.section("pages in the browser (tests/test_browser.py)")
        for line in lines:
            terminalreporter.write_line(line)
