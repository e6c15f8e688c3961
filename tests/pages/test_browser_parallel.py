"""The visitors of tests/browser/parallel.py, with stand-in pages (no browser): every page is
visited once, and a visitor that stops answering holds up only its own page."""

import contextlib
import threading
import time

import pytest

from tests.browser.parallel import visit_in_parallel

URLS = [f"/page-{n}/" for n in range(12)]


def visitor(hang_on=(), fail_on=()):
    """Stand-in visitors: each page takes a few milliseconds; one in ``hang_on`` never
    returns (as a stuck playwright call), one in ``fail_on`` raises."""
    release = threading.Event()

    @contextlib.contextmanager
    def open_visitor():
        def inspect(url):
            if url in hang_on:
                release.wait()  # until the test ends
            if url in fail_on:
                raise RuntimeError(f"the browser crashed on {url}")
            time.sleep(0.05)
            return {"page": url, "by": threading.get_ident()}

        yield inspect

    return open_visitor, release


def test_every_page_once_by_all_visitors():
    open_visitor, _ = visitor()
    visits = visit_in_parallel(URLS, open_visitor, visitors=3, limit_s=5, poll_s=0.01)
    assert sorted(visits.reports) == sorted(URLS) and visits.left == [] == visits.stuck
    assert all(visits.reports[u]["page"] == u for u in URLS)
    assert len({r["by"] for r in visits.reports.values()}) > 1  # side by side


def test_a_stuck_visitor_holds_up_only_its_page():
    open_visitor, release = visitor(hang_on={"/page-2/"})
    start = time.monotonic()
    visits = visit_in_parallel(URLS, open_visitor, visitors=2, limit_s=0.3, poll_s=0.01)
    release.set()
    assert visits.left == ["/page-2/"]  # the other visitor did all the rest
    assert sorted(visits.reports) == sorted(set(URLS) - {"/page-2/"})
    assert len(visits.stuck) == 1 and visits.stuck[0].startswith("/page-2/\n")
    assert "release.wait()" in visits.stuck[0]  # where it is stuck, from its stack
    assert time.monotonic() - start < 3


def test_every_visitor_stuck_leaves_the_rest_undone():
    open_visitor, release = visitor(hang_on={"/page-0/", "/page-1/"})
    visits = visit_in_parallel(URLS, open_visitor, visitors=2, limit_s=0.2, poll_s=0.01)
    release.set()
    assert visits.left == URLS and visits.reports == {} and len(visits.stuck) == 2


def test_an_error_in_a_visitor_is_raised():
    open_visitor, _ = visitor(fail_on={"/page-5/"})
    with pytest.raises(RuntimeError, match="crashed on /page-5/"):
        visit_in_parallel(URLS, open_visitor, visitors=2, limit_s=5, poll_s=0.01)
