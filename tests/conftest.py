import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.shared.common import ROOT
from tests.browser import BROWSER_REPORT, BROWSER_TABLE


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site built once per run with `mkdocs build --strict`.

    Under pytest-xdist every worker that needs it shares one build: the first to ask builds
    it into the run's common temporary folder while holding a lock, the others wait on the
    lock and read it (as pytest-xdist's documentation does for session fixtures). So the
    tests of the built site can run in several workers at once.
    """
    common = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        common = common.parent  # .../pytest-N/popen-gwK -> .../pytest-N, shared by the workers
    out, done = common / "built-site", common / "built-site.done"
    with open(common / "built-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            failed = common / "built-site.failed"
            if failed.exists():
                pytest.fail(failed.read_text(encoding="utf-8"), pytrace=False)
            proc = subprocess.run(
                [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
            )
            if proc.returncode != 0:
                message = f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
                failed.write_text(message, encoding="utf-8")  # the other workers say it too
                pytest.fail(message, pytrace=False)
            done.touch()
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
