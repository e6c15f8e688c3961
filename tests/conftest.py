import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.common import ROOT
from tests.browser import BROWSER_REPORT, BROWSER_TABLE


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


@pytest.fixture(scope="session")
def browser():
    """One chromium (Debian's, driven by playwright) for every browser test of the session.

    Without it the test skips with a line saying what to install; REQUIRE_BROWSER=1 (CI)
    makes that a failure instead.
    """
    from tests.browser import server as bs

    missing = bs.missing_browser()
    if missing:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests need {missing}; REQUIRE_BROWSER=1 makes that a failure")
        pytest.skip(f"browser tests need {missing}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=bs.CHROMIUM, args=bs.CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def site_server(built_site, tmp_path_factory):
    """The built site on 127.0.0.1, at the path of its site_url; pages written to
    ``site_server.overlay`` are served too."""
    from tests.browser import server as bs

    prefix = bs.site_path((built_site / "sitemap.xml").read_text(encoding="utf-8"))
    overlay = tmp_path_factory.mktemp("overlay")
    server = bs.SiteServer(built_site, overlay=overlay, prefix=prefix)
    yield server
    server.close()


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # this process prints the summary
        BROWSER_TABLE.unlink(missing_ok=True)  # a table left by an earlier run is not this one's


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(BROWSER_REPORT, None)
    if lines is None and BROWSER_TABLE.exists():  # measured in an xdist worker
        lines = BROWSER_TABLE.read_text(encoding="utf-8").splitlines()
    if lines:
        terminalreporter.section("pages in the browser (tests/pages/test_browser.py)")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def site_browser(browser, site_server):
    """The one tab all page checks share (so the cache warms up as for a reader)."""
    from tests.browser.visit import SiteBrowser

    tab = SiteBrowser(browser, site_server.origin)
    yield tab
    tab.close()
