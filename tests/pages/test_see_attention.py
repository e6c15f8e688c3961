"""The "See attention" notebook page as built: its figures in the site's ink, its printed
results, no CDN script (hooks/notebook_cdn.py), and its math typeset in a real browser."""

import re

import pytest

from lab.shared.style import INK


def test_notebook_page_has_its_figures_and_no_cdn(built_site):
    page = (built_site / "see-attention" / "index.html").read_text(encoding="utf-8")
    figures = re.findall(r'<svg[^>]*\bid="figure-(\d+)"[^>]*>', page)
    assert len(figures) >= 5
    tags = re.findall(r'<svg[^>]*\bid="figure-\d+"[^>]*>', page)
    assert all('role="img"' in t and 'aria-label="' in t for t in tags)
    svgs = re.findall(r'<svg[^>]*\bid="figure-\d+".*?</svg>', page, re.S)
    assert svgs and all(f"stroke: {INK}" in svg for svg in svgs)  # the site's one ink
    for printed in ("uniform baseline: 0.042", "layer head  induction", "(L, H, T, T)"):
        assert printed in page
    for remote in ("cdnjs", "mermaid.esm", "x-mathjax-config", "require.js"):
        assert remote not in page, remote


NOTEBOOK_MATH = """
() => {
  const cells = [...document.querySelectorAll(".jp-RenderedMarkdown")];
  const text = cells.map(cell => {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll("code, mjx-container").forEach(el => el.remove());
    return copy.textContent;
  }).join(" ");
  return {
    typeset: cells.reduce((n, cell) => n + cell.querySelectorAll("mjx-container").length, 0),
    errors: document.querySelectorAll(
      ".jp-RenderedMarkdown mjx-merror, .jp-RenderedMarkdown [data-mml-node='merror']").length,
    dollars: (text.match(/\\$/g) || []).length,
    figures: document.querySelectorAll("svg[id^='figure-'][role='img']").length,
  };
}
"""


@pytest.mark.browser
def test_notebook_math_is_typeset_and_figures_shown(browser, site_server):
    """The build typesets the notebook's Markdown cells too (hooks/prerender_math.py), where
    nbconvert writes every formula between dollars; none may be left raw."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(site_server.base + "see-attention/")
        state = page.evaluate(NOTEBOOK_MATH)
    finally:
        context.close()
    assert state["typeset"] >= 10 and state["errors"] == 0, state
    assert state["dollars"] == 0, state
    assert state["figures"] >= 5, state
