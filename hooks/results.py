"""MkDocs hook: measured results rendered from their committed result files at build time.

A page shows a measured result as Markdown that a function of lab/ writes from the result
file, so that the page cannot disagree with the file. Two forms, outside code:

- a line by itself, ``<!-- result: lab.module:function -->`` (indented as the text around
  it, inside an admonition or a tab too): replaced by the Markdown ``function()`` returns
  (tables, a ``??? note "How this was measured"``, images), which is then processed like
  the rest of the page;
- in prose, ``<!-- value: lab.module:function key -->``: replaced by ``function()[key]``,
  ``function`` returning a dict of the page's numbers as text ("1,564", "x3.1").

An unknown module or function, a function that raises or returns the wrong type, a missing
key, or a directive that is neither form fails the build, naming the page and its line. The
functions run once per build; a module is reloaded at each build, so ``mkdocs serve`` shows
a changed formatter (lab/ is watched). Run after page_downloads.py (which counts the file's
lines) in mkdocs.yml.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

BLOCK = re.compile(r"^(?P<indent>[ \t]*)<!--\s*result:(?P<target>[^>]*?)\s*-->[ \t]*$")
VALUE = re.compile(r"<!--\s*value:(?P<target>[^>]*?)\s*-->")
ANY = re.compile(r"<!--\s*(result|value)\s*:")  # what looks like a directive at all
TARGET = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<function>[A-Za-z_]\w*)$")
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")

_state: dict = {"calls": {}, "reloaded": set()}


class DirectiveError(Exception):
    """A directive that cannot be rendered: the message says why; `text` is the line."""

    def __init__(self, message: str, text: str = ""):
        super().__init__(message)
        self.text = text


def on_config(config):
    _state.update(calls={}, reloaded=set())
    return config


def _function(target: str):
    match = TARGET.match(target.strip())
    if not match:
        raise DirectiveError(f"{target.strip()!r} is not module:function")
    name, func = match["module"], match["function"]
    try:
        if name in sys.modules and name not in _state["reloaded"]:
            module = importlib.reload(sys.modules[name])
        else:
            module = importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 (any import failure names the directive)
        raise DirectiveError(f"cannot import {name}: {type(error).__name__}: {error}") from None
    _state["reloaded"].add(name)
    if not callable(getattr(module, func, None)):
        raise DirectiveError(f"{name} has no function {func}")
    return getattr(module, func)


def call(target: str):
    """function() of a directive's target, once per build."""
    key = target.strip()
    if key not in _state["calls"]:
        function = _function(key)
        try:
            _state["calls"][key] = function()
        except Exception as error:  # noqa: BLE001
            raise DirectiveError(f"{key}() raised {type(error).__name__}: {error}") from None
    return _state["calls"][key]


def block(target: str) -> str:
    """The Markdown of a block directive."""
    text = call(target)
    if not isinstance(text, str):
        raise DirectiveError(f"{target.strip()}() returned {type(text).__name__}, not Markdown")
    return text


def value(target: str) -> str:
    """The text of an inline directive, `module:function key`."""
    parts = target.split()
    if len(parts) != 2:
        raise DirectiveError(f"{target.strip()!r} is not `module:function key`")
    values = call(parts[0])
    if not isinstance(values, dict):
        raise DirectiveError(f"{parts[0]}() returned {type(values).__name__}, not a dict")
    if parts[1] not in values:
        known = ", ".join(sorted(map(str, values)))
        raise DirectiveError(f"{parts[0]}() has no key {parts[1]!r} (it has: {known})")
    return str(values[parts[1]])


def _inline(line: str) -> str:
    """A prose line with its value directives replaced, code spans left as written."""
    out, at = [], 0
    for span in CODE_SPAN.finditer(line):
        out.append(VALUE.sub(lambda m: value(m["target"]), line[at : span.start()]))
        out.append(span.group())
        at = span.end()
    out.append(VALUE.sub(lambda m: value(m["target"]), line[at:]))
    return "".join(out)


def render(markdown: str, first_line: int = 1) -> str:
    """Every directive of a page's Markdown replaced; DirectiveError names the line
    (numbered from first_line) of the first that fails."""
    lines, out, fence = markdown.split("\n"), [], None
    for n, line in enumerate(lines, start=first_line):
        opening = FENCE.match(line)
        if fence:
            if opening and opening[1][0] == fence[0] and len(opening[1]) >= len(fence):
                fence = None
            out.append(line)
            continue
        if opening:
            fence = opening[1]
            out.append(line)
            continue
        try:
            match = BLOCK.match(line)
            if match:
                indent = match["indent"]
                text = block(match["target"]).strip("\n")
                out.extend(indent + row if row else "" for row in text.split("\n"))
                continue
            replaced = _inline(line)
            if ANY.search(CODE_SPAN.sub("", replaced)):
                raise DirectiveError(
                    "a result directive must be a line of its own, a value one"
                    " `<!-- value: module:function key -->`"
                )
        except DirectiveError as error:
            raise DirectiveError(f"line {n}: {error}", line) from None
        out.append(replaced)
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    if "<!--" not in markdown:
        return markdown
    try:
        return render(markdown)
    except DirectiveError as error:
        # Hooks before this one add lines (page_downloads' notes): the line number is the
        # source file's line that holds the failing directive.
        source = Path(page.file.abs_src_path).read_text(encoding="utf-8").split("\n")
        where = next((i for i, line in enumerate(source, 1) if line == error.text), None)
        message = str(error).split(": ", 1)[1]
        raise PluginError(f"docs/{page.file.src_uri}:{where}: {message}") from None
