"""Chromium's CPU time by check, over the pages of a built site, in one visitor (Linux).

    python -m tests.browser.cpu_by_check SITE_DIR [PATH ...]   # e.g. site attention/ masks/

Each page gets the checks the suite gives it (tests/browser/tiers.py); GUIDE_EVERY_CHECK=1
gives every page every check, to compare.

The suite's own counts cannot see the browser: no test process waits for chromium's
processes, so their CPU is in no test's count (tests/suite_time.py prints the machine's
total beside it). This runs tests/pages/test_browser.py's ``inspect_page`` on every page of
the sitemap (or on the PATHs given) and reads chromium's CPU from /proc around each check.
The search worker builds its index in the background after a load, so some of a load's
CPU lands on the checks that follow it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

from lab.shared.common import ROOT
from tests.browser import server as bs
from tests.browser import tiers
from tests.browser import visit as bv


def chromium_cpu() -> float:
    """CPU seconds of every live chromium process on the machine (user + system)."""
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if "chrom" not in Path(f"/proc/{pid}/comm").read_text():
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def main(site: Path, paths: list[str]) -> None:
    import tests.pages.test_browser as tb

    cpu: Counter = Counter()
    checked = tb._Results.run

    def run(self, name, check, *args):
        before = chromium_cpu()
        try:
            return checked(self, name, check, *args)
        finally:
            cpu[name] += chromium_cpu() - before

    def visit(self, url, *args, **kwargs):
        before = chromium_cpu()
        try:
            return loaded(self, url, *args, **kwargs)
        finally:
            cpu["load"] += chromium_cpu() - before

    loaded = bv.SiteBrowser.visit
    tb._Results.run, bv.SiteBrowser.visit = run, visit
    tb.SCREENSHOTS = Path(tempfile.mkdtemp(prefix="cpu-by-check-"))
    prefix = bs.site_path((site / "sitemap.xml").read_text(encoding="utf-8"))
    server = bs.SiteServer(site, overlay=Path(tempfile.mkdtemp()), prefix=prefix)
    with urllib.request.urlopen(server.base + "sitemap.xml", timeout=10) as res:
        pages = bs.pages_from_sitemap(res.read().decode(), server.base)
    # Each page gets the checks the suite gives it (tests/browser/tiers.py), from the plan of
    # the whole site; GUIDE_EVERY_CHECK=1 gives every page every check (as before issue 33).
    plan = tiers.plan(
        site,
        [u[len(server.base) - 1 :] for u in pages],
        tiers.rotation_key(ROOT),
        tiers.history(ROOT),  # without it every content page would get every check
        ROOT / "docs",
    )
    every = os.environ.get("GUIDE_EVERY_CHECK") == "1"
    pages = (
        [server.base + p.lstrip("/") for p in paths]
        if paths
        else pages + [server.base + "404.html"]
    )
    from playwright.sync_api import sync_playwright

    start, first = time.perf_counter(), chromium_cpu()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=bs.CHROMIUM, args=bs.CHROMIUM_ARGS)
        tab = bv.SiteBrowser(chromium, server.origin)
        for url in pages:
            before = chromium_cpu()
            page = url[len(server.base) - 1 :]
            tb.inspect_page(tab, server, url, every or plan.every_check(page))
            checks = "every check" if every else plan.checks(page)
            print(f"{chromium_cpu() - before:6.1f} s  {page}  {checks}", flush=True)
        total = chromium_cpu() - first
        tab.close()
        chromium.close()
    server.close()
    print(f"chromium: {total:.1f} s of CPU over {len(pages)} pages, "
          f"{time.perf_counter() - start:.0f} s of wall time; by check:")  # fmt: skip
    for name, seconds in cpu.most_common():
        print(f"  {name:<12} {seconds:6.1f} s")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    main(Path(sys.argv[1]), sys.argv[2:])
