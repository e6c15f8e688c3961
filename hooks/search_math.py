"""MkDocs hook: the search index holds formulas as text a reader can read, not as TeX.

The search plugin indexes each page's HTML before hooks/prerender_math.py typesets it, so
its index would show `\\(T \\times T\\)` in every result preview. on_post_page reads, from
each typeset formula, the MathML copy MathJax made for screen readers and writes it out as
plain text (`T×T`, `√D`, `softmax(QKᵀ/√D)V` style: fractions as a/b, roots as √,
exponents after ^); on_post_build replaces every formula of search/search_index.json with
that text. A formula found in the index but never typeset fails the build: the index
would show it raw.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from mkdocs.exceptions import PluginError

FORMULA = re.compile(
    r'<span class="arithmatex">(.*?)</span>|<div class="arithmatex"[^>]*>(.*?)</div>', re.S
)
TYPESET = re.compile(r"<mjx-container\b.*?</mjx-container>", re.S)
MATHML = re.compile(r"<math\b.*?</math>", re.S)
CODE = re.compile(r"(<code>.*?</code>|<pre>.*?</pre>)", re.S)
IN_INDEX = re.compile(r"\\\((.*?)\\\)|\\\[(.*?)\\\]", re.S)
_state: dict = {}


class _Tree(HTMLParser):
    """A MathML fragment as nested [tag, children] lists (text as str)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = ["root", []]
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = [tag, []]
        self.stack[-1][1].append(node)
        self.stack.append(node)

    def handle_endtag(self, tag):
        while len(self.stack) > 1:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        self.stack[-1][1].append(data)


def _atom(text: str) -> str:
    """Bracket a piece that is more than one symbol."""
    return text if len(text) <= 1 or text.isalnum() else f"({text})"


def _text(node) -> str:
    if isinstance(node, str):
        return node.strip()
    tag, children = node
    parts = [_text(c) for c in children]
    if tag == "mfrac" and len(parts) == 2:
        return f"{_atom(parts[0])}/{_atom(parts[1])}"
    if tag == "msqrt":
        return "√" + _atom("".join(parts))
    if tag == "mroot" and len(parts) == 2:
        return f"{parts[1]}√{_atom(parts[0])}"
    if tag in ("msup", "msub", "msubsup", "munder", "mover", "munderover") and parts:
        marks = {
            "msup": ["^"],
            "msub": ["_"],
            "msubsup": ["_", "^"],
            "munder": ["_"],
            "mover": ["^"],
            "munderover": ["_", "^"],
        }[tag]
        out = parts[0]
        for mark, part in zip(marks, parts[1:], strict=False):
            if tag == "mover" and part in ("~", "^", "¯", "→"):  # an accent, not a power
                continue
            out += mark + _atom(part)
        return out
    if tag == "mspace":
        return " "
    return "".join(parts)


def mathml_text(mathml: str) -> str:
    """The plain text of a MathML formula, e.g. `√D` for <msqrt><mi>D</mi></msqrt>."""
    tree = _Tree()
    tree.feed(mathml)
    return re.sub(r"\s+", " ", _text(tree.root)).strip()


def _source(piece: str) -> str:
    """The TeX inside an arithmatex element, as text (delimiters kept)."""
    return html_lib.unescape(re.sub(r"<[^>]+>", "", piece)).strip()


def on_config(config):
    _state["plain"] = {}
    return config


def on_page_content(html, page, config, files):
    """Note each formula's TeX as the index will hold it (before it is typeset)."""
    _state.setdefault("pending", {})[page.file.src_uri] = [
        _source(m.group(1) or m.group(2)) for m in FORMULA.finditer(html)
    ]
    return html


def on_post_page(output, page, config):
    """Pair each formula's TeX with the text of the MathML it was typeset into."""
    sources = _state.get("pending", {}).pop(page.file.src_uri, [])
    typeset = [m.group(0) for m in TYPESET.finditer(output)]
    formulas = [t for t in typeset if MATHML.search(t)]
    # Inline and display formulas of the article, in order; notebook cells are not indexed.
    for tex, svg in zip(sources, formulas, strict=False):
        _state["plain"][" ".join(tex.split())] = mathml_text(MATHML.search(svg).group(0))
    return output


def on_post_build(config):
    index = Path(config["site_dir"]) / "search" / "search_index.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    missing = set()

    def plain(m):
        tex = " ".join(html_lib.unescape(m.group(0)).split())
        if tex not in _state["plain"]:
            missing.add(tex)
            return m.group(0)
        return html_lib.escape(_state["plain"][tex], quote=False)

    def outside_code(text: str) -> str:
        parts = CODE.split(text)  # code, where a formula's delimiters are shown as written
        return "".join(p if n % 2 else IN_INDEX.sub(plain, p) for n, p in enumerate(parts))

    for doc in data["docs"]:
        doc["text"] = outside_code(doc["text"])
        doc["title"] = outside_code(doc["title"])
    if missing:
        raise PluginError(
            f"search index: {len(missing)} formula(s) never typeset, e.g. {sorted(missing)[:3]}"
        )
    index.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), "utf-8")
