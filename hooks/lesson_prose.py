"""MkDocs hook: a lesson's prose says nothing about the tooling.

A learner reads attention, not the repository's machinery. The prose of every lesson page (the
nav's pages but the home page and the API reference) may not name the test suite, CI, an
allocator, an instruction set, a spelling check, a build step, or a path of ``lab/`` or
``tests/``. "Every block runs and is checked" is said once, on the home page; how a result was
measured stays in its collapsed note, a ``??? note "How ..."`` admonition (collapsed, its title
starting with "How": "How this was measured", "How the numbers were checked"), which this hook
does not read. Code blocks and HTML comments are not prose either.

The build fails, naming the page, the line and the word, with what to do instead.
"""

from __future__ import annotations

import re

from mkdocs.exceptions import PluginError

HOME = "index.md"
REFERENCE = "API reference"  # the nav section of generated pages, not lessons

# The words, and what each one names. CI and ISA only as capitals: "ci" and "isa" occur in
# ordinary words and names.
WORDS = [
    (re.compile(r"\btest[- ]suite\b|\bthe suite\b|\bsuite's\b", re.I), "the test suite"),
    (re.compile(r"\bCI\b"), "CI"),
    (re.compile(r"\ballocators?\b", re.I), "an allocator"),
    (re.compile(r"\binstruction sets?\b|\bISAs?\b", re.I), "an instruction set"),
    (re.compile(r"\bspell(ing)?[- ]check", re.I), "the spelling check"),
    (re.compile(r"\bbuild steps?\b|\bsite build\b|\bmkdocs build\b", re.I), "a build step"),
    (re.compile(r"(?<![\w./-])lab/"), "a path of lab/"),
    (re.compile(r"(?<![\w./-])tests/"), "a path of tests/"),
]
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
# A collapsed admonition (``???``, not the open ``???+``) whose title starts with "How".
HOW_NOTE = re.compile(r'^(?P<indent>[ \t]*)\?\?\?[ \t]+\w+[ \t]+"How\b[^"]*"')

# Pages whose rewrite another branch of issue 47 owns, not yet held to the rule; each names why.
# Remove a page from here when its rewrite lands (the build then checks it).
NOT_YET: dict[str, str] = {}

_state: dict = {"lessons": set()}


def lesson_pages(items, section: str | None = None) -> set[str]:
    """The nav's Markdown pages but the home page and the API reference's."""
    found: set[str] = set()
    for item in items:
        if getattr(item, "is_section", False):
            found |= lesson_pages(item.children, section or item.title)
        elif getattr(item, "is_page", False):
            uri = item.file.src_uri
            if uri.endswith(".md") and uri != HOME and (section or "") != REFERENCE:
                found.add(uri)
    return found


def prose_problems(markdown: str) -> list[str]:
    """'line N: "word" (names ...)' for each tooling word in the prose of a page."""
    problems = []
    fence: str | None = None
    in_comment = False
    note_indent: int | None = None  # inside a collapsed "How ..." note
    for number, line in enumerate(markdown.splitlines(), 1):
        indent = len(line) - len(line.lstrip())
        if note_indent is not None:
            if line.strip() and indent <= note_indent:
                note_indent = None
            else:
                continue
        opening = FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        how = HOW_NOTE.match(line)
        if how:
            note_indent = len(how["indent"])
            continue
        text = line
        if in_comment:
            if "-->" not in text:
                continue
            text = text.split("-->", 1)[1]
            in_comment = False
        text = re.sub(r"<!--.*?-->", "", text)
        if "<!--" in text:
            text, in_comment = text.split("<!--", 1)[0], True
        for pattern, names in WORDS:
            for found in pattern.finditer(text):
                problems.append(f'line {number}: "{found.group(0)}" (names {names})')
    return problems


def on_nav(nav, config, files):
    _state["lessons"] = lesson_pages(nav.items)
    return nav


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri not in _state["lessons"] or page.file.src_uri in NOT_YET:
        return markdown
    problems = prose_problems(markdown)
    if problems:
        raise PluginError(
            f"{page.file.src_uri}: its lesson prose talks about the tooling:\n"
            + "\n".join(f"  {p}" for p in problems)
            + "\n  Say it without the tooling, or move how it was measured or checked into a "
            'collapsed note, ??? note "How this was measured" (the home page says once that '
            "every block runs and is checked)."
        )
    return markdown
