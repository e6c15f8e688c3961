"""Which checks each page of the built site gets: the decisions of issues 33 and 48.

Every page gets the cheap checks, CHEAP, on every run: it is served and renders, no console
error or failed request, every link and #anchor resolves, its headings hold together, no raw
TeX, no sideways scroll at 390 px, code and table columns that hold. The expensive ones
(EXPENSIVE: axe, screenshots, phone legibility, formula sizes, copy room and the copy click,
contrast, figures, the dark pass) run on a sample, chosen from the built site and the git
history before any page is opened.

The API reference pages (the pages under reference/ whose article mkdocstrings wrote) are one
template filled from docstrings. Three of them get every check:

1. the largest (the most bytes of built HTML: the template at its longest);
2. the one with the most formulas (MathJax's marks, ``class="arithmatex"``) among the others;
   while no API page has a formula (as on 2026-12-01: the docstrings write their maths as code
   and Unicode), this slot goes to the rotation too;
3. one by the rotation: of the API pages not chosen above, sorted by path, the one at
   ``N % len(them)`` (and, while the slot of 2. is free, the one after it, wrapping round).

Every other page is a content page (the guide's pages, the reference's index, its lessons'
pages, 404). A content page gets every check when

- its source (docs/<page>.md, or the .py/.ipynb of a notebook page) or a file it includes
  (``--8<-- "snippets/x.py:name"``) changed in the last CHANGED_WITHIN commits (first-parent
  history: a merge counts as one commit, its changes against the line it joins), or
- the rotation reaches it: the content pages sorted by path, the ones at an index ``i`` with
  ``i % ROTATION_PERIOD == N % ROTATION_PERIOD``. N grows by one a commit, so any
  ROTATION_PERIOD consecutive commits give every content page every check at least once.

N, the rotation's number, is the count of first-parent commits up to HEAD (``git rev-list
--count --first-parent HEAD``). GUIDE_ROTATION (a whole number) overrides it. In a shallow
clone (CI's checkout fetches one commit unless told otherwise) the count is not the history's:
N is then HEAD's hash as a number, which still moves the rotation at every commit (without the
guarantee), and the report says so; .ci/run fetches the history to keep the guarantee.
Without git (a copy of the files, no .git) the rotation takes the first pages (N = 0), no page
counts as changed, and the report says so.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path
from typing import NamedTuple

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
    "check_table_columns",  # API and first-screen tables: columns do not follow rows
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
ROTATION_ENV = "GUIDE_ROTATION"
CHANGED_WITHIN = 10  # commits
ROTATION_PERIOD = 5  # commits: every content page gets every check once in any this many
INCLUDE = re.compile(r"""--8<--\s+["']([^"':]+)""")  # pymdownx.snippets, in a page's source
SOURCES = (".md", ".py", ".ipynb")  # what a page of docs/ is built from


class Key(NamedTuple):
    """The rotation's number (None: no git) and where it came from, in words."""

    number: int | None
    source: str


class History(NamedTuple):
    """What git says of the last commits: the files changed in them (None: not known)."""

    changed: frozenset[str] | None
    source: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """The pages that get every check, each with its reason."""

    api: tuple[str, ...]  # every API page's path ("/reference/core/model/"), sorted
    full: dict[str, str]  # API page -> why it gets every check
    rotation: str  # where the rotation's number came from, in words
    content: tuple[str, ...] = ()  # every other page, sorted
    content_full: dict[str, str] = dataclasses.field(default_factory=dict)  # page -> why
    history: str = ""  # where the list of changed files came from, in words
    key: tuple[int | None, str] = (None, "")  # the rotation's number and its source
    changed: frozenset[str] | None = None  # the files changed lately (None: not known)

    def every_check(self, page: str) -> bool:
        if page in self.api:
            return page in self.full
        return page not in self.content or page in self.content_full

    def checks(self, page: str) -> str:
        """What the report calls the page's set of checks, and why."""
        if page in self.api:
            if page in self.full:
                return f"every check (API page: {self.full[page]})"
            return "cheap checks (API page)"
        if page in self.content_full:
            return f"every check ({self.content_full[page]})"
        if page in self.content:
            return "cheap checks (unchanged, not in this commit's rotation)"
        return "every check"

    def lines(self) -> list[str]:
        """The plan in words, for the browser table."""
        cheap = len(self.api) - len(self.full)
        lines = [
            f"API reference: {len(self.api)} pages; {cheap} got the cheap checks only "
            f"({', '.join(c.removeprefix('check_') for c in CHEAP)}), these got every check: "
            + "; ".join(f"{page} ({why})" for page, why in self.full.items()),
        ]
        if self.content:
            rest = [p for p in self.content if p not in self.content_full]
            lines += [
                f"content pages: {len(self.content)}; {len(self.content_full)} got every check: "
                + "; ".join(f"{p} ({why})" for p, why in self.content_full.items()),
                f"content pages with the cheap checks only ({len(rest)}): {' '.join(rest)}",
                f"changed files: {self.history}",
            ]
        lines.append(f"rotation: {self.rotation}")
        return lines


def _git(root: Path, *args: str) -> str | None:
    """git's output in ``root``, or None (no git, no repository, an error)."""
    try:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def rotation_key(root: Path) -> Key:
    """The rotation's number: GUIDE_ROTATION, else the first-parent commit count of HEAD in
    ``root`` (a shallow clone: HEAD's hash), else None (no git: the first pages)."""
    given = os.environ.get(ROTATION_ENV, "").strip()
    if given:
        if not given.isdigit():
            raise ValueError(f"{ROTATION_ENV}={given!r} is not a whole number (a commit count)")
        return Key(int(given), f"{ROTATION_ENV}={given}")
    head = (_git(root, "rev-parse", "HEAD") or "").strip()
    if not re.fullmatch(r"[0-9a-f]{40,64}", head):
        return Key(None, f"no git commit here and no {ROTATION_ENV}: the first pages")
    if (_git(root, "rev-parse", "--is-shallow-repository") or "").strip() == "true":
        return Key(
            int(head, 16),
            f"HEAD {head[:12]} as a number (a shallow clone: no commit count; "
            f"every page once in {ROTATION_PERIOD} commits is not guaranteed)",
        )
    count = (_git(root, "rev-list", "--count", "--first-parent", "HEAD") or "").strip()
    return Key(int(count), f"commit {count} (HEAD {head[:12]})")


def history(root: Path, within: int = CHANGED_WITHIN) -> History:
    """The files changed in the last ``within`` first-parent commits (a merge: against the
    line it joins), paths from the repository's root."""
    out = _git(root, "log", "--first-parent", "-m", f"-n{within}", "--name-only", "--format=")
    if out is None:
        return History(None, "no git history here: no page counts as changed")
    files = frozenset(line.strip() for line in out.splitlines() if line.strip())
    return History(files, f"{len(files)} files changed in the last {within} commits")


def page_sources(docs: Path, page: str) -> list[str]:
    """The files a content page is built from, paths from the repository's root: its source
    in docs/ and what it includes (``--8<-- "snippets/x.py:name"``); [] for one without
    (404.html)."""
    rel = page.strip("/").removesuffix(".html")
    candidates = [f"{rel}/index", rel] if rel else ["index"]
    root = docs.parent
    for stem in candidates:
        for suffix in SOURCES:
            path = docs / f"{stem}{suffix}"
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                included = dict.fromkeys(m[1] for m in INCLUDE.finditer(text))
                return [path.relative_to(root).as_posix(), *included]
    return []


def page_file(site: Path, page: str) -> Path:
    """The built HTML file of a page path ("/reference/core/model/" ->
    reference/core/model/index.html)."""
    rel = page.strip("/")
    return site / rel if rel.endswith(".html") else site / rel / "index.html"


def plan(
    site: Path,
    pages: list[str],
    key: tuple[int | None, str],
    changes: History | None = None,
    docs: Path | None = None,
) -> Plan:
    """Which pages of ``pages`` (paths from the site's root) get every check, read from the
    built ``site``; ``key`` is rotation_key()'s answer, ``changes`` history()'s (None: the
    content pages all get every check, as before the sampling), ``docs`` the pages' sources."""
    number, source = key
    html = {}
    for page in pages:
        if page.startswith(API_PREFIX) and page != API_PREFIX:
            text = page_file(site, page).read_text(encoding="utf-8")
            if MKDOCSTRINGS in text:
                html[page] = text
    api = tuple(sorted(html))
    full = _api_full(api, html, number, source)
    if changes is None:
        return Plan(api, full, source if api else "no API page", key=(number, source))
    content = tuple(sorted(p for p in pages if p not in html))
    content_full: dict[str, str] = {}
    slot = (number or 0) % ROTATION_PERIOD
    for i, page in enumerate(content):
        changed = [f for f in page_sources(docs, page) if changes.changed and f in changes.changed]
        if changed:
            content_full[page] = f"changed in the last {CHANGED_WITHIN} commits: " + ", ".join(
                changed
            )
        elif i % ROTATION_PERIOD == slot:
            content_full[page] = f"the rotation: {source}, % {ROTATION_PERIOD} = {slot}"
    return Plan(
        api, full, source, content, content_full, changes.source, (number, source), changes.changed
    )


def _api_full(api, html, number, source) -> dict[str, str]:
    full: dict[str, str] = {}
    if not api:
        return full
    largest = max(api, key=lambda p: (len(html[p].encode("utf-8")), p))
    full[largest] = f"the largest, {len(html[largest].encode('utf-8')) / 1000:.0f} kB"
    formulas = {p: html[p].count('class="arithmatex"') for p in api if p not in full}
    with_math = max(formulas, key=lambda p: (formulas[p], p), default=None)
    if with_math is not None and formulas[with_math]:
        full[with_math] = f"the most formulas, {formulas[with_math]}"
    rest = [p for p in api if p not in full]
    at = 0 if number is None else number % len(rest)
    # The math slot goes to the rotation while no API page has a formula: the next page on.
    for step in range(min(3 - len(full), len(rest))):
        why = source if number is None else f"the rotation: {source} % {len(rest)} = {at}"
        if step:
            why = "the next in the rotation, in the slot of a page with math: none has a formula"
        full[rest[(at + step) % len(rest)]] = why
    return full
