"""MkDocs hook: the math of every page typeset at build time, by MathJax itself.

Readers' browsers then load no MathJax: each formula arrives as finished SVG (with a MathML
copy for screen readers), so a page shows its math at once and nothing reflows.

- on_post_page finds the math of the page: what pymdownx.arithmatex marked
  (``<span class="arithmatex">\\(...\\)</span>`` and ``<div class="arithmatex">\\[...\\]</div>``)
  and the Markdown cells of notebook pages, where nbconvert leaves formulas as ``$...$``
  text. Each piece is sent to tools/mathjax-render.js (MathJax 3.2.2 from npm, pinned in
  tools/package-lock.json), one Node process per build, started only when a piece is not in
  the cache; the answer replaces the piece. The page gets MathJax's stylesheet (2.6 kB)
  inline. A formula MathJax cannot parse fails the build, naming the page and the formula.
- The cache, .cache/mathjax/<key>.json, maps a hash of each piece to its SVG; the key hashes
  the renderer script and the lockfile, so a new MathJax or a new setting starts afresh.
  A rebuild after editing one page sends only that page's new formulas to Node.
"""

from __future__ import annotations

import atexit
import hashlib
import html as html_lib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
RENDERER = TOOLS / "mathjax-render.js"
CACHE = ROOT / ".cache" / "mathjax"
INSTALL = "install Node.js (apt-get install nodejs npm) and run `npm ci --prefix tools`"

ARITHMATEX = re.compile(r'<(span|div) class="arithmatex">.*?</\1>', re.S)
ARITHMATEX_START = ('<span class="arithmatex">', '<div class="arithmatex">')
NOTEBOOK_CELL = re.compile(r'<div class="[^"]*\bjp-RenderedMarkdown\b[^"]*"[^>]*>')
DIV = re.compile(r"<div\b|</div>")
# MathJax's SVG glyphs: an outline in the formula's <defs> ("MJX-7-TEX-I-1D465": formula 7,
# TeX italic x) and a <use> of it wherever the formula draws that glyph.
GLYPH_DEF = re.compile(r'<path id="MJX-\d+-([A-Z0-9-]+)" d="([^"]*)"></path>')
GLYPH_USE = re.compile(r'xlink:href="#MJX-\d+-([A-Z0-9-]+)"')
BODY = re.compile(r"<body\b[^>]*>")
# Inline SVG in HTML needs no namespace declarations: the parser knows <svg>.
SVG_XMLNS = (' xmlns="http://www.w3.org/2000/svg"', ' xmlns:xlink="http://www.w3.org/1999/xlink"')
STYLESHEET = "stylesheet"
log = logging.getLogger("mkdocs.hooks.prerender_math")
_state: dict = {}


def cache_key() -> str:
    """What the SVG depends on: the renderer (its settings) and the pinned MathJax."""
    digest = hashlib.sha256()
    for path in (RENDERER, TOOLS / "package-lock.json"):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _load_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def on_config(config):
    _close_node()
    path = CACHE / f"{cache_key()}.json"
    _state.update(path=path, cache=_load_cache(path), used=set(), added=0, seconds=0.0)
    # Node starts now, while mkdocs reads the pages: loading MathJax takes 0.2 s of CPU but
    # about a second on a busy machine, which a rebuild after a formula edit would wait for.
    # A build that finds every formula in the cache just stops it (0.2 s of CPU lost).
    if _Node.available():
        _state["node"] = _Node()
    return config


class _Node:
    """tools/mathjax-render.js, started once and fed one JSON line per request."""

    @staticmethod
    def available() -> bool:
        return bool(shutil.which("node")) and (TOOLS / "node_modules" / "mathjax-full").is_dir()

    def __init__(self):
        if not self.available():
            raise PluginError(f"the math is typeset at build time by MathJax on Node: {INSTALL}")
        self.proc = subprocess.Popen(
            [shutil.which("node"), str(RENDERER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise PluginError(f"the MathJax process ({RENDERER.name}) stopped: {INSTALL}")
        answer = json.loads(line)
        if "fatal" in answer:
            raise PluginError(f"{RENDERER.name} failed: {answer['fatal']}")
        return answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def _node() -> _Node:
    if _state.get("node") is None:
        _state["node"] = _Node()
    return _state["node"]


def _close_node():
    node = _state.pop("node", None)
    if node is not None:
        node.close()


atexit.register(_close_node)


def _pieces(output: str) -> list[tuple[int, int]]:
    """(start, end) of every arithmatex element and notebook Markdown cell, in order."""
    found = [m.span() for m in ARITHMATEX.finditer(output)]
    for m in NOTEBOOK_CELL.finditer(output):
        depth = 0
        for tag in DIV.finditer(output, m.start()):
            depth += 1 if tag.group(0) == "<div" else -1
            if depth == 0:
                found.append((m.start(), tag.end()))
                break
    return sorted(found)


def _digest(piece: str) -> str:
    return hashlib.sha256(piece.encode("utf-8")).hexdigest()[:24]


def _typeset(pieces: list[str], page) -> list[str]:
    """The SVG form of each piece: from the cache, or from MathJax (then cached)."""
    cache, keys = _state["cache"], [_digest(p) for p in pieces]
    missing = list({k: p for k, p in zip(keys, pieces, strict=True) if k not in cache}.items())
    if missing:
        results = _node().ask({"fragments": [p for _, p in missing]})["results"]
        problems = []
        for (key, piece), result in zip(missing, results, strict=True):
            errors = result["errors"]
            if not result["formulas"] and piece.startswith(ARITHMATEX_START):
                # MathJax skips a formula whose closing delimiter sits inside an open brace.
                errors = ["no complete formula: a brace or a delimiter is not closed"]
            if errors:
                tex = html_lib.unescape(re.sub(r"<[^>]+>", "", piece)).strip()
                problems.append(f"  {tex[:120]}  <- {'; '.join(errors)}")
            else:
                cache[key] = result["html"]
                _state["added"] += 1
        if problems:
            raise PluginError(
                f"{page.file.src_uri}: MathJax cannot typeset {len(problems)} formula(s):\n"
                + "\n".join(problems)
            )
    _state["used"].update(keys)
    return [cache[k] for k in keys]


def _stylesheet() -> str:
    cache = _state["cache"]
    if STYLESHEET not in cache:
        cache[STYLESHEET] = _node().ask({"stylesheet": True})["css"]
        _state["added"] += 1
    _state["used"].add(STYLESHEET)
    return cache[STYLESHEET]


# What contributors write that Python-Markdown would quietly spoil before any HTML check sees
# it: it turns the escapes \[ and \] into plain brackets, so display math on a line with text
# reaches the reader as "[ ... ]", and inline $$...$$ as "$...$". Checked on the page's own
# Markdown, outside fences and code spans, so the page and line are the source's.
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")


def math_mistakes(markdown: str) -> list[tuple[int, str]]:
    """(line number, line) of each display delimiter that is not alone on its line, and of
    each $$, outside fenced code and code spans."""
    found, fence = [], None
    for number, line in enumerate(markdown.splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)[0]
            continue
        if fence is not None:
            if opening and opening.group(1)[0] == fence:
                fence = None
            continue
        text = CODE_SPAN.sub("", line)
        alone = text.strip() in ("\\[", "\\]")
        if ("\\[" in text or "\\]" in text) and not alone or "$$" in text:
            found.append((number, line.strip()))
    return found


def on_page_markdown(markdown, page, config, files):
    source = getattr(page.file, "abs_src_path", None)
    if not page.file.src_uri.endswith(".md") or not source:
        return markdown
    found = math_mistakes(Path(source).read_text(encoding="utf-8"))
    if found:
        where = "\n".join(f"  {page.file.src_uri}:{n}: {line!r}" for n, line in found)
        raise PluginError(
            f"{page.file.src_uri}: math that Markdown would show raw (display math needs \\[ "
            "and \\] each alone on its line; inline math is \\( ... \\), not $$; see "
            "docs/contributing.md):\n" + where
        )
    return markdown


def on_post_page(output, page, config):
    start = time.perf_counter()
    try:
        output = _prerender(output, page)
    finally:
        _state["seconds"] += time.perf_counter() - start
    _fail_on_raw_tex(output, page)
    return output


# What the reader would see as raw TeX: a delimiter left in the article's text once its math
# is typeset (code, typeset formulas and scripts removed first).
RAW_DELIMITER = re.compile(r"\\\(|\\\[|\$\$")
NOT_TEXT = re.compile(r"<(pre|code|script|style|svg|mjx-container)\b.*?</\1>|<[^>]+>", re.S | re.I)


def raw_tex(output: str) -> list[str]:
    """Each raw TeX delimiter in the article's text, with the text that follows it."""
    start, end = output.find("<article"), output.find("</article>")
    if start < 0:
        return []
    text = html_lib.unescape(NOT_TEXT.sub(" ", output[start:end]))
    pieces = (text[m.start() : m.start() + 40] for m in RAW_DELIMITER.finditer(text))
    return [piece.split("\n")[0].strip() for piece in pieces]


def _fail_on_raw_tex(output: str, page) -> None:
    found = raw_tex(output)
    if not found:
        return
    source = getattr(page.file, "abs_src_path", None)
    lines = Path(source).read_text(encoding="utf-8").splitlines() if source else []
    where = []
    for piece in found:
        words = piece.split()[:3]
        line = next((n for n, text in enumerate(lines, 1) if all(w in text for w in words)), None)
        where.append(f"  {page.file.src_uri}:{line or '?'}: {piece.strip()!r}")
    raise PluginError(
        f"{page.file.src_uri}: TeX left raw in the rendered page (display math needs \\[ and "
        "\\] each on a line of their own; see docs/contributing.md):\n" + "\n".join(where)
    )


def _prerender(output: str, page) -> str:
    spans = _pieces(output)
    if not spans:
        return output
    svgs = _typeset([output[a:b] for a, b in spans], page)
    parts, at = [], 0
    for (start, end), svg in zip(spans, svgs, strict=True):
        # A display formula wider than the column scrolls sideways (extra.css); tabindex
        # lets a keyboard scroll it too. (MathJax in the browser made every formula
        # focusable, for its menu.)
        svg = svg.replace('<div class="arithmatex">', '<div class="arithmatex" tabindex="0">', 1)
        for declaration in SVG_XMLNS:
            svg = svg.replace(declaration, "")
        parts += [output[at:start], svg]
        at = end
    parts.append(output[at:])
    output = _share_glyphs("".join(parts), page)
    style = f'<style id="mathjax-svg-styles">{_stylesheet()}</style>\n</head>'
    return output.replace("</head>", style, 1)


def _share_glyphs(output: str, page) -> str:
    """One copy of each glyph per page, as MathJax's own "global" font cache does: every
    formula comes with the outlines of its glyphs (its <defs>); here they move into one hidden
    <svg> at the top of the page, and the formulas point at that. On the attention page this
    is 32 kB of outlines instead of 113 kB."""
    glyphs: dict[str, str] = {}

    def keep(m):
        name, outline = m.group(1), m.group(2)
        if glyphs.setdefault(name, outline) != outline:
            raise PluginError(f"{page.file.src_uri}: two outlines for MathJax glyph {name}")
        return ""

    output = GLYPH_DEF.sub(keep, output).replace("<defs></defs>", "")
    # Short ids (mj0, mj1, ...: a page has a few hundred uses of them) and SVG 2's plain
    # href: 12 kB less on the attention page.
    short = {name: f"mj{n:x}" for n, name in enumerate(glyphs)}
    output = GLYPH_USE.sub(lambda m: f'href="#{short[m.group(1)]}"', output)
    shared = "".join(f'<path id="{short[n]}" d="{d}"></path>' for n, d in glyphs.items())
    hidden = (
        '<svg id="MJX-glyphs" style="display: none" aria-hidden="true" '
        f'xmlns="http://www.w3.org/2000/svg"><defs>{shared}</defs></svg>'
    )
    body = BODY.search(output)
    return output[: body.end()] + hidden + output[body.end() :]


def on_post_build(config):
    _close_node()
    log.info(
        f"math: {len(_state['used'])} distinct pieces, {_state['added']} of them new to the "
        f"cache (typeset by MathJax now), {_state['seconds']:.2f} s in this hook"
    )
    if not _state.get("added"):
        return
    path = _state["path"]
    # Keep what another build (a test's throw-away site) added meanwhile, unless the file
    # grows large: then only this build's pieces.
    merged = _load_cache(path)
    if len(merged) > 5000:
        merged = {}
    merged.update({k: _state["cache"][k] for k in _state["used"]})
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob("*.json"):  # another MathJax or setting: never read again
        if old != path:
            old.unlink()
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(merged, f, ensure_ascii=False, separators=(",", ":"))
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep the cache from other users
    os.replace(tmp, path)


def on_build_error(error):
    _close_node()
