"""Which tests share a pytest-xdist worker, and which start first.

A page's blocks share one namespace and run in order, so a page goes to one worker. Each run
of the pages under another CPU setting (tests/pages/test_portability.py) is a process of its
own and may go anywhere. Everything else is grouped by module, so that module-scoped fixtures
are built once. The site is built once for all workers (tests/conftest.py's built_site), so
the modules that use it may run in several workers at once.

The run lasts at least as long as its longest unit, the browser's visit of every page of the
built site (a build, then the visits): it starts first, and the other units follow longest
first, the built site's others after the long ones (by then the build is done), so that no long
unit starts last while the other worker idles. Every other test runs at a lower CPU priority
(and so do the processes it starts): it takes the CPU only when the browser's unit leaves it.

Without the browser (`make test-fast`, a worker per core) the largest unit of the built site
starts first and builds it; the built site's other units wait in the queue until its first
test is done (the build with it), so that no worker sits on the build's lock while other
work is left.

The scheduler implements xdist's public `Scheduling` protocol (xdist.scheduler.protocol),
handed over through the `pytest_xdist_make_scheduler` hook, rather than overriding a private
method of one of xdist's own schedulers. (`--dist loadgroup` cannot group: with pytest 9.2 it
renames tests through `item._nodeid`, which pytest no longer reads.)
"""

from __future__ import annotations

import contextlib
import os

import pytest

SITE = "the built site in the browser"  # the longest unit: every page visited
IN_THE_BROWSER = "tests/pages/test_browser.py"
# Other tests of the built site: one build serves every worker (tests/conftest.py's
# built_site), so each is a unit of its own, started once the build is under way.
USE_THE_BUILT_SITE = {
    "tests/pages/test_site.py",
    "tests/pages/test_browser_planted.py",
    "tests/hooks/test_explorer_data.py",
    "tests/hooks/test_notebook_cache.py",
    "tests/hooks/test_search_math.py",
    "tests/lab/test_model_cache.py",
    "tests/pages/test_see_attention.py",
    "tests/pages/test_attention_explorer.py",
    "tests/pages/test_downloads.py",
    "tests/pages/test_take_away.py",
    "tests/pages/test_results.py",
}
ONE_PER_WORKER = {"tests/pages/test_portability.py"}
# Known long units, started right after the built site (each runs every page in a new process).
LONG_FIRST = ("tests/pages/test_portability.py", "tests/pages/test_downloads.py")


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: tests of one unit run in one worker, in order."""
    file = nodeid.split("::", 1)[0]
    if file == IN_THE_BROWSER:
        return SITE
    if file in ONE_PER_WORKER:
        return nodeid
    return file  # a page, or a test module


def start_order(units: dict[str, list[str]]) -> list[str]:
    """The browser's visit of the built site first, then the known long units, then the other
    tests of the built site, then the rest; each group by size, largest first
    (the order is stable, so equal units keep their collection order)."""

    def rank(scope: str) -> tuple[int, int]:
        if scope == SITE:
            return (0, 0)
        if scope.split("::", 1)[0] in LONG_FIRST:
            return (1, 0)
        if scope in USE_THE_BUILT_SITE:  # after the long units: the build is done by then
            return (2, -len(units[scope]))
        return (3, -len(units[scope]))

    return sorted(units, key=rank)


class ByPageAndSite:
    """Whole units to each worker, never split: a worker gets its next unit when fewer than
    two of its tests are left."""

    def __init__(self, numnodes: int, log=None):
        self.numnodes = numnodes  # how many workers will send a collection
        self.log = log.bypageandsite if log is not None else (lambda *args: None)
        self.collections: dict = {}  # node -> the nodeids it collected
        self.pending: dict = {}  # node -> indices (into its collection) sent but not done
        self.queue: list[list[str]] = []  # units not yet sent, in start order
        self.collection: list[str] | None = None
        # Without the browser's unit: the first test of the unit that builds the site, until
        # it is done (None: no unit waits for the build).
        self.building: str | None = None

    @property
    def nodes(self) -> list:
        return list(self.pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.collections) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.queue:
            return False
        return all(len(pending) < 2 for pending in self.pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.queue) or any(self.pending.values())

    def add_node(self, node) -> None:
        self.pending[node] = []

    def add_node_collection(self, node, collection) -> None:
        if self.collection is not None and list(collection) != self.collection:
            self.log(f"worker {node.gateway.id} collected other tests; it gets no work")
            return
        self.collections[node] = list(collection)

    def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
        self.pending[node].remove(item_index)
        if self.building == self.collections[node][item_index]:
            self.building = None  # the site is built: its other units may go
            for other in self.nodes:
                if other is not node:
                    self._feed(other)
        self._feed(node)

    def mark_test_pending(self, item: str):
        raise NotImplementedError

    def remove_pending_tests_from_node(self, node, indices) -> None:
        raise NotImplementedError

    def remove_node(self, node) -> str | None:
        """A worker left: if it crashed, its unfinished tests go back to the front of the queue
        (the crashed test is reported by xdist) and the others take them."""
        pending = self.pending.pop(node, [])
        collection = self.collections.get(node)
        if not pending:
            return None
        crashed = collection[pending[0]]
        self.queue.insert(0, [collection[i] for i in pending[1:]])
        if not self.queue[0]:
            self.queue.pop(0)
        for other in self.nodes:
            self._feed(other)
        return crashed

    def schedule(self) -> None:
        if self.collection is not None:  # a worker joined later
            for node in self.nodes:
                self._feed(node)
            return
        collections = list(self.collections.values())
        if any(c != collections[0] for c in collections[1:]):
            raise pytest.UsageError("the xdist workers collected different tests")
        self.collection = collections[0]
        units: dict[str, list[str]] = {}
        for nodeid in self.collection:
            units.setdefault(scope_of(nodeid), []).append(nodeid)
        order = start_order(units)
        if SITE not in units:  # the largest unit of the built site builds it, first
            builders = [scope for scope in order if scope in USE_THE_BUILT_SITE]
            if builders:
                order.remove(builders[0])
                order.insert(0, builders[0])
                self.building = units[builders[0]][0]
        self.queue = [units[scope] for scope in order]
        for node in self.nodes[len(self.queue) :]:  # more workers than units
            self.pending.pop(node)
            node.shutdown()
        for node in self.nodes:
            self._feed(node)

    def _feed(self, node) -> None:
        # Two tests in hand: a worker runs a test only once it knows the next one (pytest's
        # `nextitem`), so with one it would wait for work that never comes.
        if node.shutting_down:
            return
        while len(self.pending[node]) < 2 and self.queue:
            unit = self.queue.pop(self._next())
            position = {nodeid: i for i, nodeid in enumerate(self.collections[node])}
            indices = [position[nodeid] for nodeid in unit]
            self.pending[node].extend(indices)
            node.send_runtest_some(indices)
        if not self.queue:
            node.shutdown()  # the worker finishes what it holds, then stops

    def _next(self) -> int:
        """The queue's first unit, passing over those of the built site while it is being
        built (unless nothing else is left: then waiting on the build is all there is)."""
        if self.building is None:
            return 0
        for i, unit in enumerate(self.queue):
            if unit[0] == self.building or scope_of(unit[0]) not in USE_THE_BUILT_SITE:
                return i
        return 0


def browser_selected(markexpr: str) -> bool:
    """Whether `-m markexpr` leaves the browser's tests in the run (`make test-fast` does not)."""
    if not markexpr:
        return True
    from _pytest.mark.expression import Expression  # how pytest itself reads -m

    return Expression.compile(markexpr).evaluate(lambda name, **kwargs: name == "browser")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, and one more for the browser's unit, which spends much
    of its time waiting (for a page to draw, for the network to go quiet, at a reader's
    scrolling pace) while the others can use the cores. Without the browser (`-m "not
    browser"`) no more workers than cores: each worker collects every test (about 10 s of CPU:
    torch, transformers, mkdocs' config), and a third one on two cores only adds that.
    pytest.ini's --maxprocesses caps it; GUIDE_XDIST_WORKERS sets it."""
    if os.environ.get("GUIDE_XDIST_WORKERS"):
        return int(os.environ["GUIDE_XDIST_WORKERS"])
    cores = len(os.sched_getaffinity(0))
    return cores + 1 if browser_selected(config.option.markexpr) else cores


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.workermanage import parse_tx_spec_config

    return ByPageAndSite(len(parse_tx_spec_config(config)), log)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a test's fixtures start anything: the built site's tests at the normal priority,
    the rest at a lower one (`nice` 10). Only under xdist, where the two share the cores."""
    if not hasattr(item.config, "workerinput"):
        return
    niceness = 0 if scope_of(item.nodeid) == SITE else 10
    with contextlib.suppress(OSError):  # raising it back to 0 needs root; CI runs as root
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
