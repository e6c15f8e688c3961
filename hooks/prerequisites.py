"""MkDocs hook: the pages in the order they depend on.

Every content page names, in its front matter, the earlier pages it builds on:

    ---
    requires: [attention.md, transformer.md]
    ---

The build fails, naming the page, when a page requires a page that is not in the nav or
comes later in it, requires a page it never links to (a reader must be able to find it), or
declares nothing (``requires: []`` says "nothing"); when the first link of a page's
"## Next" section is not the next page of the nav, or that section comes after "## Further
reading"; and when the home page's "Learning path" does not link every page of the nav in
nav order. The pages of the "API reference" section
(generated from docstrings) and notebook pages (no front matter) are not checked.
"""

from __future__ import annotations

import posixpath
import re

from mkdocs.exceptions import PluginError

REFERENCE = "API reference"  # the nav section left out of the reading order's checks
HOME = "index.md"
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")

_state: dict = {"order": [], "reference": set()}


def reading_order(items, section: str | None = None) -> tuple[list[str], set[str]]:
    """The nav's pages, depth first (the order a reader meets them), and those under the
    API reference section."""
    order, reference = [], set()
    for item in items:
        if getattr(item, "is_section", False):
            inner, ref = reading_order(item.children, section or item.title)
            order += inner
            reference |= ref
        elif getattr(item, "is_page", False):
            order.append(item.file.src_uri)
            if (section or "") == REFERENCE:
                reference.add(item.file.src_uri)
    return order, reference


def links(markdown: str, page: str) -> list[str]:
    """The pages a page's Markdown links to, in order, as paths under docs/ (anchors and
    external addresses dropped; links inside code fences and code spans ignored)."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            target = target.split("#", 1)[0]
            if not target or "://" in target or target.startswith("mailto:"):
                continue
            found.append(posixpath.normpath(posixpath.join(posixpath.dirname(page), target)))
    return found


def section(markdown: str, title: str) -> str | None:
    """The text under the level-2 heading ``title``, up to the next level-2 heading."""
    match = re.search(rf"^## {re.escape(title)}[ \t]*$", markdown, re.M)
    if not match:
        return None
    rest = markdown[match.end() :]
    end = re.search(r"^## ", rest, re.M)
    return rest[: end.start()] if end else rest


def page_problems(
    page: str, markdown: str, meta: dict, order: list[str], reference: set[str]
) -> list[str]:
    """What breaks the reading order on one page (empty when nothing does)."""
    if page not in order or page in reference or not page.endswith(".md"):
        return []
    problems = []
    here = order.index(page)
    content = [p for p in order if p not in reference]
    if page == HOME:
        path = section(markdown, "Learning path")
        listed = [p for p in links(path or "", page) if p in content]
        wanted = [p for p in content if p != HOME]
        if listed != wanted:
            missing = [p for p in wanted if p not in listed]
            pairs = zip([*listed, None], wanted, strict=False)
            at = next((i for i, (a, b) in enumerate(pairs) if a != b), 0)
            problems.append(
                "its 'Learning path' must link every page of the nav but the API reference, "
                f"in nav order: link {at + 1} is {listed[at] if at < len(listed) else 'missing'}"
                f", the nav's page {at + 1} is {wanted[at]}"
                + (f" (missing: {', '.join(missing)})" if missing else "")
            )
        return problems
    if "requires" not in meta:
        problems.append(
            "no 'requires' in its front matter: name the earlier pages it builds on "
            "(requires: [] if none)"
        )
    required = meta.get("requires") or []
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append(f"'requires' must be a list of page paths, not {required!r}")
        required = []
    linked = set(links(markdown, page))
    for need in required:
        if need not in order:
            problems.append(f"requires {need}, which is not in the nav")
        elif order.index(need) >= here:
            problems.append(
                f"requires {need}, which comes after it in the nav "
                f"(page {order.index(need) + 1} against {here + 1}): move one, or explain "
                "what it uses where it uses it"
            )
        elif need not in linked:
            problems.append(f"requires {need} but never links to it")
    if here + 1 < len(order):
        after = order[here + 1]
        nxt = section(markdown, "Next")
        first = next(iter(links(nxt or "", page)), None)
        if first != after:
            problems.append(
                f"the first link of its '## Next' section must be the next page of the nav, "
                f"{after}; it is {first or 'missing'}"
            )
    heads = re.findall(r"^## (Next|Further reading)\s*$", markdown, flags=re.M)
    if heads[:2] == ["Further reading", "Next"]:
        problems.append("its '## Next' must come before '## Further reading', as on every page")
    return problems


def on_nav(nav, config, files):
    _state["order"], _state["reference"] = reading_order(nav.items)
    return nav


def on_page_markdown(markdown, page, config, files):
    problems = page_problems(
        page.file.src_uri, markdown, page.meta or {}, _state["order"], _state["reference"]
    )
    if problems:
        raise PluginError(
            f"{page.file.src_uri}: out of reading order:\n" + "\n".join(f"  {p}" for p in problems)
        )
    return markdown
