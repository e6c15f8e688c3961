"""Which tests share a pytest-xdist worker (pytest.ini runs the suite on every core, up to four).

A page's blocks share one namespace and run in order, so a page goes to one worker. The tests
that use the built site share its session fixtures (one build, one browser), so they go to one
worker together. Each run of the pages under another CPU setting (tests/test_portability.py) is
a process of its own and may go anywhere. Everything else is grouped by module, so that
module-scoped fixtures are built once.

xdist's own `--dist loadgroup` cannot do this with pytest 9.2: it renames grouped tests through
an attribute (`item._nodeid`) that pytest 9 no longer reads, and the groups are ignored.

The built site's tests are the run's longest chain (a build, then every page in a real browser,
one after another), so the whole run lasts as long as they do. Every other test runs at a lower
CPU priority (and so do the processes it starts): it takes the CPU only when they leave it.
"""

import contextlib
import os

import pytest

SHARE_THE_BUILT_SITE = {
    "tests/test_site.py",
    "tests/test_browser.py",
    "tests/hooks/test_explorer_data.py",
    "tests/hooks/test_notebook_cache.py",
    "tests/lab/test_models.py",
    "tests/pages/test_see_attention.py",
    "tests/pages/test_attention_explorer.py",
}
ONE_PER_WORKER = {"tests/test_portability.py"}


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: tests of one unit run in one worker, in order."""
    file = nodeid.split("::", 1)[0]
    if file in SHARE_THE_BUILT_SITE:
        return "the built site"
    if file in ONE_PER_WORKER:
        return nodeid
    return file  # a page, or a test module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByPageAndSite(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByPageAndSite(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a test's fixtures start anything: the built site's tests at the normal priority,
    the rest at a lower one (`nice` 10). Only under xdist, where the two share the cores."""
    if not hasattr(item.config, "workerinput"):
        return
    niceness = 0 if scope_of(item.nodeid) == "the built site" else 10
    with contextlib.suppress(OSError):  # raising it back to 0 needs root; CI runs as root
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
