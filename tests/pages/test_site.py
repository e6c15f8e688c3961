"""The built site: strict build, code shown == code tested, nothing loaded from the internet."""

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hooks.page_parser import RUN, markdown_snippet_expander, parse_page
from lab.shared.common import ROOT

PAGES = sorted((ROOT / "docs").rglob("*.md"))


class _CodeBlocks(HTMLParser):
    """Collects the text of each highlighted code block, with its language."""

    def __init__(self):
        super().__init__()
        self.blocks: list[tuple[str, str]] = []
        self._lang: list[str | None] = []  # one entry per open <div>
        self._in_code = 0
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div":
            langs = [c[len("language-") :] for c in classes if c.startswith("language-")]
            # Signatures that mkdocstrings renders on the API pages are not page code.
            is_code = langs and "highlight" in classes and "doc-signature" not in classes
            self._lang.append(langs[0] if is_code else None)
        elif tag == "code" and self._lang and self._lang[-1]:
            self._in_code += 1
            self._text = []

    def handle_endtag(self, tag):
        if tag == "div" and self._lang:
            self._lang.pop()
        elif tag == "code" and self._in_code:
            self._in_code -= 1
            self.blocks.append((self._lang[-1], "".join(self._text)))

    def handle_data(self, data):
        if self._in_code:
            self._text.append(data)


def _html_for(site: Path, page: Path) -> str:
    rel = page.relative_to(ROOT / "docs").with_suffix("")
    # docs/index.md -> index.html, docs/reference/index.md -> reference/index.html
    target = site / (rel.parent if rel.name == "index" else rel) / "index.html"
    return target.read_text(encoding="utf-8")


def test_strict_build_succeeds(built_site):
    assert (built_site / "attention" / "index.html").is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_code_shown_is_code_tested(built_site, page):
    """Every python and bash block the reader sees is one the harness runs, with the same text.

    This catches a fence the harness failed to collect (a python-looking block it missed) and
    any difference between our include expansion and the one of the real build.
    """
    expand = markdown_snippet_expander(ROOT / "mkdocs.yml")
    tested = [(b.lang, b.code) for b in parse_page(page, ROOT, expand) if b.kind]
    parser = _CodeBlocks()
    parser.feed(_html_for(built_site, page))
    shown = [(lang, html.unescape(code)) for lang, code in parser.blocks if lang in RUN]
    assert len(shown) == len(tested), "runnable blocks on the rendered page vs blocks collected"
    for (shown_lang, s), (tested_lang, t) in zip(shown, tested, strict=True):
        assert shown_lang == tested_lang
        assert s.rstrip("\n") == t.rstrip("\n")


def test_no_page_loads_anything_from_another_host(built_site):
    """Static check of the built HTML; the browser tests watch the real requests."""
    fetched = re.compile(r"<(script|img|iframe|source|link)\b([^>]*)>")
    offenders = []
    for page in built_site.rglob("*.html"):
        for tag, attrs in fetched.findall(page.read_text(encoding="utf-8")):
            if tag == "link" and re.search(r'rel="(canonical|alternate|next|prev)"', attrs):
                continue  # names an address, fetches nothing
            for url in re.findall(r'(?:src|href)="([^"]+)"', attrs):
                if re.match(r"(https?:)?//", url):
                    offenders.append(f"{page.relative_to(built_site)}: <{tag}> {url}")
    assert not offenders


def test_mermaid_loaded_only_where_a_diagram_is(built_site):
    for page in built_site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        has_diagram = 'class="mermaid"' in text
        loads_mermaid = "mermaid.esm.min.mjs" in text
        assert has_diagram == loads_mermaid, page.relative_to(built_site)
        if has_diagram:
            # The stand-in global (overrides/main.html) comes before Material's bundle: if
            # Material found no global `mermaid` it would fetch Mermaid from unpkg.com.
            stand_in = text.find("window.mermaid = ")
            bundle = re.search(r'<script src="[^"]*assets/javascripts/bundle\.[^"]*"', text)
            assert 0 <= stand_in < bundle.start(), page.relative_to(built_site)


def test_math_arrives_typeset_and_no_mathjax_loads(built_site):
    """The build typeset every formula (hooks/prerender_math.py): no page loads MathJax, no
    TeX is left for a browser to typeset, and each formula is an SVG with its MathML."""
    formulas = 0
    for page in built_site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(built_site)
        assert not re.search(r"<script[^>]*(mathjax|tex-chtml)", text, re.I), where
        assert not re.search(r'class="arithmatex">\\[(\[]', text), where
        n = text.count('<mjx-container class="MathJax" jax="SVG"')
        assert text.count("<mjx-assistive-mml") == n, where
        assert ('id="mathjax-svg-styles"' in text) == (n > 0), where
        formulas += n
    notebook = (built_site / "see-attention" / "index.html").read_text(encoding="utf-8")
    assert notebook.count("<mjx-container") >= 10  # its $...$ cells, typeset too
    assert formulas >= 250


def test_vendored_scripts_are_pinned_and_licensed():
    vendor = ROOT / "docs" / "assets" / "vendor"
    versions = (vendor / "VERSIONS").read_text()
    script = (ROOT / "scripts" / "vendor-js.sh").read_text()
    pinned = re.search(r"^MERMAID_VERSION=(\S+)", script, re.M).group(1)
    assert f"mermaid {pinned} " in versions
    assert (vendor / "mermaid" / "LICENSE").stat().st_size > 0
    assert not (vendor / "mathjax").exists()  # MathJax runs at build time only, from tools/
    package = json.loads((ROOT / "tools" / "package.json").read_text())
    lock = json.loads((ROOT / "tools" / "package-lock.json").read_text())
    assert package["dependencies"]["mathjax-full"] == "3.2.2"  # exact, no range
    assert lock["packages"]["node_modules/mathjax-full"]["version"] == "3.2.2"


def test_every_snippets_module_has_an_api_page_that_a_page_links_to():
    """docs/reference/<module>.md renders the module, is in the nav, and a page links to it."""
    # snippets/lessons/attention.py -> "lessons/attention", documented as snippets.lessons.attention
    modules = sorted(
        p.relative_to(ROOT / "snippets").with_suffix("").as_posix()
        for p in (ROOT / "snippets").rglob("*.py")
        if p.stem != "__init__"
    )
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.read_text() for p in (ROOT / "docs").glob("*.*") if p.suffix in (".md", ".py")]
    problems = []
    for module in modules:
        dotted = module.replace("/", ".")
        ref = ROOT / "docs" / "reference" / f"{module}.md"
        if not ref.is_file() or f"::: snippets.{dotted}\n" not in ref.read_text():
            problems.append(f"{module}: docs/reference/{module}.md does not render it")
        if f"snippets.{dotted}: reference/{module}.md" not in nav:
            problems.append(f"{module}: not in the nav of mkdocs.yml")
        # A page links as reference/x.md; the notebook, as a URL, reference/x/.
        if not any(f"reference/{module}.md)" in t or f"reference/{module}/)" in t for t in pages):
            problems.append(f"{module}: no page links to its API reference")
    assert not problems
