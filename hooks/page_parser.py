"""Reading a page: its fences, their includes expanded as the site renders them, the Output
blocks and the ``check:`` markers. Nothing here runs code or knows pytest: the build's hooks
(hooks/page_downloads.py) and the page harness (tests/pagecheck/) both read pages with it, so
the downloads hold exactly the blocks the suite runs, and hooks/ never imports tests/."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from pathlib import Path

# The only two spellings that run. Others a reader would take for runnable code are refused
# rather than passed over: ``pycon``/``console`` fences hold prompts (``>>> ``, ``$ ``) and
# output, and running them as code would be wrong; the rest are synonyms nobody needs.
RUN = {"python": "python", "bash": "shell"}
REFUSED = {"py", "python3", "py3", "pycon", "ipython", "pytb", "sh", "shell", "zsh", "console"}

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")
_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*check:\s*(?P<verb>[\w-]+)\s*(?P<arg>.*?)\s*-->\s*$")
_TAB_HEADER = re.compile(r'^\s*===!?\+?\s+".*"\s*$')
_TITLE = re.compile(r'title="(?P<title>[^"]*)"')
# A collapsed admonition (pymdownx.details): ``??? kind "title"`` (``???+``, open, is not).
_COLLAPSED = re.compile(r'^(?P<indent>[ \t]*)\?\?\?[ \t]+\w+(?:[ \t]+"(?P<title>[^"]*)")?')
_VERBS = {"skip"}
_INCLUDE = re.compile(r"^[ \t]*-+8<-+")  # where pymdownx.snippets sees an include line
_SECTION = re.compile(r"(?<![;-])-+8<-+[ \t]+\[[ \t]*(start|end)[ \t]*:")  # it deletes such lines


class PageError(Exception):
    """A page breaks the harness's conventions (reported as a collection error)."""


@dataclasses.dataclass
class Block:
    """One fenced block of a page, after includes are expanded."""

    page: str  # path relative to the repository root, e.g. "docs/attention.md"
    line: int  # 1-based line of the opening fence
    end: int  # 1-based line of the closing fence
    indent: str  # the fence's indentation (inside an admonition or a content tab)
    lang: str  # the first word of the info string, lower-cased
    title: str | None
    code: str  # the code as rendered: includes expanded, fence indentation removed
    line_map: list[int]  # page line of each line of `code`
    skip: str | None = None  # reason from <!-- check: skip REASON -->
    expected_output: Block | None = None
    collapsed: str | None = None  # the title of the collapsed admonition it sits in

    @property
    def kind(self) -> str | None:
        return RUN.get(self.lang)

    @property
    def is_output(self) -> bool:
        return self.lang == "text" and self.title == "Output"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _collapsed_in(lines: list[str], at: int, indent: str) -> str | None:
    """The title of the collapsed admonition holding the fence at line `at`, if any: the
    nearest line above it indented less than the fence."""
    for line in reversed(lines[:at]):
        if line.strip() and len(line) - len(line.lstrip()) < len(indent):
            found = _COLLAPSED.match(line)
            return (found["title"] or "") if found else None
    return None


def _language(info: str) -> tuple[str, str | None]:
    title = _TITLE.search(info)
    lang = info.split()[0].lower() if info.strip() else ""
    return lang, title.group("title") if title else None


@dataclasses.dataclass
class Site:
    """What the harness needs from mkdocs.yml: the include expander and the pages in nav."""

    expand: object  # expand(lines) -> lines, the site's own pymdownx snippet preprocessor
    nav: set[str] | None  # pages in nav or not_in_nav, relative to docs_dir; None: no nav
    docs_dir: Path  # the site's pages; pages elsewhere (a test's throw-away page) have no nav


def load_site(config_file: Path) -> Site:
    """Read mkdocs.yml as mkdocs does, with the site's own Markdown extensions and settings."""
    import markdown
    from mkdocs.config import load_config

    # Without its plugins and hooks: loading reads them in (mkdocs-jupyter's imports alone take
    # 0.6 s, in every process that collects a page), and none of what is read here comes from
    # them: load_config runs no plugin event.
    with contextlib.redirect_stderr(io.StringIO()):
        config = load_config(str(config_file), plugins=[], hooks=[])
    md = markdown.Markdown(
        extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"]
    )
    nav = None if config["nav"] is None else set(_nav_pages(config["nav"]))
    docs_dir = Path(config["docs_dir"]).resolve()
    if nav is not None and config["not_in_nav"] is not None:
        # Pages kept out of the nav on purpose (mkdocs.yml's not_in_nav: the contributors'
        # page, linked from the footer) are built as the nav's are, and count as placed.
        for page in docs_dir.rglob("*.md"):
            rel = page.relative_to(docs_dir).as_posix()
            if config["not_in_nav"].match_file(rel):
                nav.add(rel)
    return Site(expand=md.preprocessors["snippet"].run, nav=nav, docs_dir=docs_dir)


def markdown_snippet_expander(config_file: Path):
    """Return ``expand(lines) -> lines`` using the site's own pymdownx snippet settings."""
    return load_site(config_file).expand


def _nav_pages(entry):
    """The page paths of a nav entry (a path, a {title: entry} mapping, or a list of entries);
    links to other sites are not pages."""
    if isinstance(entry, str):
        if "://" not in entry:
            yield entry
    elif isinstance(entry, dict):
        for value in entry.values():
            yield from _nav_pages(value)
    elif isinstance(entry, list):
        for value in entry:
            yield from _nav_pages(value)


_INCLUDED = re.compile(r"""--8<--\s+["'](?P<file>[^"':]+)(?::(?P<section>[^"']+))?["']""")
_SECTION_START = re.compile(r"--8<-- \[start:(?P<name>[^\]]+)\]")


def include_hint(line: str, root: Path) -> str:
    """What to write instead, for an include line that failed: the sections its file has
    (and the nearest to the one asked for), or the files of its folder."""
    import difflib

    m = _INCLUDED.search(line)
    if not m:
        return ""
    path = root / m["file"]
    if not path.is_file():
        folder = path.parent
        names = sorted(p.name for p in folder.glob("*.py")) if folder.is_dir() else []
        near = difflib.get_close_matches(path.name, names, n=1)
        return f". No file {m['file']}" + (f": did you mean {near[0]}?" if near else "")
    if not m["section"]:
        return ""
    sections = list(dict.fromkeys(_SECTION_START.findall(path.read_text(encoding="utf-8"))))
    near = difflib.get_close_matches(m["section"], sections, n=1)
    return f". {m['file']} has the sections: {', '.join(sections) or 'none'}" + (
        f". Did you mean '{near[0]}'?" if near else ""
    )


def parse_page(path: Path, root: Path, expand) -> list[Block]:
    """Find the fenced blocks of a page, expand their includes and attach directives."""
    rel = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: dict[str, str] = {}  # directives waiting for the next fence
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive:
            verb, arg = directive["verb"], directive["arg"]
            if verb not in _VERBS:
                raise PageError(f"{rel}:{i + 1}: unknown directive 'check: {verb}'")
            if verb == "skip" and not arg:
                raise PageError(f"{rel}:{i + 1}: 'check: skip' needs a reason")
            pending[verb] = arg
            i += 1
            continue
        opening = _OPEN.match(line)
        if not opening:
            if line.strip() and pending:
                raise PageError(
                    f"{rel}:{i + 1}: a 'check:' directive must sit directly above a fence"
                )
            if _INCLUDE.match(line):
                raise PageError(f"{rel}:{i + 1}: includes outside a code fence are not supported")
            if _SECTION.search(line):
                raise PageError(
                    f"{rel}:{i + 1}: the build deletes a line holding a section marker; "
                    "escape it as ;--8<--"
                )
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        lang, title = _language(opening["info"])
        if lang in REFUSED or lang.startswith("{"):
            raise PageError(
                f"{rel}:{i + 1}: a '{opening['info']}' fence would be shown but not run: "
                "write ```python or ```bash (no prompts; printed text goes in an Output block)"
            )
        start = i
        body: list[str] = []
        line_map: list[int] = []
        i += 1
        while True:
            if i >= len(lines):
                raise PageError(f"{rel}:{start + 1}: fence opened here is never closed")
            closing = _CLOSE.match(lines[i])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence):
                break
            raw = lines[i]
            if raw.strip() == "--8<--":
                raise PageError(f'{rel}:{i + 1}: use the one-line form --8<-- "file:section"')
            try:
                expanded = expand([raw]) if "8<-" in raw else [raw]
            except Exception as err:  # pymdownx's SnippetMissingError and friends
                raise PageError(
                    f"{rel}:{i + 1}: include failed: {err}{include_hint(raw, root)}"
                ) from None
            for text in expanded:
                body.append(text[len(indent) :] if text.startswith(indent) else text.lstrip())
                line_map.append(i + 1)
            i += 1
        blocks.append(
            Block(
                page=rel,
                line=start + 1,
                end=i + 1,
                indent=indent,
                lang=lang,
                title=title,
                code="\n".join(body) + "\n",
                line_map=line_map,
                skip=pending.get("skip"),
                collapsed=_collapsed_in(lines, start, indent) if indent else None,
            )
        )
        pending = {}
        i += 1
        # An "Output" block belongs to the runnable block before it, if only blank lines and
        # content-tab headers stand between them.
        current = blocks[-1]
        if current.is_output:
            previous = blocks[-2] if len(blocks) > 1 else None
            between = lines[previous.end : current.line - 1] if previous else []
            if (
                previous is None
                or previous.kind is None
                or previous.expected_output is not None
                or any(s.strip() and not _TAB_HEADER.match(s) for s in between)
            ):
                raise PageError(f"{current.where}: an Output block must follow a code block")
            previous.expected_output = current
    return blocks
