"""Tests for hooks/prerender_math.py: the site's math typeset at build time by MathJax on Node.

The hook is called as mkdocs calls it, on small pages; it runs the real renderer
(tools/mathjax-render.js) on the MathJax that `npm ci --prefix tools` installed.
"""

from __future__ import annotations

import re
import shutil
from types import SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from hooks import prerender_math
from lab.shared.common import ROOT

if shutil.which("node") is None or not (ROOT / "tools" / "node_modules" / "mathjax-full").is_dir():
    pytest.skip(
        "needs Node.js and `npm ci --prefix tools` (as the build does)", allow_module_level=True
    )


@pytest.fixture
def hook(tmp_path, monkeypatch):
    module = prerender_math
    monkeypatch.setattr(module, "CACHE", tmp_path / "cache")  # not the project's cache
    module.on_config(None)
    yield module
    module.on_post_build(None)


def page(src_uri: str = "demo.md"):
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def html(article: str) -> str:
    return f"<html><head><title>t</title></head><body><article>{article}</article></body></html>"


INLINE = r'<span class="arithmatex">\(\frac{1}{\sqrt{D}} &lt; x\)</span>'
DISPLAY = r'<div class="arithmatex">\[\mathrm{softmax}(q k^\top) v\]</div>'
NOTEBOOK = (
    '<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput">'
    "<p>weights $w_{ij}$ and <code>$not math$</code></p><div><p>$$x^2$$</p></div></div>"
)


def test_formulas_become_svg_with_mathml_and_no_tex_is_left(hook):
    out = hook.on_post_page(html(f"<p>{INLINE}</p>{DISPLAY}{NOTEBOOK}"), page(), None)
    article = out[out.index("<article>") :]
    assert article.count('<mjx-container class="MathJax" jax="SVG"') == 4
    assert article.count('display="true"') >= 2  # \[...\] and $$...$$
    assert article.count("<mjx-assistive-mml") == 4  # what screen readers read
    assert "<mo>&lt;</mo>" in article and "<msub><mi>w</mi>" in article
    assert "<code>$not math$</code>" in article  # code is never typeset
    assert not re.search(r"\\\(|\\\[|\$", re.sub(r"<code>.*?</code>", "", article))
    assert out.count('<style id="mathjax-svg-styles">') == 1
    assert out.count('<div class="arithmatex" tabindex="0">') == 1  # keyboard-scrollable


def test_glyphs_are_shared_once_per_page(hook):
    out = hook.on_post_page(html(f"<p>{INLINE} {INLINE}</p>"), page(), None)
    ids = re.findall(r'<path id="([^"]+)"', out)
    assert len(ids) == len(set(ids))  # each glyph outline once on the page
    used = set(re.findall(r'<use [^>]*href="#([^"]+)"', out))
    assert used and used <= set(ids)  # every glyph drawn is defined
    assert out.index('<svg id="MJX-glyphs"') < out.index("<article>")


def test_a_page_without_math_is_left_alone(hook):
    source = html("<p>No math: $5 and 3 dollars.</p>")
    assert hook.on_post_page(source, page(), None) == source


def test_a_formula_mathjax_cannot_parse_fails_the_build_naming_the_page(hook):
    broken = (
        r'<span class="arithmatex">\(\frac{1}{\sqrt{D}\)</span>'  # a brace never closed
        r'<span class="arithmatex">\(\sqrtt{D}\)</span>' + INLINE  # a typo for \sqrt
    )
    with pytest.raises(PluginError) as err:
        hook.on_post_page(html(broken), page("docs-page.md"), None)
    message = str(err.value)
    assert message.startswith("docs-page.md: MathJax cannot typeset 2 formula(s)")
    assert "Undefined control sequence \\sqrtt" in message
    assert "\\frac{1}{\\sqrt{D}" in message and "a brace or a delimiter is not closed" in message


def test_a_rebuild_takes_known_formulas_from_the_cache(hook, monkeypatch):
    hook.on_post_page(html(INLINE), page(), None)
    hook.on_post_build(None)  # writes the cache, stops Node
    hook.on_config(None)  # the next build

    def no_request(self, request):
        raise AssertionError("MathJax asked although every formula was cached")

    monkeypatch.setattr(hook._Node, "ask", no_request)
    out = hook.on_post_page(html(INLINE), page(), None)
    assert "<mjx-container" in out
    with pytest.raises(AssertionError, match="MathJax asked"):
        hook.on_post_page(html(DISPLAY), page(), None)  # a new formula does need MathJax


def test_an_error_inside_mathjax_fails_the_build_too(hook):
    """Not a TeX error: MathJax itself fails (here on a form feed and a carriage return,
    what "\\frac" and "\\right" become in a Python string without its r prefix) and draws
    an error node. The build must fail on that as well."""
    garbled = '<div class="arithmatex">\\[\\left(\frac{q}{k}\right)\\]</div>'
    with pytest.raises(PluginError, match=r"demo\.md: MathJax cannot typeset 1 formula"):
        hook.on_post_page(html(garbled), page(), None)


def test_tex_left_raw_fails_the_build_naming_page_and_line(hook, tmp_path):
    """The rendered-page check alone, on HTML that still holds TeX. A real Markdown page's
    display math on a line with text never reaches it with its backslashes (Markdown turns
    \\[ into [): tests/hooks/test_math_guard_build.py builds real pages for both guards."""
    source = tmp_path / "demo.md"
    source.write_text("# Demo\n\nIntro.\n\nThe scores \\[ QK^\\top \\] on one line.\n")
    demo = SimpleNamespace(file=SimpleNamespace(src_uri="demo.md", abs_src_path=str(source)))
    raw = html(r"<p>The scores \[ QK^\top \] on one line.</p><pre><code>\(in code\)</code></pre>")
    with pytest.raises(PluginError) as err:
        hook.on_post_page(raw, demo, None)
    message = str(err.value)
    assert "demo.md: TeX left raw in the rendered page" in message
    assert "demo.md:5: '\\\\[ QK^\\\\top \\\\] on one line.'" in message, message
    assert "in code" not in message  # code is shown as written
    assert hook.raw_tex(html(f"<p>{INLINE}</p>")) == [r"\(\frac{1}{\sqrt{D}} < x\)"]
    assert hook.raw_tex(hook.on_post_page(html(f"<p>{INLINE}</p>"), page(), None)) == []
