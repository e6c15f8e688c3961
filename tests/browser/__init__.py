"""The browser harness: every page of the built site in Debian's chromium, driven by Python
playwright, offline.

- server.py serves the built site from 127.0.0.1 (files of an overlay folder, the planted
  faults, shadow the site's) and lists its pages from the sitemap;
- visit.py opens a page as a reader's first visit and records what it asked of the network,
  its first screen, layout shifts and diagrams;
- checks.py holds the checks: each takes a loaded page (and what was recorded while it
  loaded) and returns a list of problems, one readable line each; empty means it passed;
- js/ holds the JavaScript the checks run in the page (tests/pages/test_lint.py checks its syntax);
- planted/ holds pages with one fault each, which prove that every check can fail.
"""

from functools import cache
from pathlib import Path

import pytest

from lab.shared.common import ROOT

JS = Path(__file__).resolve().parent / "js"

# The browser tests' per-page table, for the end of the run: on the stash in one process, and
# in BROWSER_TABLE, from where the controller of a pytest-xdist run prints what a worker measured.
BROWSER_REPORT = pytest.StashKey[list]()
BROWSER_TABLE = ROOT / "test-artifacts" / "browser-table.txt"


@cache
def js(name: str) -> str:
    """The source of js/<name>.js, as page.evaluate() or an init script takes it."""
    return (JS / f"{name}.js").read_text(encoding="utf-8")
