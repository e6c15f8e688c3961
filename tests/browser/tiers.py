"""Which checks each page of the built site gets: the decision of issue 33.

The API reference pages (the pages under reference/ whose article mkdocstrings wrote) are one
template filled from docstrings. Each of them gets the cheap checks, CHEAP: it is served and
renders, no console error or failed request, every link and #anchor resolves, its headings
hold together, no raw TeX, no sideways scroll at 390 px. The expensive ones (axe, screenshots,
phone legibility, formula sizes, copy room and the copy click, contrast, figures, the dark
pass) run on three of them, chosen from the built site before any page is opened:

1. the largest (the most bytes of built HTML: the template at its longest);
2. the one with the most formulas (MathJax's marks, ``class="arithmatex"``) among the others;
   while no API page has a formula (as on 2026-12-01: the docstrings write their maths as code
   and Unicode), this slot goes to the rotation too;
3. one by a fixed rotation of the commit: of the API pages not chosen above, sorted by path,
   the one at ``int(HEAD, 16) % len(them)``, HEAD being ``git rev-parse HEAD`` (and, while
   the slot of 2. is free, the one after it, wrapping round). Each commit lands elsewhere, so
   over commits every API page gets every check.

GUIDE_API_ROTATION (a hexadecimal number, e.g. a commit hash) overrides HEAD; without it and
without git (a tarball, no .git) the rotation takes the first page of that sorted list, and the
report says so. Every other page (the guide's pages, the reference's index, 404) gets every
check.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

# The names of tests/pages/test_browser.py's inspect_page's checks (their function names).
CHEAP = (
    "check_rendered",  # served, and its first screen complete
    "check_network",  # no console error, page error, failed request, HTTP error, foreign host
    "check_links",  # every same-site link and #anchor resolves
    "check_headings",  # one h1, no level skipped, every heading with an id
    "check_math",  # every formula typeset, no raw TeX left
    "check_diagrams",  # every Mermaid fence drawn (a DOM count: no cost on a page without one)
    "check_phone_overflow",  # no sideways scroll at 390 px
    "check_desktop_code_fit",  # no code or output block scrolls sideways at 1280 px
    "check_table_columns",  # an API table's columns do not follow its rows (no re-layout)
)
EXPENSIVE = (
    "check_formula_sizes",
    "check_diagram_boxes",
    "check_copy_buttons",  # copy room at desktop width, and the copy click
    "check_accessibility",  # axe
    "check_math_contrast",
    "check_code_contrast",
    "check_figures",
    "screenshot",
    "check_phone_fit",  # phone legibility and copy room at 390 px (overflow: CHEAP)
    "check_wide_formulas",
)
API_PREFIX = "/reference/"  # page paths as the report gives them, from the site's root
MKDOCSTRINGS = 'class="doc doc-object'  # in the article of a page mkdocstrings wrote
ROTATION_ENV = "GUIDE_API_ROTATION"


@dataclasses.dataclass(frozen=True)
class Plan:
    """The API pages, and the three of them that get every check, each with its reason."""

    api: tuple[str, ...]  # every API page's path ("/reference/model/"), sorted
    full: dict[str, str]  # API page -> why it gets every check
    rotation: str  # where the rotation's number came from, in words

    def every_check(self, page: str) -> bool:
        return page not in self.api or page in self.full

    def checks(self, page: str) -> str:
        """What the report calls the page's set of checks."""
        if page not in self.api:
            return "every check"
        if page in self.full:
            return f"every check (API page: {self.full[page]})"
        return "cheap checks (API page)"

    def lines(self) -> list[str]:
        """The plan in words, for the browser table."""
        cheap = len(self.api) - len(self.full)
        return [
            f"API reference: {len(self.api)} pages; {cheap} got the cheap checks only "
            f"({', '.join(c.removeprefix('check_') for c in CHEAP)}), these got every check: "
            + "; ".join(f"{page} ({why})" for page, why in self.full.items()),
            f"rotation: {self.rotation}",
        ]


def rotation_key(root: Path) -> tuple[int | None, str]:
    """The rotation's number and where it came from: GUIDE_API_ROTATION, else the commit
    (``git rev-parse HEAD`` in ``root``), else None (no git: the first page)."""
    given = os.environ.get(ROTATION_ENV, "").strip()
    if given:
        try:
            return int(given, 16), f"{ROTATION_ENV}={given}"
        except ValueError:
            raise ValueError(
                f"{ROTATION_ENV}={given!r} is not a hexadecimal number (a commit hash, say)"
            ) from None
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        head = None
    commit = head.stdout.strip() if head is not None and head.returncode == 0 else ""
    if re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return int(commit, 16), f"HEAD {commit[:12]}"
    return None, f"no git commit here and no {ROTATION_ENV}: the first page"


def page_file(site: Path, page: str) -> Path:
    """The built HTML file of a page path ("/reference/model/" -> reference/model/index.html)."""
    rel = page.strip("/")
    return site / rel if rel.endswith(".html") else site / rel / "index.html"


def plan(site: Path, pages: list[str], key: tuple[int | None, str]) -> Plan:
    """Which API pages of ``pages`` (paths from the site's root) get every check, read from
    the built ``site``; ``key`` is rotation_key()'s answer."""
    html = {}
    for page in pages:
        if page.startswith(API_PREFIX) and page != API_PREFIX:
            text = page_file(site, page).read_text(encoding="utf-8")
            if MKDOCSTRINGS in text:
                html[page] = text
    api = tuple(sorted(html))
    full: dict[str, str] = {}
    if not api:
        return Plan(api, full, "no API page")
    largest = max(api, key=lambda p: (len(html[p].encode("utf-8")), p))
    full[largest] = f"the largest, {len(html[largest].encode('utf-8')) / 1000:.0f} kB"
    formulas = {p: html[p].count('class="arithmatex"') for p in api if p not in full}
    with_math = max(formulas, key=lambda p: (formulas[p], p), default=None)
    if with_math is not None and formulas[with_math]:
        full[with_math] = f"the most formulas, {formulas[with_math]}"
    number, source = key
    rest = [p for p in api if p not in full]
    at = 0 if number is None else number % len(rest)
    # The math slot goes to the rotation while no API page has a formula: the next page on.
    for step in range(min(3 - len(full), len(rest))):
        why = source if number is None else f"the rotation: {source} % {len(rest)} = {at}"
        if step:
            why = "the next in the rotation, in the slot of a page with math: none has a formula"
        full[rest[(at + step) % len(rest)]] = why
    return Plan(api, full, source)
