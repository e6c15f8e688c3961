"""The scheduler of tests/xdist_scheduling.py, driven with stand-in workers: units stay whole,
the built site starts first, and every test runs once."""

from types import SimpleNamespace

import pytest

from tests.xdist_scheduling import SITE, ByPageAndSite, browser_selected, scope_of, start_order

COLLECTION = [
    "docs/attention.md::line 1",
    "docs/attention.md::line 9",
    "tests/snippets/core/test_model.py::test_a",
    "tests/snippets/core/test_model.py::test_b",
    "tests/snippets/core/test_model.py::test_c",
    "tests/pages/test_portability.py::test_pages_hold_under[avx2]",
    "tests/pages/test_portability.py::test_pages_hold_under[plain]",
    "tests/pages/test_site.py::test_build",
    "tests/pages/test_browser.py::test_pages",
    "tests/pages/test_browser.py::test_links",
]


class Worker:
    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[str] = []  # nodeids, in the order the worker got them

    def send_runtest_some(self, indices):
        self.sent += [COLLECTION[i] for i in indices]

    def shutdown(self):
        self.shutting_down = True


def run(workers: int) -> list[Worker]:
    sched = ByPageAndSite(workers)
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    assert sched.collection_is_completed
    sched.schedule()
    done = dict.fromkeys(nodes, 0)
    while not sched.tests_finished:  # each worker finishes its oldest test in hand
        for node in list(sched.nodes):
            if len(sched.pending[node]) >= 2 or (node.shutting_down and sched.pending[node]):
                sched.mark_test_complete(node, COLLECTION.index(node.sent[done[node]]))
                done[node] += 1
    return nodes


def test_scopes():
    assert scope_of("tests/pages/test_browser.py::test_pages") == SITE
    assert scope_of("tests/pages/test_site.py::test_build") == "tests/pages/test_site.py"
    assert scope_of("docs/attention.md::line 9") == "docs/attention.md"
    portability = "tests/pages/test_portability.py::test_pages_hold_under[avx2]"
    assert scope_of(portability) == portability


def test_the_built_site_starts_first_then_the_long_units_then_the_largest():
    units = {}
    for nodeid in COLLECTION:
        units.setdefault(scope_of(nodeid), []).append(nodeid)
    order = start_order(units)
    assert order[0] == SITE
    assert all("test_portability" in scope for scope in order[1:3])
    assert order[3:] == [
        "tests/pages/test_site.py",  # the built site's other tests, once the build is done
        "tests/snippets/core/test_model.py",
        "docs/attention.md",
    ]


def test_every_test_runs_once_and_no_unit_is_split():
    for workers in (1, 2, 4):
        nodes = run(workers)
        sent = [nodeid for node in nodes for nodeid in node.sent]
        assert sorted(sent) == sorted(COLLECTION)
        owner = {}
        for node in nodes:
            for nodeid in node.sent:
                assert owner.setdefault(scope_of(nodeid), node) is node, nodeid
        assert nodes[0].sent[0] == "tests/pages/test_browser.py::test_pages"
        assert all(node.shutting_down for node in nodes)


@pytest.mark.parametrize(
    ("markexpr", "browser"),
    [
        ("", True),
        ("not portability", True),
        ("browser", True),
        ("not browser and not portability", False),  # make test-fast
        ("portability", False),
    ],
)
def test_the_extra_worker_is_for_the_browser_only(markexpr, browser):
    assert browser_selected(markexpr) is browser


FAST = [  # make test-fast's kind of run: no browser
    "tests/snippets/core/test_model.py::test_a",
    "tests/pages/test_take_away.py::test_a",
    "tests/pages/test_site.py::test_build",
    "tests/pages/test_site.py::test_b",
    "tests/pages/test_site.py::test_c",
    "tests/snippets/core/test_model.py::test_b",
    "docs/attention.md::line 1",
]


def fast_run(build_done_after: int) -> dict[str, list[str]]:
    """FAST on two workers; gw1 finishes its tests one by one, and the build's first test
    (gw0's) is done after gw1 has finished ``build_done_after`` of them."""
    sched = ByPageAndSite(2)
    sent: dict[str, list[str]] = {}

    class FastWorker(Worker):
        def send_runtest_some(self, indices):
            sent.setdefault(self.gateway.id, []).extend(FAST[i] for i in indices)

    gw0, gw1 = FastWorker("gw0"), FastWorker("gw1")
    for node in (gw0, gw1):
        sched.add_node(node)
        sched.add_node_collection(node, FAST)
    sched.schedule()
    finished = 0
    while sched.pending[gw1]:
        if finished == build_done_after:
            sched.mark_test_complete(gw0, FAST.index("tests/pages/test_site.py::test_build"))
        sched.mark_test_complete(gw1, sched.pending[gw1][0])
        finished += 1
    return sent


def test_without_the_browser_one_unit_builds_the_site_and_the_others_wait_for_it():
    take_away = "tests/pages/test_take_away.py::test_a"
    late = fast_run(build_done_after=99)  # the build outlasts every other unit
    assert late["gw0"][0] == "tests/pages/test_site.py::test_build"  # the largest: it builds
    assert late["gw1"][-1] == take_away  # the site's other unit: last, when nothing else is
    early = fast_run(build_done_after=0)  # built at once: the queue's order
    assert early["gw1"].index(take_away) < early["gw1"].index("docs/attention.md::line 1")
