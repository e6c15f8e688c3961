"""Pages visited by several browsers side by side, from one queue, with a watch for a
visitor that stops answering.

A playwright call has been seen, a few times on a loaded machine, never to return while its
browser sat idle. Each visitor therefore runs in a thread of its own and takes its pages from
a shared queue: a stuck one holds up only the page it is on. Once every visitor still running
has been on its page for longer than the limit, the run goes on without them, and says which
pages were left and where each stuck visitor's thread was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable

# A visitor: a context manager (its browser open while inside) giving the function that
# inspects one URL and returns its report.
Visitor = Callable[[], contextlib.AbstractContextManager[Callable[[str], dict]]]


@dataclasses.dataclass
class Visits:
    reports: dict[str, dict]  # url -> report, for the pages the visitors finished
    left: list[str]  # pages no visitor finished (stuck on them, or never reached), in order
    stuck: list[str]  # per stuck visitor: its page, and the last lines of its stack


def visit_in_parallel(
    urls: list[str], visitor: Visitor, visitors: int, limit_s: float, poll_s: float = 0.5
) -> Visits:
    """Inspect every url with ``visitors`` visitors side by side; an error in a visitor is
    raised here. A visitor on one page for over ``limit_s`` seconds counts as stuck."""
    todo: queue.Queue = queue.Queue()
    for url in urls:
        todo.put(url)
    reports: dict[str, dict] = {}
    errors: list[BaseException] = []
    at: dict[int, tuple[str, float]] = {}  # thread -> the page it is on, since when

    def work() -> None:
        try:
            with visitor() as inspect:
                while True:
                    try:
                        url = todo.get_nowait()
                    except queue.Empty:
                        return
                    at[threading.get_ident()] = (url, time.monotonic())
                    reports[url] = inspect(url)
                    del at[threading.get_ident()]
        except Exception as err:  # raised again below, in the caller's thread
            errors.append(err)

    def stuck(thread: threading.Thread) -> bool:
        since = at.get(thread.ident)
        return since is not None and time.monotonic() - since[1] > limit_s

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, visitors))]
    for thread in threads:
        thread.start()
    while not errors and not all(stuck(t) for t in threads if t.is_alive()):
        time.sleep(poll_s)
    if errors:
        raise errors[0]
    frames = sys._current_frames()
    where = [
        f"{at[t.ident][0]}\n" + "".join(traceback.format_stack(frames[t.ident])[-6:])
        for t in threads
        if t.is_alive() and t.ident in at and t.ident in frames
    ]
    done = dict(reports)  # a stuck visitor may still finish later: not counted
    return Visits(done, [u for u in urls if u not in done], where)
