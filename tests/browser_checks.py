"""What the browser tests check on a page, as plain functions (used by tests/test_browser.py).

Each ``check_*`` function takes a loaded page (and what was recorded while it loaded) and
returns a list of problems, one readable line each; an empty list means the page passed.
The same functions run against every page of the real site and against pages with a planted
fault, which proves that each check can fail.

The browser is Debian's chromium driven by Python playwright; nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import functools
import http.server
import os
import posixpath
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
RENDER_TIMEOUT_MS = 20_000


def missing_browser() -> str | None:
    """What the browser tests lack on this machine, in words to install it; None if nothing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package (pip install -r requirements.txt)"
    if not Path(CHROMIUM).is_file():
        return f"chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    return None


# ----------------------------------------------------------------------------- the server


def _resolve(root: Path, overlay: Path | None, url_path: str, prefix: str = "/") -> Path:
    """The file or folder for ``url_path``: from ``overlay`` if it has it, else from ``root``.

    The site lives under ``prefix`` (the path of its site_url); anything else is not found.
    """
    path = urllib.parse.unquote(url_path.split("?", 1)[0].split("#", 1)[0])
    if not (path + "/").startswith(prefix):
        return root / "__outside_the_site__"
    parts = [
        p for p in posixpath.normpath(path[len(prefix) :]).split("/") if p not in ("", ".", "..")
    ]
    for base in [overlay, root] if overlay else [root]:
        candidate = base.joinpath(*parts)
        if candidate.is_file() or (candidate / "index.html").is_file():
            return candidate
    return root.joinpath(*parts)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site; files in ``overlay`` (planted faults) shadow the site's."""

    protocol_version = "HTTP/1.1"  # keep-alive, like a real server
    overlay: Path | None = None
    prefix = "/"
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".json": "application/json",
        ".woff2": "font/woff2",
        ".svg": "image/svg+xml",
    }

    def translate_path(self, path):
        return str(_resolve(Path(self.directory), self.overlay, path, self.prefix))

    def log_message(self, *args):  # keep the test output clean
        pass


class SiteServer:
    """A threaded http.server on a free port of 127.0.0.1, serving ``root`` at ``prefix``
    (the path of the site's site_url, "/" unless SITE_URL says otherwise); files in
    ``overlay`` shadow those of ``root``."""

    def __init__(self, root: Path, overlay: Path | None = None, prefix: str = "/"):
        self.root, self.overlay, self.prefix = root, overlay, prefix
        handler = type("Handler", (_Handler,), {"overlay": overlay, "prefix": prefix})
        handler = functools.partial(handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.base = self.origin + prefix.lstrip("/")
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def file_for(self, url_path: str) -> Path | None:
        """The file the server sends for ``url_path``, or None."""
        local = _resolve(self.root, self.overlay, url_path, self.prefix)
        if local.is_dir():
            local = local / "index.html"
        return local if local.is_file() else None

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ----------------------------------------------------------------------------- finding pages


def site_path(sitemap_xml: str) -> str:
    """The path of the site's site_url (the home page, the sitemap's shortest address)."""
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = [el.text.strip() for el in ET.fromstring(sitemap_xml).findall("s:url/s:loc", ns)]
    return urllib.parse.urlsplit(min(locs, key=len)).path if locs else "/"


def pages_from_sitemap(sitemap_xml: str, base: str) -> list[str]:
    """The sitemap's page URLs, moved from the configured ``site_url`` to ``base``.

    The sitemap names pages under ``site_url`` (http://127.0.0.1:8000/ unless SITE_URL is
    set); the home page is ``site_url`` itself, so it is the shortest address and every other
    page starts with it.
    """
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = [el.text.strip() for el in ET.fromstring(sitemap_xml).findall("s:url/s:loc", ns)]
    if not locs:
        return []
    home = min(locs, key=len)
    stray = [loc for loc in locs if not loc.startswith(home)]
    if stray:
        raise ValueError(f"sitemap pages outside the home page {home}: {stray}")
    return [urllib.parse.urljoin(base, loc[len(home) :]) for loc in locs]


# ----------------------------------------------------------------------------- a visit


# Runs in every page before its own scripts. Material renders Mermaid into a *closed* shadow
# root; forcing it open lets the checks see the SVG (or the error text) inside. It also
# counts uncaught errors, so that waiting for a diagram that failed does not wait forever.
INIT_SCRIPT = """
(() => {
  const attach = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) {
    return attach.call(this, { ...init, mode: "open" });
  };
  window.__uncaught = 0;
  window.__lastUncaught = 0;
  const seen = () => { window.__uncaught += 1; window.__lastUncaught = performance.now(); };
  window.addEventListener("error", seen);
  window.addEventListener("unhandledrejection", seen);
  // Cumulative layout shift: every shift not caused by the reader's own input (a scroll is
  // not an input here, so a diagram that pushes visible text down counts). Not counted: a
  // shift whose only "moved" elements had no box before, i.e. that appeared rather than
  // moved. Chromium may paint a long page before its parser reaches the end; on a short page
  // the footer then appears at the bottom of the first screen and is reported as a shift
  // from an empty rectangle (seen on /404.html, 0.011 in 2 of 6 loads), though nothing shown
  // moved. Such entries are kept in __appeared for the record.
  window.__cls = 0;
  window.__appeared = [];
  const empty = (r) => !r || (r.width === 0 && r.height === 0);
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.hadRecentInput) continue;
      const sources = e.sources || [];
      if (sources.length && sources.every((s) => empty(s.previousRect))) {
        window.__appeared.push(e.value);
      } else {
        window.__cls += e.value;
      }
    }
  }).observe({ type: "layout-shift", buffered: true });
})();
"""

# The time since navigation start (ms) once the first screen is complete: the browser has
# parsed the page past the bottom of the first screen (or to its end), its fonts settled,
# every formula typeset (pages typeset at build have no MathJax; one that runs MathJax in the
# browser sets data-math-typeset="done" when it finishes), and every image and diagram that
# shows on the first screen is drawn. A diagram that fails stays a <pre> and raises an
# uncaught error: then give up on it 300 ms after the last error.
FIRST_SCREEN = r"""
() => {
  const body = document.body;
  if (!body) return false;
  if (document.readyState === "loading") {
    // Still parsing: done with the first screen once the newest element of the article
    // (the end of its last-child chain) starts below it.
    let last = document.querySelector(".md-content article");
    while (last && last.lastElementChild) last = last.lastElementChild;
    if (!last || last.getBoundingClientRect().top < innerHeight) return false;
  }
  if (window.MathJax && body.dataset.mathTypeset !== "done") return false;
  if (document.fonts.status !== "loaded") return false;
  const shown = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.bottom > 0 && r.top < innerHeight;
  };
  // Math on the first screen typeset (by the build, or by a MathJax still to come).
  const marked = document.querySelectorAll(".arithmatex, .jp-RenderedMarkdown");
  for (const el of marked) {
    if (!shown(el)) continue;
    if (el.classList.contains("arithmatex") ? !el.querySelector("mjx-container")
        : /\$/.test([...el.childNodes].map(n => n.nodeName === "P" ? n.textContent : "")
                       .join(""))) return false;
  }
  const waiting = [...document.querySelectorAll("pre.mermaid")].filter(shown).length;
  if (waiting && !(window.__uncaught && performance.now() - window.__lastUncaught > 300)) {
    return false;
  }
  if ([...document.querySelectorAll(".md-content img")].some(i => shown(i) && !i.complete)) {
    return false;
  }
  return performance.now();
}
"""

# Scrolls down the page one screen every STEP_MS, as a fast reader would, and notes for each
# diagram whether it was drawn when its top first came on screen, or how long it took after
# that (the wait a reader sees). Returns to the top afterwards. Below the last diagram (on a
# page without one: from the top) nothing loads on the way down, so the rest is scrolled at
# NO_DIAGRAM_STEP_MS: layout shifts are still seen, and the time goes where a wait can happen.
STEP_MS = 300
QUIET_S = 0.3  # no new request for this long: the page's own loads are done
NO_DIAGRAM_STEP_MS = 50
SCROLL_THROUGH = """
async ([diagramStepMs, plainStepMs]) => {
  const frame = () => new Promise(r => requestAnimationFrame(r));
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const diagrams = [...document.querySelectorAll("pre.mermaid")];
  const drawn = pre => !pre.isConnected;  // Material replaces the <pre> with its drawing
  const waits = diagrams.map(() => undefined);
  const failed = () => window.__uncaught && performance.now() - window.__lastUncaught > 300;
  for (let y = 0; ; y += innerHeight) {
    window.scrollTo(0, y);
    await frame();
    for (const [n, pre] of diagrams.entries()) {
      if (waits[n] !== undefined) continue;
      const r = pre.isConnected ? pre.getBoundingClientRect() : null;
      if (r && (r.top >= innerHeight || r.width === 0)) continue;  // not reached, or hidden
      if (drawn(pre)) { waits[n] = 0; continue; }
      const t0 = performance.now();
      while (!drawn(pre) && !failed() && performance.now() - t0 < 10000) await frame();
      waits[n] = drawn(pre) ? Math.round(performance.now() - t0) : null;
    }
    if (y + innerHeight >= document.documentElement.scrollHeight) break;
    // At a reader's pace while a diagram is still ahead; past the last one, quickly.
    await sleep(waits.some(w => w === undefined) ? diagramStepMs : plainStepMs);
  }
  window.scrollTo(0, 0);
  await frame();
  return waits.map(w => (w === undefined ? null : w));
}
"""


@dataclasses.dataclass
class Visit:
    """One page load, and what the page asked of the network while it loaded."""

    url: str
    page: object  # the playwright Page (shared by the visits of one SiteBrowser)
    ms_first_screen: int | None = None  # navigation start to the first screen complete
    transferred: int = 0  # bytes the page's own loads transferred before any scroll
    urls: list = dataclasses.field(default_factory=list)  # every URL requested
    finished: list = dataclasses.field(default_factory=list)  # ... and each one that ended
    last_request: float = 0.0  # time.monotonic() when the last request began
    urls_before_scroll: list = dataclasses.field(default_factory=list)
    cls_before_scroll: float | None = None  # cumulative layout shift, first screen
    cls: float | None = None  # ... and after scrolling through the page
    diagram_waits: list = dataclasses.field(default_factory=list)  # ms, per diagram
    first_screen_diagrams: int = 0  # diagrams (drawn or not) that start on the first screen
    render_problem: str | None = None
    console_errors: list = dataclasses.field(default_factory=list)
    page_errors: list = dataclasses.field(default_factory=list)
    failed_requests: list = dataclasses.field(default_factory=list)
    bad_responses: list = dataclasses.field(default_factory=list)
    foreign_requests: list = dataclasses.field(default_factory=list)


class SiteBrowser:
    """One browser context and one tab on a site served from 127.0.0.1.

    Light scheme, desktop size, clipboard allowed. Every request to any other host is
    aborted and recorded; errors and failed requests are recorded on the current visit.
    The HTTP cache is shared by the visits, like a reader going from page to page; a new
    SiteBrowser starts cold, like a first visit.
    """

    def __init__(self, browser, origin: str):
        self.origin = origin  # "http://127.0.0.1:PORT/": the one host pages may ask
        self.context = browser.new_context(
            viewport=DESKTOP, color_scheme="light", reduced_motion="reduce"
        )
        self.context.set_default_timeout(5000)  # a click that cannot happen fails fast
        self.context.grant_permissions(
            ["clipboard-read", "clipboard-write"], origin=origin.rstrip("/")
        )
        self.context.add_init_script(INIT_SCRIPT)
        # A regex the browser matches itself: local requests never make a trip to Python.
        self.context.route(re.compile(rf"^(?!{re.escape(origin)}|data:|blob:)"), self._abort)
        self.context.on("request", self._request)
        self.context.on("requestfinished", lambda r: self.current.finished.append(r.url))
        self.context.on("console", self._console)
        self.context.on("requestfailed", self._failed)
        self.context.on("response", self._response)
        self.page = self.context.new_page()
        self._cdp = self.context.new_cdp_session(self.page)
        self.page.on("pageerror", lambda err: self.current.page_errors.append(str(err)))
        self.current = Visit(url="about:blank", page=self.page)

    def _request(self, request):
        self.current.urls.append(request.url)
        self.current.last_request = time.monotonic()

    def _wait_until_quiet(self, visit: Visit, quiet_s: float = QUIET_S, limit_s: float = 5.0):
        """Until the page has loaded, every request it made has ended, the search index
        (which every page fetches, from a worker) among them, and none began for quiet_s.

        Playwright's "networkidle" waits for 500 ms without a request on every page; here the
        last request's end is known, so 0.3 s of quiet is enough (Mermaid's chained imports
        pause for less: with 0.15 s a chunk of the KV-heads page's diagrams was missed), and
        the run is shorter by a fifth of a second a page. A page that never goes quiet is
        measured after limit_s.
        """
        page, deadline = self.page, time.monotonic() + limit_s
        while time.monotonic() < deadline:
            page.wait_for_timeout(20)  # lets playwright deliver the request events
            ended = len(visit.finished) + len(visit.failed_requests) + len(visit.foreign_requests)
            if (
                ended >= len(visit.urls)
                and any(u.endswith("search_index.json") for u in visit.finished)
                and time.monotonic() - visit.last_request >= quiet_s
                and page.evaluate("() => document.readyState") == "complete"
            ):
                return

    def _abort(self, route):
        self.current.foreign_requests.append(route.request.url)
        route.abort("blockedbyclient")

    def _console(self, msg):
        if msg.type == "error":
            self.current.console_errors.append(f"{msg.text} ({msg.location.get('url', '')})")

    def _failed(self, request):
        if request.url.startswith(self.origin):  # a foreign one is already recorded
            self.current.failed_requests.append(f"{request.url}: {request.failure}")

    def _response(self, response):
        if response.status >= 400:
            self.current.bad_responses.append(f"{response.status} {response.url}")

    def visit(self, url: str, cold: bool = True, timeout_ms: int = RENDER_TIMEOUT_MS) -> Visit:
        """Load ``url`` (with an empty HTTP cache unless ``cold`` is false), wait for the first
        screen, note what was fetched before any scroll, then scroll down through the page,
        drawing its diagrams as a reader would."""
        visit = self.current = Visit(url=url, page=self.page)
        page = self.page
        if cold:
            self._cdp.send("Network.clearBrowserCache")
        page.goto(url, wait_until="commit")
        try:
            handle = page.wait_for_function(FIRST_SCREEN, polling="raf", timeout=timeout_ms)
            visit.ms_first_screen = round(handle.json_value())
        except Exception as err:  # playwright's TimeoutError: reported with the rest
            state = page.evaluate(
                "() => ({math: document.body.dataset.mathTypeset || 'not set',"
                " mermaid: document.querySelectorAll('pre.mermaid').length})"
            )
            visit.render_problem = (
                f"first screen not complete after {timeout_ms} ms: "
                f"data-math-typeset={state['math']}, "
                f"{state['mermaid']} diagram(s) still <pre> ({type(err).__name__})"
            )
        # Whatever the page fetches by itself once shown (the search index, ...).
        self._wait_until_quiet(visit)
        visit.urls_before_scroll = list(visit.urls)
        visit.cls_before_scroll = page.evaluate("() => window.__cls")
        visit.transferred = page.evaluate(
            """() => [...performance.getEntriesByType("navigation"),
                      ...performance.getEntriesByType("resource")]
                     .reduce((n, e) => n + (e.transferSize || 0), 0)"""
        )
        visit.first_screen_diagrams = page.evaluate(
            """() => [...document.querySelectorAll("pre.mermaid, div.mermaid")]
                     .filter(el => el.getBoundingClientRect().top < innerHeight).length"""
        )
        visit.diagram_waits = page.evaluate(SCROLL_THROUGH, [STEP_MS, NO_DIAGRAM_STEP_MS])
        visit.cls = page.evaluate("() => window.__cls")
        return visit

    def close(self):
        self.context.close()


def first_visit_bytes(visit: Visit, server: SiteServer, before_scroll: bool = False) -> int:
    """What a first visit of the page downloads (before any scroll, or in all): the size of
    every distinct file it asked for, headers left out."""
    total = 0
    urls = visit.urls_before_scroll if before_scroll else visit.urls
    for url in {u.split("#")[0] for u in urls if u.startswith(server.origin)}:
        path = server.file_for(urllib.parse.urlsplit(url).path)
        total += path.stat().st_size if path else 0
    return total


# ----------------------------------------------------------------------------- the checks


def check_rendered(visit: Visit) -> list[str]:
    """The page finished: MathJax said done and no diagram is still waiting."""
    return [visit.render_problem] if visit.render_problem else []


MATH_STATE = r"""
() => {
  const article = document.querySelector(".md-content article");
  const formulas = article ? [...article.querySelectorAll("mjx-container")] : [];
  const marked = [...document.querySelectorAll(".arithmatex")];
  const visible = el => el.getClientRects().length > 0;
  // The article's text outside code and typeset math; notebook cells separately, since
  // nbconvert leaves their formulas between dollars.
  const textOf = (el) => {
    if (!el) return "";
    const copy = el.cloneNode(true);
    copy.querySelectorAll("pre, code, .highlight, mjx-container").forEach(e => e.remove());
    return copy.textContent;
  };
  const raw = [];
  const look = (text, delimiters) => {
    for (const delimiter of delimiters) {
      let at = text.indexOf(delimiter);
      while (at !== -1 && raw.length < 10) {
        raw.push(text.slice(Math.max(0, at - 30), at + 40).replace(/\s+/g, " "));
        at = text.indexOf(delimiter, at + 1);
      }
    }
  };
  look(textOf(article), ["\\(", "\\[", "$$"]);
  document.querySelectorAll(".jp-RenderedMarkdown").forEach(cell => look(textOf(cell), ["$"]));
  return {
    formulas: formulas.length,
    marked: marked.length,
    untypeset: marked.filter(el => !el.querySelector("mjx-container"))
      .map(el => el.textContent.slice(0, 80)),
    errors: [...document.querySelectorAll("mjx-merror, [data-mml-node='merror']")].map(el =>
      (el.getAttribute("data-mjx-error") || el.closest("mjx-container").textContent)
        .slice(0, 120)),
    nested: document.querySelectorAll("mjx-container mjx-container").length,
    raw,
    flat: formulas.filter(el => visible(el) && el.getBoundingClientRect().width === 0).length,
    // SVG output: every glyph is a <path> (or a <use> of one); CommonHTML: <mjx-c>.
    glyphless: formulas.filter(el => !el.querySelector("svg path, svg use, mjx-c"))
      .map(el => el.textContent.slice(0, 40)),
    // What screen readers read: MathJax's assistive MathML copy of each formula.
    noMathML: formulas.filter(el => !el.querySelector("mjx-assistive-mml math")).length,
    runtime: typeof window.MathJax !== "undefined",
  };
}
"""


def math_state(page) -> dict:
    return page.evaluate(MATH_STATE)


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
FORMULA_SIZES = r"""
() => {
  const out = [];
  for (const c of document.querySelectorAll(".md-content mjx-container[jax='SVG']")) {
    const svg = c.querySelector(":scope > svg");
    if (!svg || c.getClientRects().length === 0) continue;
    const probe = document.createElement("span");
    probe.style.cssText = "position:absolute;visibility:hidden;width:10ex;height:0";
    c.append(probe);
    const ex = probe.getBoundingClientRect().width / 10;
    probe.remove();
    const want = ["width", "height"].map(a => parseFloat(svg.getAttribute(a)) * ex);
    const r = svg.getBoundingClientRect();
    const got = [r.width, r.height];
    if (want.some((w, i) => Math.abs(got[i] - w) > 0.25 * w + 1)) {
      out.push({text: c.textContent.slice(0, 30), want: want.map(Math.round),
                got: got.map(Math.round)});
    }
  }
  return out;
}
"""


def check_formula_sizes(page) -> list[str]:
    """Every formula drawn at MathJax's size (within 25%), at desktop and at phone width."""
    problems = []
    for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        for f in page.evaluate(FORMULA_SIZES)[:5]:
            problems.append(
                f"formula {f['text']!r} at {name} width drawn {f['got'][0]}x{f['got'][1]} px, "
                f"not MathJax's {f['want'][0]}x{f['want'][1]}"
            )
    page.set_viewport_size(DESKTOP)
    return problems


DIAGRAM_STATE = """
() => {
  const diagrams = [...document.querySelectorAll("div.mermaid")].map(div => {
    const root = div.shadowRoot;
    const svg = root && root.querySelector("svg");
    return {
      shadow: !!root,
      svg: !!svg,
      width: svg ? svg.getBoundingClientRect().width : 0,
      error: !!root && /Syntax error/i.test(root.textContent),
    };
  });
  return {
    diagrams,
    unrendered: document.querySelectorAll("pre.mermaid").length,
    // Mermaid leaves its "Syntax error in text" drawing at the end of <body> on failure.
    strayError: /Syntax error/i.test(document.body.innerText),
  };
}
"""


def diagram_state(page) -> dict:
    return page.evaluate(DIAGRAM_STATE)


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


LINKS = """
() => [...document.querySelectorAll(".md-content article a[href], nav a[href]")]
  .map(a => ({href: a.href, raw: a.getAttribute("href"), text: a.textContent.trim().slice(0, 40)}))
"""


def check_links(page, base: str) -> list[str]:
    """Every same-site link in the article and the navigation reaches a page and its #anchor."""
    problems = []
    for link in page.evaluate(LINKS):
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


COPY_STATE = """
() => [...document.querySelectorAll(".md-content pre > code")].map((code, n) => {
  const pre = code.parentElement;
  // Material 9.6+: <pre><nav class="md-code__nav"><button data-md-type="copy">;
  // older releases: <pre><button class="md-clipboard">.
  const button = pre.querySelector(
    ':scope > nav > [data-md-type="copy"], :scope > .md-clipboard');
  const selector = button && button.getAttribute("data-clipboard-target");
  const target = selector && document.querySelector(selector);
  return {
    n, lang: pre.parentElement.className, button: !!button,
    visible: !!button && button.checkVisibility(),
    target: selector, same: !!target && target === code,
    text: code.innerText,
  };
})
"""


def _same_code(a: str, b: str) -> bool:
    return a.rstrip("\n") == b.rstrip("\n")


def check_copy_buttons(page) -> list[str]:
    """Every code block has a copy button aimed at its own code; the first visible one is
    really clicked and the clipboard must then hold exactly the block's code (blocks in a
    closed <details> have a button too, but it cannot be clicked)."""
    problems = []
    blocks = [b for b in page.evaluate(COPY_STATE) if "mermaid" not in b["lang"]]
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


AXE_RUN = """
async ([options, allow]) => {
  const result = await axe.run(document, options);
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({
      target: n.target.join(" "),
      html: n.html.replace(/\\s+/g, " ").slice(0, 120),
      // the first allowance (rule id, selector) that this element matches, or -1
      allowed: allow.findIndex(([rule, selector]) => rule === v.id && n.element.matches(selector)),
    })),
  }));
}
"""


def run_axe(page, rules: list[str] | None = None, allow=()) -> list[dict]:
    """axe-core's violations on the page (injected from the vendored file, not a CDN)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    options = {"resultTypes": ["violations"], "elementRef": True}
    if rules:
        options["runOnly"] = {"type": "rule", "values": rules}
    return page.evaluate(AXE_RUN, [options, [[rule, selector] for rule, selector, *_ in allow]])


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


COLOURS = """
  const parse = c => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat(1);
  };
  const background = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let color = [255, 255, 255, 1];
    for (const layer of layers.reverse()) color = over(layer, color);
    return color;
  };
  const luminance = c => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
"""

CONTRAST = (
    """
() => {
"""
    + COLOURS
    + """
  const ratios = [...document.querySelectorAll(".md-content mjx-container")]
    .filter(el => el.getClientRects().length > 0)
    .map(el => {
      const bg = background(el);
      const fg = over(parse(getComputedStyle(el).color), bg);
      const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
      return {ratio: (hi + 0.05) / (lo + 0.05), text: el.textContent.slice(0, 30),
              color: getComputedStyle(el).color};
    });
  return {scheme: document.body.getAttribute("data-md-color-scheme"), ratios};
}
"""
)


def check_math_contrast(page, minimum: float = 4.5) -> list[str]:
    """Every visible formula's colour against its background reaches ``minimum`` (WCAG AA)."""
    s = page.evaluate(CONTRAST)
    low = [r for r in s["ratios"] if r["ratio"] < minimum]
    return [
        f"formula {r['text']!r} in scheme {s['scheme']}: contrast {r['ratio']:.2f} < {minimum} "
        f"(color {r['color']})"
        for r in low[:5]
    ]


# The article's figures: images, and inline SVG that is not math, an icon or part of
# another SVG; each tagged so that it can be photographed, with the page colour behind it.
FIGURES = (
    """
() => {
"""
    + COLOURS
    + """
  const article = document.querySelector(".md-content article");
  if (!article) return [];
  return [...article.querySelectorAll("img, svg")]
    .filter(el => !el.closest("mjx-container, .md-icon, .twemoji, .md-clipboard, button, label")
                  && !(el.tagName.toLowerCase() === "svg" && el.parentElement.closest("svg")))
    .map((el, n) => {
      el.dataset.figureCheck = String(n);
      const r = el.getBoundingClientRect();
      const img = el.tagName === "IMG";
      return {
        n, width: r.width, height: r.height,
        what: img ? (el.getAttribute("src") || "").split("/").pop()
                  : "inline svg" + (el.id ? "#" + el.id : ""),
        background: background(el.parentElement).slice(0, 3),
        broken: img && el.complete && el.naturalWidth === 0,
      };
    })
    .filter(f => f.broken || (f.width >= 80 && f.height >= 60));
}
"""
)


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
    for f in page.evaluate(FIGURES):
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


def screenshot(page, path: Path, full_page: bool = True) -> list[str]:
    """Screenshots at desktop and at phone width: ``path`` + -desktop/-phone.jpg.

    The desktop one covers the whole page when ``full_page``; the phone one shows the first
    screen, what a phone reader sees on arrival. A full-page shot of a long page at phone
    width costs seconds each (it re-lays out thousands of pixels of math), and the layout
    below the fold is the desktop one reflowed. JPEG (quality 85): half the time of a PNG,
    and these are for people to look at, not for pixel comparison.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for name, size, whole in (("desktop", DESKTOP, full_page), ("phone", PHONE, False)):
        page.set_viewport_size(size)
        page.evaluate("() => window.scrollTo(0, 0)")  # else the sticky header is mid-page
        page.screenshot(
            path=str(path.with_name(f"{path.name}-{name}.jpg")),
            full_page=whole,
            type="jpeg",
            quality=85,
        )
    page.set_viewport_size(DESKTOP)
    return []
