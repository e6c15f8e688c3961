"""Planted faults: copies of built pages whose article holds one fault each (from
tests/browser/planted/), opened in the browser, prove that every check of tests/browser/checks.py
can fail, and that the clean control passes them all."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from hooks import prerender_math
from lab.shared.common import ROOT
from tests.browser import checks as bc
from tests.browser import server as bs
from tests.browser import tiers
from tests.browser import visit as bv

pytestmark = pytest.mark.browser

PLANTED = ROOT / "tests" / "browser" / "planted"

if bs.missing_browser() and os.environ.get("REQUIRE_BROWSER") != "1":
    pytest.skip(f"browser tests need {bs.missing_browser()}", allow_module_level=True)


def _without_toc(page_html: str) -> str:
    """Drop the page's table of contents (Material has two: sidebar and inside the nav)."""
    tag = re.compile(r"<nav\b[^>]*>|</nav>")
    while (start := page_html.find('<nav class="md-nav md-nav--secondary"')) != -1:
        depth = 0
        for m in tag.finditer(page_html, start):
            depth += 1 if m.group(0) != "</nav>" else -1
            if depth == 0:
                page_html = page_html[:start] + page_html[m.end() :]
                break
        else:
            raise AssertionError("unbalanced <nav> in the built page")
    return page_html


def _with_article(page_html: str, article: str) -> str:
    """A built page with its article replaced: same header, navigation, scripts and
    stylesheets; its table of contents goes, since it lists the old article's headings."""
    # The old article's math goes too: its glyphs and MathJax's styles (the build's hook
    # puts them back if the new article has math).
    page_html = re.sub(r'<svg id="MJX-glyphs".*?</svg>', "", page_html, count=1, flags=re.S)
    page_html = re.sub(r'<style id="mathjax-svg-styles">.*?</style>\n', "", page_html, flags=re.S)
    new, n = re.subn(
        r"(<article[^>]*>).*?(</article>)",
        lambda m: m.group(1) + article + m.group(2),
        _without_toc(page_html),
        count=1,
        flags=re.S,
    )
    assert n == 1
    return new


FIRST_CODE_BLOCK = re.compile(
    r'<div class="language-python highlight">.*?</code></pre></div>', re.S
)


def _planted() -> dict[str, tuple[str, str]]:
    """name -> (the built page it is planted into, its article), from tests/browser/planted/."""
    found = {}
    for path in sorted(PLANTED.glob("*.html")):
        text = path.read_text(encoding="utf-8")
        head, _, article = text.partition("-->\n")
        found[path.stem] = (re.match(r"<!-- planted into: (\S+)", head)[1], article)
    return found


NOT_TYPESET = {"untypeset-math"}  # the others go through the build's math step


@pytest.fixture(scope="session")
def planted(site_browser, site_server, built_site):
    """Open a copy of a built page whose article holds one planted fault (PLANTED); its math
    typeset by the build's own hook (hooks/prerender_math.py), unless NOT_TYPESET."""
    hook = prerender_math
    hook.on_config(None)
    templates = {
        name: (built_site / name / "index.html").read_text(encoding="utf-8")
        for name in ("attention", "conventions", "reference/core/model")
    }
    code = FIRST_CODE_BLOCK.search(templates["attention"]).group(0)
    where = {}  # name -> its path on the site, as deep as its template (relative links hold)
    for name, (template, article) in _planted().items():
        where[name] = (Path(template).parent / f"planted-{name}").as_posix()
        folder = site_server.overlay / where[name]
        folder.mkdir(parents=True)
        page = _with_article(templates[template], article.replace("{code}", code))
        if name not in NOT_TYPESET:
            src = SimpleNamespace(file=SimpleNamespace(src_uri=f"planted-{name}.md"))
            page = hook.on_post_page(page, page=src, config=None)
        (folder / "index.html").write_text(page, encoding="utf-8")
    for svg in PLANTED.glob("*.svg"):  # a planted page's image, <name>.svg, is its figure.svg
        shutil.copy(svg, site_server.overlay / where[svg.stem] / "figure.svg")
    hook.on_post_build(None)

    def open_planted(name: str) -> bv.Visit:
        # An untypeset page never completes its first screen: 3 s is ample to see that. The
        # others get the site's timeout (a loaded machine draws a diagram slowly); a page
        # returns as soon as its first screen is complete.
        timeout_ms = 3000 if name in NOT_TYPESET else bv.RENDER_TIMEOUT_MS
        return site_browser.visit(f"{site_server.base}{where[name]}/", timeout_ms=timeout_ms)

    open_planted.tab, open_planted.where = site_browser, where
    return open_planted


def test_planted_clean_page_passes_every_check(planted, site_server):
    """The control: the checks do not fail a page merely for being a planted copy."""
    visit = planted("clean")
    page = visit.page
    problems = (
        bc.check_rendered(visit)
        + bc.check_math(page)
        + bc.check_formula_sizes(page)
        + bc.check_diagrams(page)
        + bc.check_links(page, site_server.base)
        + bc.check_copy_buttons(page)
        + bc.check_code_contrast(page)
        + bc.check_figures(page)
        + bc.check_headings(page)
        + bc.check_phone_fit(page)
        + bc.check_phone_overflow(page)
        + bc.check_desktop_code_fit(page)
        + bc.check_wide_formulas(page)
        + bc.check_network(visit)
    )
    assert not bc.toggle_palette(page)
    problems += bc.check_figures(page) + bc.check_math_contrast(page)
    problems += bc.check_code_contrast(page)
    assert not bc.toggle_palette(page)
    assert not problems
    assert bc.math_state(page)["formulas"] == 2
    assert len(bc.diagram_state(page)["diagrams"]) == 1
    assert visit.diagram_waits != [None]  # drawn once scrolled to


def test_planted_untypeset_formula_is_caught(planted):
    visit = planted("untypeset-math")
    problems = bc.check_math(visit.page)
    text = "\n".join(problems)
    assert "2 of 2 formulas not typeset" in text, problems
    assert "raw TeX delimiter left in the text" in text, problems


def test_planted_white_figure_is_caught_on_the_dark_scheme(planted):
    page = planted("white-figure").page
    assert not bc.check_figures(page)  # white on the white page: nothing to see
    assert not bc.toggle_palette(page)
    problems = bc.check_figures(page)
    assert not bc.toggle_palette(page)
    assert len(problems) == 1, problems
    assert "figure 'figure.svg' in scheme slate: a light box on the dark scheme" in problems[0]


def test_planted_faint_figure_is_caught(planted):
    problems = bc.check_figures(planted("faint-figure").page)
    assert len(problems) == 1 and "ink contrast 2.3" in problems[0], problems


def test_planted_broken_diagram_is_caught(planted):
    visit = planted("broken-diagram")
    problems = bc.check_diagrams(visit.page)
    assert any("left unrendered" in p for p in problems), problems
    assert any("Syntax error" in p for p in problems), problems
    assert any(p.startswith("page error:") for p in bc.check_network(visit))


def test_planted_missing_anchor_is_caught(planted, site_server):
    visit = planted("missing-anchor")
    problems = bc.check_links(visit.page, site_server.base)
    text = "\n".join(problems)
    assert "no id 'no-such-heading'" in text, problems
    assert "no id 'nowhere'" in text, problems
    assert "no-such-page/ answers HTTP 404" in text, problems
    assert len(problems) == 3, problems  # the page's own navigation links all resolve


def test_planted_faint_formula_is_caught(planted):
    visit = planted("faint-math")
    assert not bc.check_math(visit.page)  # typeset, with glyphs...
    problems = bc.check_math_contrast(visit.page)  # ...but not legible
    assert len(problems) == 1 and "contrast 1.2" in problems[0], problems


def test_planted_faint_text_and_code_are_caught(planted):
    """axe finds the faint prose and leaves the code's faint token to check_code_contrast."""
    page = planted("faint-text").page
    problems = bc.check_accessibility(page)["problems"]
    assert len(problems) == 1, problems
    assert problems[0].startswith("axe color-contrast") and "planted-faint" in problems[0]
    problems = bc.check_code_contrast(page)
    assert len(problems) == 1, problems
    assert problems[0].startswith("code token mi '12' in scheme default: contrast 1."), problems


def test_planted_squashed_formula_is_caught(planted):
    page = planted("squashed-math").page
    assert not bc.check_math(page)  # typeset, with glyphs...
    problems = bc.check_formula_sizes(page)  # ...but drawn 2 px wide
    assert len(problems) == 2, problems  # at desktop and at phone width
    assert all("drawn 2x" in p and "not MathJax's" in p for p in problems), problems


def test_planted_cdn_script_is_caught(planted):
    visit = planted("cdn-script")
    problems = bc.check_network(visit)
    assert "request to another host (aborted): https://cdn.example.com/x.js" in problems, problems


def test_readme_screenshot_is_the_site_as_built(browser, site_server):
    """The README's picture is what `python -m tests.browser.readme_shot` makes from this
    site: same size, and the same picture once both are shrunk to grey thumbnails (a new
    heading, code block or navigation entry on that screen moves far more than this)."""
    import io

    import numpy as np
    from PIL import Image

    from tests.browser import readme_shot

    def thumbnail(png: bytes):
        image = Image.open(io.BytesIO(png)).convert("L").resize((160, 100), Image.LANCZOS)
        return np.asarray(image, dtype=float)

    committed = readme_shot.PICTURE.read_bytes()
    assert Image.open(io.BytesIO(committed)).size == (1280, 800)
    fresh = readme_shot.take(browser, site_server.base)
    difference = float(np.abs(thumbnail(committed) - thumbnail(fresh)).mean())
    assert difference < 4, (
        f"the README's screenshot differs from the built site (mean difference {difference:.1f} "
        "of 255): run `.venv/bin/python -m tests.browser.readme_shot` and commit the picture"
    )


def test_planted_too_wide_page_is_caught(planted):
    page = planted("too-wide").page
    problems = bc.check_phone_fit(page)
    assert len(problems) == 1 and "scrolls sideways" in problems[0], problems
    assert "div.planted-wide" in problems[0], problems
    assert bc.check_phone_overflow(page) == problems  # the API pages' cheap half of it


def test_planted_long_code_line_is_caught_at_desktop_width(planted):
    """A code line longer than the column scrolls its block sideways at 1280 px, caught; a
    printed line as long wraps (extra.css) and is not; nor is a block in a collapsed note
    that fits, which the check opens to measure."""
    problems = bc.check_desktop_code_fit(planted("long-code-line").page)
    assert len(problems) == 2, problems
    assert all("scrolls sideways at 1280 px" in p for p in problems), problems
    assert "longest line 190 characters" in problems[0], problems
    assert "under 'In a note'" in problems[1], problems


def test_planted_bad_headings_are_caught(planted):
    problems = bc.check_headings(planted("bad-headings").page)
    assert problems == [
        "2 h1 headings in the article, not 1: ['Bad headings', 'Another title']",
        "heading 'Two levels down at once' is an h4 right under an h2: a level skipped",
        "heading 'No id to link to' has no id: nothing can link to it",
        "two headings share the id 'twice'",
    ], problems


def test_planted_api_page_faults_are_caught_by_the_cheap_checks(planted, site_server):
    """An API page with one fault for each cheap check, inspected as the suite inspects the
    API pages that get only those (tests/browser/tiers.py): each check finds its fault, and
    none of the expensive checks runs. A cheap check dropped from inspect_page fails this."""
    from tests.pages.test_browser import inspect_page

    planted("clean")  # the fixture writes the planted pages; this one leaves the tab light
    url = f"{site_server.base}{planted.where['api-faults']}/"
    report = inspect_page(planted.tab, site_server, url, every_check=False)
    found = report["problems"]
    assert found["rendered"] == [], found
    assert any("no id 'no-such-member'" in p for p in found["links"]), found
    assert any(p.startswith("raw TeX delimiter left in the text: ") for p in found["math"]), found
    assert any("an h4 right under an h1" in p for p in found["headings"]), found
    assert any("scrolls sideways: div.planted-wide" in p for p in found["phone"]), found
    assert any("console error: planted: a docstring's script" in p for p in found["network"])
    assert set(report["ran"]) == set(tiers.CHEAP), report["ran"]
    assert not report["every_check"] and not report["dark_checked"]


def test_planted_formula_without_scroll_shadow_is_caught(planted):
    page = planted("formula-without-shadow").page
    assert not bc.check_phone_fit(page)  # it scrolls inside its own box...
    problems = bc.check_wide_formulas(page)  # ...but does not show that it does
    assert len(problems) == 1 and "without a scroll shadow" in problems[0], problems


def test_planted_copy_button_over_code_is_caught(planted):
    """A block without the strip under the copy button: its first line's end lies under the
    button, at desktop width (check_copy_buttons) and at phone width (check_phone_fit)."""
    page = planted("copy-covers-code").page
    problems = bc.check_copy_buttons(page)
    assert len(problems) == 1, problems
    assert (
        problems[0].startswith(
            "code block 0 at 1280 px: the copy button covers the end of line 1 ("
        )
        and "eleventh_term + last'" in problems[0]
    ), problems
    problems = bc.check_phone_fit(page)
    assert len(problems) == 1 and problems[0].startswith("code block 0 at 390 px"), problems


def test_planted_small_figure_text_and_wrapping_table_are_caught(planted):
    """A figure whose text a phone shrinks to 5.4 px, and a printed table whose 3 rows wrap."""
    problems = bc.check_phone_fit(planted("small-figure-text").page)
    assert len(problems) == 2, problems
    assert problems[0].startswith(
        "figure 'a small-print line' at 390 px: 2 of its 2 texts drawn under 10 px (smallest 5.4 px"
    ), problems
    assert problems[1].startswith("printed table 'layer head"), problems
    assert "3 row(s) wrap onto a second line" in problems[1], problems


def test_planted_small_image_figure_text_is_caught(planted):
    """An <img> of a 6.4-inch matplotlib-like SVG: its 9-unit tick label is shrunk to about
    7 px at 390 px (358/460.8 of a unit); its 14-unit title and the committed state figure,
    drawn with lab.shared.style.pyplot(FIGURE_WIDTH), stay at 10 px or more."""
    problems = bc.check_phone_fit(planted("small-image-figure").page)
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        "image figure 'figure.svg' at 390 px (drawn 358 px wide): 1 of its 2 texts drawn under"
        " 10 px (smallest 7 px: '0.5' 7 px)"
    ), problems


def test_a_tab_that_draws_no_frame_is_found_in_the_frame_wait(planted):
    """bv.draws_frames, which bounds a stalled tab's cost: a page whose requestAnimationFrame
    never calls back (a stand-in for a tab that stopped drawing) is told apart from a well
    one within the wait, not after a playwright timeout."""
    page = planted("clean").page
    assert bv.draws_frames(page)
    page.evaluate("() => { window.requestAnimationFrame = () => 0; }")
    start = time.monotonic()
    assert not bv.draws_frames(page, 300)
    assert time.monotonic() - start < 5


API_TABLE_RULE = "/* An API page's tables"  # where extra.css's rule for them begins


def _without_api_table_rule(css: str) -> str:
    """extra.css without its rule for the API tables: the comment that opens it and the
    @media block after it, to the brace that closes that block."""
    start = css.index(API_TABLE_RULE)
    depth = 0
    for end in range(css.index("@media", start), len(css)):
        depth += {"{": 1, "}": -1}.get(css[end], 0)
        if css[end] == "}" and depth == 0:
            return css[:start] + css[end + 1 :]
    raise ValueError("extra.css: the API tables' @media block is not closed")


def test_api_table_columns_without_their_rule_are_caught(site_browser, site_server, built_site):
    """The configurable API page as built (its first table, Parameters, is on the first
    screen: it shifted by 0.026 in a CI run) passes check_table_columns; served with an
    extra.css without the rule that fixes the API tables' columns, it fails it."""
    url = f"{site_server.base}reference/layers/configurable/"
    site_browser.visit(url)
    assert bc.check_table_columns(site_browser.page) == []
    css = (built_site / "assets" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    planted_css = _without_api_table_rule(css)
    assert "table-layout" in css and "table-layout" not in planted_css

    def serve(route):
        route.fulfill(body=planted_css, content_type="text/css")

    pattern = f"{site_server.base}assets/stylesheets/extra.css*"
    site_browser.context.route(pattern, serve)
    try:
        site_browser.visit(url)
        problems = bc.check_table_columns(site_browser.page)
    finally:
        site_browser.context.unroute(pattern, serve)
    assert problems and all("re-lay as the page arrives" in p for p in problems), problems
    assert any(
        "Name | Type | Description | Default under #snippets.layers.configurable.AttentionSpec" in p
        for p in problems
    ), problems


def _without_module_index_rule(css: str) -> str:
    """extra.css as it was when the reference index shifted (issue 48): the index's table
    left out of the tables rule, its columns laid out by its rows."""
    out = re.sub(
        r"\n  \.md-typeset \.module-index (table:not\(\[class\]\)|\.md-typeset__table),", "", css
    )
    out = out.replace(",\n  .md-typeset .module-index td code {", " {")
    out = re.sub(r"\n  \.md-typeset \.module-index th:nth-child\(\d\) \{ width: \d+%; \}", "", out)
    assert ".module-index" not in out, "extra.css: the reference index's rule has a new form"
    return out


def test_the_reference_index_without_its_column_rule_fails_the_table_check_on_every_load(
    site_browser, site_server, built_site
):
    """Issue 48's flaky shift, made steady: the reference index served with extra.css as it
    was before its table got fixed columns shifted (CLS 0.131) only when a busy CPU painted it
    mid-table, so test_no_layout_shift's CLS half caught it in one run of three; its "table
    columns" half (check_table_columns, on the table that starts on the first screen) fails it
    on each of three first visits sent at full speed, and passes the index as built."""
    url = f"{site_server.base}reference/"
    css = (built_site / "assets" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    planted_css = _without_module_index_rule(css)
    site_browser.visit(url)
    assert bc.check_table_columns(site_browser.page) == []

    def serve(route):
        route.fulfill(body=planted_css, content_type="text/css")

    pattern = f"{site_server.base}assets/stylesheets/extra.css*"
    site_browser.context.route(pattern, serve)
    try:
        found = []
        for _ in range(3):
            site_browser.visit(url)
            found.append(bc.check_table_columns(site_browser.page))
    finally:
        site_browser.context.unroute(pattern, serve)
    assert all(
        len(problems) == 1
        and problems[0].startswith("first-screen table Module | What it holds | Taught on")
        for problems in found
    ), found
