"""The checks of a loaded page: each returns a list of problems, one readable line each."""

from __future__ import annotations

import contextlib
import functools
import time
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

from tests.browser import js
from tests.browser.fit import check_desktop_code_fit  # noqa: F401
from tests.browser.structure import *  # noqa: F403 (its __all__: the structure checks)
from tests.browser.visit import DESKTOP, PHONE, Visit

AXE = Path(__file__).resolve().parent.parent / "vendor" / "axe-core" / "axe.min.js"
MIN_TEXT_PX = 10  # figure text on a phone, in CSS px (lab/shared/style.py draws for it)
CODE_TOKENS = ".highlight code span"  # the spans a code block's highlighting colours


WIDTHS = {"desktop": DESKTOP, "phone": PHONE}


@contextlib.contextmanager
def viewport(page, size: dict):
    """The page at ``size`` inside the block, and back at its size before it after. A resize
    lays the whole page out again (about 0.3 s of the browser's CPU on a long page), so none
    is made when the page is at that size already: checks inside one phone-width block share
    one resize."""
    before = page.viewport_size
    if before != size:
        page.set_viewport_size(size)
    try:
        yield
    finally:
        if page.viewport_size != before:
            page.set_viewport_size(before)


def together(*names: str) -> str:
    """One page.evaluate() source that runs the functions of several js/ files in turn and
    returns their results as a list; it takes the list of their arguments. One round trip
    to the browser instead of one each (on a loaded machine a round trip alone is ~40 ms).
    An async function's promise is awaited."""
    calls = ", ".join(f"({js(name).strip()})(args[{n}])" for n, name in enumerate(names))
    return f"(args) => Promise.all([{calls}])"  # a function may be async (img-figure-text)


def copy_room_problems(found: list[dict], width: int) -> list[str]:
    """copy-room.js's findings as problems: the code lines whose end the copy button covers."""
    return [
        f"{b['kind']} {b['n']} at {width} px: the copy button covers the end of line "
        + ", ".join(f"{line['k']} (...{line['text']!r})" for line in b["lines"][:3])
        + " (keep the strip under the button free: extra.css)"
        for b in found
    ]


def legibility_problems(found: dict) -> list[str]:
    """phone-legibility.js's findings as problems: figure text under MIN_TEXT_PX at phone
    width, and printed tables whose rows wrap."""
    at = f"at {PHONE['width']} px"
    problems = [
        f"figure {f['what']!r} {at}: {f['under']} of its {f['texts']} texts drawn under "
        f"{MIN_TEXT_PX} px (smallest {f['smallest']} px: "
        + ", ".join(f"{s['text']!r} {s['px']} px" for s in f["small"])
        + "); lab/shared/style.py's legible_font_size() gives the size for a figure's width"
        for f in found["figures"]
        if f["under"]
    ]
    problems += [
        f"printed table {t['first']!r} {at}: {t['wrapped']} row(s) wrap onto a second line, "
        f"e.g. {t['rows'][0]!r}"
        for t in found["tables"]
    ]
    return problems


def image_text_problems(found: list[dict]) -> list[str]:
    """img-figure-text.js's findings as problems: an image figure (an <img> of an SVG) whose
    text is drawn under MIN_TEXT_PX at phone width, or whose SVG could not be read."""
    return [
        f"image figure {f['what']!r}: its SVG could not be read ({f['error']})"
        if "error" in f
        else f"image figure {f['what']!r} at {PHONE['width']} px (drawn {f['width']} px wide): "
        f"{f['under']} of its {f['texts']} texts drawn under {MIN_TEXT_PX} px (smallest "
        f"{f['smallest']} px: "
        + ", ".join(f"{s['text']!r} {s['px']} px" for s in f["small"])
        + "); draw it with lab/shared/style.py's pyplot(FIGURE_WIDTH)"
        for f in found
        if "error" in f or f["under"]
    ]


def check_rendered(visit: Visit) -> list[str]:
    """The page finished: MathJax said done and no diagram is still waiting."""
    return [visit.render_problem] if visit.render_problem else []


def math_state(page) -> dict:
    return page.evaluate(js("math-state"))


def check_math(page) -> list[str]:
    """Every formula typeset once (at build time), without error, with its glyphs and its
    MathML; no raw TeX left; no MathJax running in the reader's browser."""
    s = math_state(page)
    problems = []
    if s["untypeset"]:
        problems.append(
            f"{len(s['untypeset'])} of {s['marked']} formulas not typeset: {s['untypeset'][:3]}"
        )
    for error in s["errors"]:
        problems.append(f"MathJax error: {error}")
    if s["nested"]:
        problems.append(f"{s['nested']} formulas typeset twice (nested mjx-container)")
    for context in s["raw"]:
        problems.append(f"raw TeX delimiter left in the text: ...{context}...")
    if s["flat"]:
        problems.append(f"{s['flat']} visible formulas rendered with zero width")
    if s["glyphless"]:
        problems.append(f"{len(s['glyphless'])} formulas without glyphs: {s['glyphless'][:3]}")
    if s["noMathML"]:
        problems.append(f"{s['noMathML']} formulas without MathML for screen readers")
    if s["runtime"]:
        problems.append("MathJax runs in the browser: the math should arrive typeset")
    return problems


# Each SVG formula drawn at the size MathJax gave it (its width and height attributes, in ex
# of the text around it): a stylesheet that caps SVG sizes can shrink a formula to nothing.
def check_formula_sizes(page, widths=("desktop", "phone")) -> list[str]:
    """Every formula drawn at MathJax's size (within 25%), at each of ``widths``."""
    problems = []
    for name in widths:
        with viewport(page, WIDTHS[name]):
            found = page.evaluate(js("formula-sizes"))[:5]
        problems += [
            f"formula {f['text']!r} at {name} width drawn {f['got'][0]}x{f['got'][1]} px, "
            f"not MathJax's {f['want'][0]}x{f['want'][1]}"
            for f in found
        ]
    return problems


def diagram_state(page) -> dict:
    return page.evaluate(js("diagram-state"))


def check_diagrams(page) -> list[str]:
    """Every Mermaid fence became an SVG, and none of them is Mermaid's error drawing."""
    s = diagram_state(page)
    problems = []
    if s["unrendered"]:
        problems.append(
            f"{s['unrendered']} Mermaid diagram(s) left unrendered (<pre class=mermaid>)"
        )
    for n, d in enumerate(s["diagrams"], 1):
        if not d["shadow"] or not d["svg"]:
            problems.append(f"diagram {n}: no SVG")
        elif d["error"]:
            problems.append(f"diagram {n}: Mermaid drew 'Syntax error'")
        elif d["width"] == 0:
            problems.append(f"diagram {n}: SVG has zero width")
    if s["strayError"]:
        problems.append("'Syntax error' text on the page (Mermaid failed to parse a diagram)")
    return problems


def check_network(visit: Visit) -> list[str]:
    """No console error, uncaught error, failed request, HTTP error or request off 127.0.0.1."""
    problems = [f"request to another host (aborted): {u}" for u in visit.foreign_requests]
    problems += [f"page error: {e}" for e in visit.page_errors]
    problems += [f"console error: {e}" for e in visit.console_errors]
    problems += [f"failed request: {e}" for e in visit.failed_requests]
    problems += [f"HTTP {e}" for e in visit.bad_responses]
    return problems


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" or (name == "name" and tag == "a"):
                self.ids.add(value)


@functools.lru_cache(maxsize=256)
def fetch_target(url: str) -> tuple[int, frozenset]:
    """(HTTP status, ids in the HTML) of a same-site URL, fetched once per test session."""
    try:
        with urllib.request.urlopen(url, timeout=10) as res:
            status, body, kind = res.status, res.read(), res.headers.get_content_type()
    except urllib.error.HTTPError as err:
        return err.code, frozenset()
    if kind != "text/html":
        return status, frozenset()
    parser = _Ids()
    parser.feed(body.decode("utf-8", "replace"))
    return status, frozenset(parser.ids)


def check_links(page, base: str) -> list[str]:
    """Every same-site link in the article and the navigation reaches a page and its #anchor."""
    problems = []
    for link in page.evaluate(js("links")):
        if not link["href"].startswith(base):
            continue  # another site (not fetched: the tests run offline) or mailto: and such
        target, _, fragment = link["href"].partition("#")
        status, ids = fetch_target(target)
        where = f"link {link['raw']!r} ({link['text']!r})"
        if status >= 400:
            problems.append(f"{where}: {target} answers HTTP {status}")
        elif fragment and urllib.parse.unquote(fragment) not in ids:
            problems.append(f"{where}: no id {fragment!r} in {target}")
    return problems


def _same_code(a: str, b: str) -> bool:
    return a.rstrip("\n") == b.rstrip("\n")


def check_copy_buttons(page) -> list[str]:
    """Every code block has a copy button aimed at its own code; the first visible one is
    really clicked and the clipboard must then hold exactly the block's code (blocks in a
    closed <details> have a button too, but it cannot be clicked). At the current (desktop)
    width, the button covers the end of no code line (copy-room.js; check_phone_fit looks at
    a phone's width)."""
    state, covered = page.evaluate(together("copy-state", "copy-room"), [None, None])
    problems = copy_room_problems(covered, page.viewport_size["width"])
    blocks = [b for b in state if "mermaid" not in b["lang"]]
    for b in blocks:
        if not b["button"]:
            problems.append(f"code block {b['n']} ({b['lang']}): no copy button")
        elif not b["same"]:
            problems.append(
                f"code block {b['n']}: copy button targets {b['target']!r}, not its code"
            )
    clickable = [b for b in blocks if b["visible"] and b["same"]]
    for b in clickable[:1]:
        page.evaluate("() => navigator.clipboard.writeText('')")
        pre = page.locator(".md-content pre > code").nth(b["n"]).locator("xpath=..")
        pre.hover()  # the buttons sit over the block's top right corner
        pre.locator(':scope > nav > [data-md-type="copy"], :scope > .md-clipboard').click()
        copied = ""
        for _ in range(20):
            copied = page.evaluate("() => navigator.clipboard.readText()")
            if copied:
                break
            time.sleep(0.05)
        if not _same_code(copied, b["text"]):
            problems.append(
                f"code block {b['n']}: clipboard holds {copied[:60]!r}, not the block's code"
            )
    return problems


def run_axe(page, rules: list[str] | None = None, allow=()) -> list[dict]:
    """axe-core's violations on the page (injected from the vendored file, not a CDN)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
        # Highlighted code's tokens are check_code_contrast's: there one measurement per
        # distinct colour pair, here a third of axe's time on a page of code.
        page.evaluate(
            "(selector) => axe.configure({rules: [{id: 'color-contrast', selector}]})",
            f"*:not({CODE_TOKENS})",
        )
    options = {"resultTypes": ["violations"], "elementRef": True}
    if rules:
        options["runOnly"] = {"type": "rule", "values": rules}
    return page.evaluate(
        js("axe-run"), [options, [[rule, selector] for rule, selector, *_ in allow]]
    )


def check_accessibility(page, rules: list[str] | None = None, allow=()) -> dict:
    """axe-core violations of impact serious or critical, as ``{"problems", "allowed"}``.

    ``allow`` lists ``(rule id, CSS selector, reason)``: a violation of that rule on an element
    matching that selector is not a problem; it is counted in ``allowed[index in allow]``.
    """
    problems, allowed = [], {}
    for v in run_axe(page, rules, allow):
        if v["impact"] not in ("serious", "critical"):
            continue
        for node in v["nodes"]:
            if node["allowed"] >= 0:
                allowed[node["allowed"]] = allowed.get(node["allowed"], 0) + 1
            else:
                where = f"{node['target']}: {node['html']}"
                problems.append(f"axe {v['id']} ({v['impact']}: {v['help']}) at {where}")
    return {"problems": problems, "allowed": allowed}


def check_math_contrast(page, minimum: float = 4.5) -> list[str]:
    """Every visible formula's colour against its background reaches ``minimum`` (WCAG AA)."""
    s = page.evaluate(js("contrast"))
    low = [r for r in s["ratios"] if r["ratio"] < minimum]
    return [
        f"formula {r['text']!r} in scheme {s['scheme']}: contrast {r['ratio']:.2f} < {minimum} "
        f"(color {r['color']})"
        for r in low[:5]
    ]


def check_code_contrast(page, minimum: float = 4.5) -> list[str]:
    """Every colour of highlighted code reaches ``minimum`` (WCAG AA) on its background."""
    s = page.evaluate(js("code-contrast"), CODE_TOKENS)
    return [
        f"code token {p['token'] or '(no class)'} {p['text']!r} in scheme {s['scheme']}: "
        f"contrast {p['ratio']:.2f} < {minimum} (color {p['color']}, {p['count']} token(s))"
        for p in s["pairs"]
        if p["ratio"] < minimum
    ]


def _luminance(rgb):
    """WCAG relative luminance of sRGB values in 0..255 (an array of (..., 3))."""
    import numpy as np

    c = np.asarray(rgb, dtype=float) / 255
    c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return c @ np.array([0.2126, 0.7152, 0.0722])


def figure_verdict(pixels, background, dark: bool, minimum: float = 3.0) -> list[str]:
    """What is wrong with a figure, from its rendered pixels ((H, W, 3), 0..255) and the
    page colour behind it.

    - A light box on the dark scheme: most of the figure's area is light (its median
      luminance above 0.4), so the figure brought its own opaque white background.
    - Ink below ``minimum`` contrast: "ink" is every pixel that stands apart from the page
      colour (contrast >= 1.5; the rest is background, faint grid lines or the soft edge of
      a stroke); the figure fails when the ink's 90th-percentile contrast with the page is
      below ``minimum`` (WCAG's 3:1 for graphics), or when it has no ink at all.
    """
    import numpy as np

    lum = _luminance(np.asarray(pixels)[..., :3])
    page = float(_luminance(background))
    hi, lo = np.maximum(lum, page), np.minimum(lum, page)
    contrast = (hi + 0.05) / (lo + 0.05)
    problems = []
    if dark and float(np.median(lum)) > 0.4:
        light = float((lum > 0.4).mean())
        problems.append(
            f"a light box on the dark scheme: {light:.0%} of its area is light "
            f"(median luminance {float(np.median(lum)):.2f}, page {page:.2f})"
        )
    ink = contrast[contrast >= 1.5]
    if ink.size == 0:
        problems.append("no ink stands out from the page colour (contrast < 1.5 everywhere)")
    elif (strong := float(np.percentile(ink, 90))) < minimum:
        problems.append(f"ink contrast {strong:.2f} < {minimum} against the page")
    return problems


def check_figures(page, minimum: float = 3.0) -> list[str]:
    """Every figure of the article reads on the current scheme (see figure_verdict): each is
    photographed as rendered, and its pixels are compared with the page colour."""
    import io

    import numpy as np
    from PIL import Image

    name = scheme(page)
    problems = []
    for f in page.evaluate(js("figures")):
        where = f"figure {f['what']!r} in scheme {name}"
        if f["broken"]:
            problems.append(f"{where}: the image did not load")
            continue
        shot = page.locator(f'[data-figure-check="{f["n"]}"]').screenshot(
            type="png", animations="disabled"
        )
        pixels = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB"))
        for problem in figure_verdict(pixels, f["background"], name == "slate", minimum):
            problems.append(f"{where}: {problem}")
    return problems


def scheme(page) -> str | None:
    return page.evaluate("() => document.body.getAttribute('data-md-color-scheme')")


def toggle_palette(page) -> list[str]:
    """Click the visible light/dark toggle: the scheme must flip between default and slate."""
    flip = {"default": "slate", "slate": "default"}
    before = scheme(page)
    if before not in flip:
        return [f"unknown colour scheme {before!r} before the toggle"]
    page.locator('form[data-md-component="palette"] label:visible').click()
    try:
        page.wait_for_function(
            "s => document.body.getAttribute('data-md-color-scheme') === s",
            arg=flip[before],
            timeout=5000,
        )
    except Exception:
        return [
            f"the palette toggle did not switch {before} to {flip[before]} "
            f"(scheme is {scheme(page)!r})"
        ]
    return []


def check_search(page, query: str, expect_path: str) -> list[str]:
    """Typing ``query`` in the search box lists a result linking to ``expect_path``."""
    box = page.locator("input.md-search__input")
    box.click()
    box.press_sequentially(query)
    try:
        page.wait_for_selector(".md-search-result__item a.md-search-result__link", timeout=10_000)
    except Exception:
        return [f"search for {query!r}: no result within 10 s"]
    hrefs = page.eval_on_selector_all(
        ".md-search-result__item a.md-search-result__link", "els => els.map(a => a.href)"
    )
    if not any(urllib.parse.urlsplit(h).path.endswith(expect_path) for h in hrefs):
        return [f"search for {query!r}: no result links to {expect_path} (got {hrefs[:5]})"]
    return []


def screenshot(page, path: Path, full_page: bool = False, widths=("desktop", "phone")) -> list[str]:
    """Screenshots at each of ``widths``: ``path`` + -desktop/-phone.jpg.

    Each shows the first screen, what a reader sees on arrival; the desktop one covers the
    whole page when ``full_page``. These are for people to look at, not a check: a whole
    long page costs the browser about 2 s of CPU, a first screen a tenth of that. JPEG
    (quality 85): half the time of a PNG.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for name in widths:
        with viewport(page, WIDTHS[name]):
            page.evaluate("() => window.scrollTo(0, 0)")  # else the sticky header is mid-page
            page.screenshot(
                path=str(path.with_name(f"{path.name}-{name}.jpg")),
                full_page=full_page and name == "desktop",
                type="jpeg",
                quality=85,
                timeout=30_000,  # a whole long page on a loaded machine takes more than 5 s
            )
    return []


def check_phone_fit(page) -> list[str]:
    """At a phone's 390 px nothing makes the page scroll sideways (a wide formula, table or
    code block scrolls inside its own box instead); figure text, inline (phone-legibility.js)
    or an <img> of an SVG (img-figure-text.js), is at least MIN_TEXT_PX; no printed table's
    rows wrap; the copy button covers the end of no code line (copy-room.js). All measured in
    one round trip, in the one resize."""
    names = ("phone-overflow", "phone-legibility", "img-figure-text", "copy-room")
    with viewport(page, PHONE):
        s, legible, images, covered = page.evaluate(
            together(*names), [None, MIN_TEXT_PX, MIN_TEXT_PX, None]
        )
    problems = legibility_problems(legible) + image_text_problems(images)
    return overflow_problems(s) + problems + copy_room_problems(covered, PHONE["width"])


def overflow_problems(s: dict) -> list[str]:
    """phone-overflow.js's findings as problems: a page wider than the phone's window."""
    if s["scroll"] <= s["width"]:
        return []
    return [
        f"at {PHONE['width']} px the page is {s['scroll']} px wide and scrolls sideways: "
        + ", ".join(s["culprits"] or ["no single element found"])
    ]


def check_phone_overflow(page) -> list[str]:
    """At a phone's 390 px nothing makes the page scroll sideways: check_phone_fit's first
    half, without its legibility and copy-room measurements (the cheap checks of an API
    page, tests/browser/tiers.py)."""
    with viewport(page, PHONE):
        s = page.evaluate(js("phone-overflow"))
    return overflow_problems(s)


def check_wide_formulas(page) -> list[str]:
    """At a phone's width, each display formula wider than the column shows that it scrolls
    (a scroll shadow, extra.css) and can be scrolled from the keyboard."""
    with viewport(page, PHONE):
        wide = page.evaluate(js("wide-formulas"))
    return [
        f"formula {w['text']!r} scrolls at {PHONE['width']} px without "
        + " or ".join(
            n
            for n, ok in (("a scroll shadow", w["shadow"]), ("a tab stop", w["focusable"]))
            if not ok
        )
        for w in wide
        if not (w["shadow"] and w["focusable"])
    ]
