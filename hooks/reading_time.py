"""MkDocs hook: how long each page takes to study, counted from the page, never typed in.

A page takes its words at 180 a minute and each line of code it shows at 5 seconds (issue
47's estimate). Words are counted in the page's Markdown outside code blocks and outside
lines that are HTML comments (a code span counts as one word); shown code is every
non-blank line of every fenced block, with each ``--8<--`` include replaced by the lines
it brings in, collapsed blocks too (a reader who opens them reads them). A notebook page
(a jupytext ``.py``) counts its Markdown cells as words and its code cells as code.

Authors write placeholders, which this hook fills:

- under a page's title, ``**About <!-- minutes --> minutes.**``: the page's own minutes;
- on the home page, ``<!-- minutes: generation.md -->`` after each page of the learning
  path, and ``<!-- minutes: core -->`` and ``<!-- hours: core -->`` for the sum of the
  core path's pages (the nav's "Core path" section), the sum of the minutes shown.

The build fails, naming the page and what to do, when a placeholder names a page the nav
does not have, when the home page leaves out a page of the nav's minutes, when a lesson has
no placeholder under its title, and when a minute count is typed in by hand where the
placeholders belong (a lesson's opening, the home page's learning path): a typed count
goes stale at the next edit.

Run as a module, it prints each page's words, shown lines and minutes, and marks the core
pages over a core page's budget (3,500 words, 250 shown lines):
``python -m hooks.reading_time [BASE]``, only the pages a change since commit BASE touched
(directly or through a module it includes) when BASE is given.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

WORDS_PER_MINUTE = 180
SECONDS_PER_LINE = 5
WORD_BUDGET = 3500  # a core page's budget (issue 47 item 2)
LINE_BUDGET = 250
HOME = "index.md"
CORE = "Core path"  # the nav section a learner studies in order
REFERENCE = "API reference"  # generated pages, not studied

FENCE = re.compile(r"\s*(```|~~~)")
INCLUDE = re.compile(r'--8<--\s+"([^":]+)(?::([^"]+))?"')
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
CODE_SPAN = re.compile(r"`[^`]*`")
PAGE_MARK = re.compile(r"<!--\s*minutes\s*-->")
HOME_MARK = re.compile(r"<!--\s*(minutes|hours)\s*:\s*([^\s>]+)\s*-->")
ANY_MARK = re.compile(r"<!--\s*(minutes|hours)\b[^>]*-->")
# A count typed by hand: "About 24 minutes", "(53 min)", "10.6 hours".
TYPED = re.compile(r"\b\d+(?:\.\d+)?\s*(?:minutes?|mins?|hours?|h)\b", re.I)

# Lessons whose rewrite another branch of issue 47 owns, not yet given their header; each
# names why. Remove a page from here when its rewrite lands (the build then checks it).
NOT_YET: dict[str, str] = {}

_state: dict = {"root": Path("."), "minutes": {}, "core": [], "lessons": []}


def section_lines(path: Path, name: str) -> list[str]:
    """The lines between a module's ``--8<-- [start:name]`` and ``[end:name]`` markers."""
    out, on = [], False
    for line in path.read_text().splitlines():
        if re.search(rf"--8<-- \[(start|end):{re.escape(name)}\]", line):
            on = "start" in line
            continue
        if on:
            out.append(line)
    return out


def count_markdown(text: str, root: Path) -> tuple[int, int]:
    """(words, shown code lines) of a Markdown page; includes resolved from ``root``."""
    words = code = 0
    in_block = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_block = not in_block
            continue
        if in_block:
            include = INCLUDE.search(line)
            if include and (root / include.group(1)).exists():
                path = root / include.group(1)
                name = include.group(2)
                src = section_lines(path, name) if name else path.read_text().splitlines()
                code += sum(1 for x in src if x.strip())
            elif line.strip():
                code += 1
        elif not line.lstrip().startswith("<!--"):
            words += len(WORD.findall(CODE_SPAN.sub("x", line)))
    return words, code


def count_notebook(text: str) -> tuple[int, int]:
    """(words, code lines) of a jupytext percent-format notebook: Markdown cells are
    comment lines (``# text``), code cells are the rest; its metadata header is neither."""
    words = code = 0
    cell = None  # "markdown", "code", or None in the header
    for line in text.splitlines():
        if line.startswith("# %%"):
            cell = "markdown" if "[markdown]" in line else "code"
            continue
        if cell == "markdown":
            body = line[1:].strip() if line.startswith("#") else line.strip()
            if not body.startswith("<!--"):
                words += len(WORD.findall(CODE_SPAN.sub("x", body)))
        elif cell == "code" and line.strip():
            code += 1
    return words, code


def count_page(path: Path, root: Path) -> tuple[int, int]:
    text = path.read_text()
    return count_notebook(text) if path.suffix == ".py" else count_markdown(text, root)


def minutes(words: int, code: int) -> float:
    return words / WORDS_PER_MINUTE + code * SECONDS_PER_LINE / 60


def shown(value: float) -> int:
    """The whole minutes a page shows (the core path's total is the sum of these)."""
    return int(f"{value:.0f}")


def nav_pages(items, section: str | None = None, top: str | None = None):
    """(page, top-level section, section) for each page of the nav, in reading order."""
    for item in items:
        if getattr(item, "is_section", False):
            yield from nav_pages(item.children, section or item.title, top or item.title)
        elif getattr(item, "is_page", False):
            yield item.file, top, section


def opening(markdown: str) -> str:
    """A page's text from its start to its first level-2 heading, code and comments out."""
    end = re.search(r"^## ", markdown, re.M)
    head = markdown[: end.start()] if end else markdown
    head = re.sub(r"```.*?```", "", head, flags=re.S)
    return re.sub(r"<!--.*?-->", "", head, flags=re.S)


def home_problems(markdown: str, table: dict[str, int], core: list[str]) -> list[str]:
    problems = []
    named = [m.group(2) for m in HOME_MARK.finditer(markdown) if m.group(1) == "minutes"]
    for mark in ANY_MARK.finditer(markdown):
        found = HOME_MARK.fullmatch(mark.group(0))
        if not found:
            problems.append(f"{mark.group(0)!r} names no page: write <!-- minutes: page.md -->")
        elif found.group(2) != "core" and found.group(2) not in table:
            problems.append(f"{mark.group(0)!r}: {found.group(2)} is no lesson of the nav")
        elif found.group(1) == "hours" and found.group(2) != "core":
            problems.append(f"{mark.group(0)!r}: only the core path's hours are counted")
    missing = [p for p in table if p not in named]
    if missing:
        problems.append(
            "its learning path shows no minutes for "
            + ", ".join(missing)
            + ": write <!-- minutes: page.md --> after each page's link"
        )
    if core and "core" not in named:
        problems.append("it shows no total for the core path: write <!-- minutes: core -->")
    start = re.search(r"^## Learning path", markdown, re.M)
    if start:
        rest = markdown[start.end() :]
        nxt = re.search(r"^## ", rest, re.M)
        path = re.sub(r"<!--.*?-->", "", rest[: nxt.start()] if nxt else rest, flags=re.S)
        for typed in TYPED.finditer(path):
            problems.append(
                f'"{typed.group(0)}" is typed in by hand: write <!-- minutes: page.md --> '
                "(or <!-- minutes: core -->, <!-- hours: core -->), which the build counts"
            )
    return problems


def fill_home(markdown: str, table: dict[str, int], core: list[str]) -> str:
    total = sum(table[p] for p in core)

    def value(match: re.Match) -> str:
        kind, name = match.group(1), match.group(2)
        if name == "core":
            return f"{total / 60:.1f}" if kind == "hours" else str(total)
        return str(table[name])

    return HOME_MARK.sub(value, markdown)


def lesson_problems(markdown: str) -> list[str]:
    head = opening(markdown)
    problems = [
        f'"{typed.group(0)}" under its title is typed in by hand: write '
        "**About <!-- minutes --> minutes.**, which the build counts"
        for typed in TYPED.finditer(head)
    ]
    marks = len(PAGE_MARK.findall(markdown))
    before = re.split(r"^## ", markdown, maxsplit=1, flags=re.M)[0]
    if marks != 1 or not PAGE_MARK.search(before):
        problems.append(
            f"{marks} <!-- minutes --> placeholders, {len(PAGE_MARK.findall(before))} under "
            "its title: write one there, **About <!-- minutes --> minutes.**"
        )
    return problems


def on_config(config):
    _state["root"] = Path(config.config_file_path).parent
    return config


def on_nav(nav, config, files):
    table, core, lessons = {}, [], []
    for file, top, _section in nav_pages(nav.items):
        uri = file.src_uri
        if uri == HOME or (top or "") == REFERENCE:
            continue
        table[uri] = shown(minutes(*count_page(Path(file.abs_src_path), _state["root"])))
        lessons.append(uri)
        if top == CORE:
            core.append(uri)
    _state.update(minutes=table, core=core, lessons=lessons)
    return nav


def on_page_markdown(markdown, page, config, files):
    uri = page.file.src_uri
    table = _state["minutes"]
    if uri == HOME:
        problems = home_problems(markdown, table, _state["core"])
        if problems:
            raise PluginError(f"{uri}: minutes of study:\n" + "\n".join(f"  {p}" for p in problems))
        return fill_home(markdown, table, _state["core"])
    if uri not in table or not uri.endswith(".md") or uri in NOT_YET:
        return markdown
    problems = lesson_problems(markdown)
    if problems:
        raise PluginError(f"{uri}: minutes of study:\n" + "\n".join(f"  {p}" for p in problems))
    return PAGE_MARK.sub(str(table[uri]), markdown)


def on_page_content(html, page, config, files):
    """A notebook page's Markdown cells arrive as HTML, the placeholder kept as a comment."""
    uri = page.file.src_uri
    if uri.endswith(".py") and uri in _state["minutes"]:
        if len(PAGE_MARK.findall(html)) != 1:
            raise PluginError(
                f"{uri}: minutes of study: write one <!-- minutes --> in its first Markdown "
                "cell, **About <!-- minutes --> minutes.**"
            )
        return PAGE_MARK.sub(str(_state["minutes"][uri]), html)
    return html


def main(argv: list[str]) -> None:
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files
    from mkdocs.structure.nav import get_navigation

    root = Path.cwd()
    config = load_config(str(root / "mkdocs.yml"))
    nav = get_navigation(get_files(config), config)
    pages = [
        (f, top)
        for f, top, _ in nav_pages(nav.items)
        if (top or "") != REFERENCE and f.src_uri != HOME
    ]
    wanted = None
    if argv:
        changed = subprocess.run(
            ["git", "diff", "--name-only", argv[0], "--", "docs", "snippets"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        mods = [p for p in changed if p.startswith("snippets/")]
        wanted = {p.removeprefix("docs/") for p in changed if p.startswith("docs/")}
        wanted |= {
            f.src_uri for f, _ in pages if any(m in Path(f.abs_src_path).read_text() for m in mods)
        }
    total = 0
    for file, top in pages:
        words, code = count_page(Path(file.abs_src_path), root)
        if top == CORE:
            total += shown(minutes(words, code))
        if wanted is not None and file.src_uri not in wanted:
            continue
        over = top == CORE and (words > WORD_BUDGET or code > LINE_BUDGET)
        print(
            f"  docs/{file.src_uri}: {words} words, {code} lines of shown code, about "
            f"{minutes(words, code):.0f} min, {'core' if top == CORE else 'optional'}"
            + ("  <- over a core page's budget" if over else "")
        )
    print(f"  core path: {total} min ({total / 60:.1f} h)")


if __name__ == "__main__":
    main(sys.argv[1:])
