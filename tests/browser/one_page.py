"""A contributor's loop: one page's blocks, its download and its browser checks, in seconds.

    python -m tests.browser.one_page docs/attention.md      # what `make test-page PAGE=...` runs

Three things run side by side, and each says what it found:

- the page's blocks, as the suite runs them (`pytest PAGE -n 0`, a process of its own);
- a build of that page alone (mkdocs with every other page excluded, not strict: its warnings
  are kept and the ones about this page count as failures, since the suite's strict build
  would stop on them),
  then its "Run this page" script run from an empty folder by tests/pages/run_downloads.py
  with the venv's Python on one thread (the suite runs it against the wheel, in a throw-away
  environment: on one thread too, or under the portability run's setting in `make test`),
  each cell's print compared with the notebook's stored output;
- the built page in chromium with every check of tests/pages/test_browser.py's inspect_page,
  served over a whole build of the site, so its links reach the other pages: `site/` when
  `make build` made one, else .cache/one-page/whole/ (built on the first run, about a
  minute, and again whenever mkdocs.yml is newer than the build: a new page's links).

Before them, what can be read from the sources at once: the page is in the nav, each of its
includes names a file and a section that exist, and the page before it in the nav links it
first under its `## Next` (the build checks every page's `## Next` against the nav).

Every failure ends the output with one short paragraph under "What to fix": the file, the
line and the fix. Exit status 1 if anything failed.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.shared.common import ROOT

CACHE = ROOT / ".cache" / "one-page"
RUNNER = ROOT / "tests" / "pages" / "run_downloads.py"
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def _elapsed(start: float) -> str:
    return f"{time.perf_counter() - start:.1f} s"


BUILD = """\
import json, logging, sys
from mkdocs.commands.build import build
from mkdocs.config import load_config

page, out = sys.argv[1], sys.argv[2]
found = []


class Keep(logging.Handler):
    def emit(self, record):
        found.append(record.getMessage())


logging.getLogger("mkdocs").addHandler(Keep(logging.WARNING))
keep = "\\n".join(["*.md", "*.py", "!/" + page])
error = None
try:
    build(load_config("mkdocs.yml", site_dir=out, exclude_docs=keep, strict=False))
except BaseException as err:  # a hook's PluginError, an include that failed, ...
    error = f"{type(err).__name__}: {err}"
print(json.dumps({"warnings": found, "error": error}))
"""


def build_page(page: str, out: Path) -> tuple[list[str], str | None]:
    """The site with only ``page`` (relative to docs/) built into ``out``, not strict: the
    build's warnings and its error (None: it built)."""
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, page, str(out)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
    )
    try:
        told = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return [], f"the build crashed:\n{proc.stderr[-3000:]}"
    return told["warnings"], told["error"]


def nav_order(entry) -> list[str]:
    """The nav's pages in reading order, the API reference section left out (as
    hooks/prerequisites.py does)."""
    from hooks import prerequisites

    if isinstance(entry, str):
        return [] if "://" in entry else [entry]
    if isinstance(entry, dict):
        return [
            page
            for title, value in entry.items()
            if title != prerequisites.REFERENCE
            for page in nav_order(value)
        ]
    return [page for value in entry or [] for page in nav_order(value)]


def line_of(path: Path, needle: str, default: int = 1, start: bool = False) -> int:
    """The first line of ``path`` holding ``needle`` (1-based), or starting with it."""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith(needle) if start else needle in line:
            return n
    return default


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def read_nav() -> list:
    """mkdocs.yml's nav, its own tags (!!python/name:..., !ENV) read as nothing."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    return config.get("nav") or []


def front_matter(text: str) -> dict:
    import yaml

    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    return (yaml.safe_load(m[1]) or {}) if m else {}


def source_fixes(page: str) -> list[str]:
    """What the sources say at once: the page in the nav, its includes, and the reading
    order's demands on its neighbours (the page before it, the home page's learning path),
    by hooks/prerequisites.py's own rules. One paragraph each."""
    from hooks import page_parser, prerequisites

    fixes = []
    docs, file = ROOT / "docs", ROOT / "docs" / page
    nav = read_nav()
    if page not in set(page_parser._nav_pages(nav)):
        fixes.append(
            f"{_rel(file)} is not in the nav, so no reader can reach it and the strict build "
            f"stops. Fix: add `- Title: {page}` under `nav:` in mkdocs.yml (line "
            f"{line_of(ROOT / 'mkdocs.yml', 'nav:', start=True)}) where it comes in the reading "
            "order; then the page before it links it first under its `## Next`."
        )
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        m = page_parser._INCLUDED.search(line) if "--8<--" in line else None
        if not m:
            continue
        target = ROOT / m["file"]
        if not target.is_file() or (
            m["section"] and f"[start:{m['section']}]" not in target.read_text(encoding="utf-8")
        ):
            named = f"{m['file']}:{m['section']}" if m["section"] else m["file"]
            fixes.append(
                f"{_rel(file)}:{n}: the include `{named}` names no "
                f"{'section' if target.is_file() else 'file'} that exists"
                f"{page_parser.include_hint(line, ROOT)} Fix: an existing name on that line."
            )
    order = nav_order(nav)
    if page not in order:
        return fixes
    here = order.index(page)
    neighbours = {order[here - 1]} if here else set()
    neighbours |= {prerequisites.HOME} - {page}
    for other in sorted(neighbours):
        path = docs / other
        if not path.is_file() or not other.endswith(".md"):
            continue
        text = path.read_text(encoding="utf-8")
        problems = prerequisites.page_problems(other, text, front_matter(text), order, set())
        for problem in problems:
            if "'## Next'" in problem:
                at = line_of(path, "## Next")
                fix = f"make {page} the first link under its `## Next`"
            elif "'Learning path'" in problem:
                at = line_of(path, "## Learning path")
                fix = f"link {page} in its `## Learning path`, in nav order"
            else:
                continue  # the neighbour's own business
            fixes.append(
                f"{_rel(path)}:{at}: {problem}. Fix: {fix} (the build checks every page's "
                'place in the reading order; contributing.md, "The shape of a page").'
            )
    return fixes


_NOT_FOUND = re.compile(
    r"contains a link '(?P<link>[^']+)', but the target (?:'[^']*' )?is not found"
)


def build_fixes(page: str, warnings: list[str], error: str | None) -> list[str]:
    """The build's warnings and error about ``page``, one paragraph each (what source_fixes
    already said, the nav and the includes, is not said twice)."""
    file = ROOT / "docs" / page
    fixes = []
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    for warning in warnings:
        m = _NOT_FOUND.search(warning)
        if m and f"'{page}'" in warning:
            link = m["link"]
            near = difflib.get_close_matches(link.split("#")[0], pages, n=1)
            fixes.append(
                f"{_rel(file)}:{line_of(file, '(' + link)}: the link to {link} finds no page "
                "(the strict build stops). Fix: link a page that exists"
                + (f" (did you mean {near[0]}?)" if near else "")
                + ", or add the page and its nav line."
            )
    # mkdocs logs a hook's error and raises Abort("Aborted with a BuildError!"): the
    # words are in the log, not in the exception
    said = [w for w in warnings if w.startswith(f"{page}: ")]
    reading = next((t for t in [error or "", *said] if "out of reading order" in t), None)
    if reading:
        problems = [p.strip() for p in reading.split("\n")[1:] if p.strip()]
        for problem in problems:
            at = "## Next" if "Next" in problem else "requires:"
            fixes.append(
                f"{_rel(file)}:{line_of(file, at)}: {problem}. Fix: change that line "
                "(contributing.md, the reading order)."
            )
    elif error and "Snippet" not in error:  # an include's fault is said by source_fixes
        why = said[-1] if said else error.splitlines()[-1]
        fixes.append(f"{_rel(file)}: the build of the page failed: {why}")
    return fixes


_MISMATCH = re.compile(
    r"the block at (?P<block>\S+:\d+) printed something other than its Output block at "
    r"(?P<output>\S+:\d+)"
)
_FAILED_AT = re.compile(r"^FAILED (?P<page>\S+\.md)::line (?P<line>\d+)", re.M)


def block_fixes(page_rel: str, out: str) -> list[str]:
    """The failed blocks, one paragraph each: an Output that differs says how to update it."""
    fixes, said = [], set()
    for m in _MISMATCH.finditer(out):
        said.add(m["block"])
        fixes.append(
            f"{m['output']}: the Output block is not what the block at {m['block']} prints "
            "(first difference above). Fix: if the change is on purpose, write the new output "
            f"into the page with `.venv/bin/python -m pytest {page_rel} --update-output -n 0 -q`"
            " and read the diff; if not, the code is wrong."
        )
    for m in _FAILED_AT.finditer(out):
        where = f"{m['page']}:{m['line']}"
        if where not in said:
            fixes.append(f"{where}: the block failed (its error is above). Fix: the code.")
    return fixes


def current(site: Path) -> bool:
    """A build newer than mkdocs.yml: it has every page of the nav (a new page comes with
    a nav line, so a build from before it would answer its links with 404)."""
    sitemap = site / "sitemap.xml"
    return sitemap.is_file() and sitemap.stat().st_mtime >= (ROOT / "mkdocs.yml").stat().st_mtime


def whole_site() -> Path:
    """A build of the whole site for the other pages: site/ (make build), else our own."""
    if current(ROOT / "site"):
        return ROOT / "site"
    whole = CACHE / "whole"
    if not current(whole):
        print("  (building the whole site once for the links, into .cache/one-page/)")
        subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "-q", "--site-dir", str(whole)],
            cwd=ROOT,
            env=ENV,
            check=True,
        )
    return whole


def check_download(built: Path, name: str) -> list[str]:
    """The page's script, run from an empty folder; each cell must print what the notebook
    stores under it (hooks/page_downloads.py wrote both from the page)."""
    from hooks import page_downloads

    script = built / page_downloads.DOWNLOADS / f"{name}.py"
    if not script.is_file():
        return []  # a page without code has no download
    notebook = json.loads(script.with_suffix(".ipynb").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as fresh:
        shutil.copy(script, fresh)
        out = Path(fresh) / "ran.json"
        runner = shutil.copy(RUNNER, Path(fresh).parent / f"run-downloads-{os.getpid()}.py")
        try:
            proc = subprocess.run(
                [sys.executable, runner, str(out), script.name],
                cwd=fresh,
                capture_output=True,
                text=True,
                # One thread, as the blocks run (and as tests/pages/test_downloads.py does).
                env={**ENV, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"},
            )
        finally:
            Path(runner).unlink()
        if proc.returncode:
            return [f"the download runner failed:\n{proc.stderr[-2000:]}"]
        cells = json.loads(out.read_text())["scripts"][script.name]
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    problems = []

    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    for cell, ran in zip(code, cells, strict=False):
        if ran["error"]:
            return problems + [f"the block at {ran['where']} failed:\n{ran['error']}"]
        shown = "".join(t for o in cell["outputs"] for t in o.get("text", []))
        if cell["outputs"] and norm(shown) != norm(ran["printed"]):
            problems.append(f"the block at {ran['where']} printed\n{ran['printed']}\nnot\n{shown}")
    if len(cells) != len(code):
        problems.append(f"{len(cells)} cells ran, the notebook has {len(code)}")
    return problems


def check_in_browser(built: Path, path: str) -> list[str]:
    """Every check of inspect_page on the page, over the whole site."""
    from playwright.sync_api import sync_playwright

    import tests.pages.test_browser as tb
    from tests.browser import server as bs
    from tests.browser import visit as bv

    tb.SCREENSHOTS = CACHE / "screenshots"
    root = whole_site()
    prefix = bs.site_path((root / "sitemap.xml").read_text(encoding="utf-8"))
    server = bs.SiteServer(root, overlay=built, prefix=prefix)
    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=bs.CHROMIUM, args=bs.CHROMIUM_ARGS)
            tab = bv.SiteBrowser(chromium, server.origin)
            report = tb.inspect_page(tab, server, server.base + path)
            tab.close()
            chromium.close()
    finally:
        server.close()
    return [f"[{check}] {p}" for check, found in report["problems"].items() for p in found]


def main(page_arg: str) -> int:
    page_file = (ROOT / page_arg).resolve()
    docs = ROOT / "docs"
    if page_file.suffix != ".md" or docs not in page_file.parents or not page_file.is_file():
        raise SystemExit(
            f"PAGE={page_arg!r} is not a Markdown page under docs/ (docs/attention.md)"
        )
    page = page_file.relative_to(docs).as_posix()
    page_rel = _rel(page_file)
    name = page.removesuffix(".md")
    path = "" if name == "index" else f"{name.removesuffix('/index')}/"
    start = time.perf_counter()
    blocks = subprocess.Popen(
        [sys.executable, "-m", "pytest", page_rel, "-n", "0", "-q"]
        + ["-p", "no:cacheprovider", "--no-header"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    fixes = source_fixes(page)
    built = CACHE / "page"
    shutil.rmtree(built, ignore_errors=True)
    warnings, error = build_page(page, built)
    fixes += build_fixes(page, warnings, error)
    print(f"built {page} alone: {_elapsed(start)}" + (" (it failed)" if error else ""), flush=True)
    from hooks import page_downloads

    def timed(check, *args):
        begin = time.perf_counter()
        try:
            return check(*args), _elapsed(begin)
        except Exception as err:  # a crash is this check's problem; the others' results stay
            return [f"the check crashed: {type(err).__name__}: {err}"], _elapsed(begin)

    results, took = {}, {}
    if error:
        for what in ("download", "browser"):
            results[what], took[what] = [], "not run: the page did not build"
    else:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            download = pool.submit(timed, check_download, built, page_downloads.download_name(page))
            browser = pool.submit(timed, check_in_browser, built, path)
            for what, future in (("download", download), ("browser", browser)):
                results[what], took[what] = future.result()
    out, _ = blocks.communicate()
    for what, problems in results.items():
        verdict = "ok" if not problems else f"{len(problems)} problem(s)"
        if took[what].startswith("not run"):
            verdict, took[what] = took[what], ""
        when = f" ({took[what]}, once the page was built)" if took[what] else ""
        print(f"{what}: {verdict}{when}")
        for problem in problems:
            print(f"  {problem}")
        # A download that prints another output than the page: the blocks' fault says it.
        if problems and not (what == "download" and _MISMATCH.search(out)):
            fixes.append(
                f"{page_rel}: the {what} check found {len(problems)} problem(s), listed under "
                f"'{what}:' above. Fix: the page (contributing.md says what each check wants)."
            )
    print(f"blocks ({page}): {out.strip().splitlines()[-1] if out.strip() else 'no output'}")
    if blocks.returncode:
        print(out[-6000:])
        said = block_fixes(page_rel, out)
        # The nav and an include's fault are said by source_fixes already.
        if not said and not re.search(r"^FAILED \S+::nav\b|: include failed: ", out, re.M):
            said = [f"{page_rel}: its blocks did not pass (the output above). Fix: what it names."]
        fixes += said
    print(f"test-page {page}: {_elapsed(start)} in all")
    failed = bool(blocks.returncode or any(results.values()) or fixes)
    if fixes:
        print(f"\nWhat to fix ({len(fixes)}):")
        for fix in dict.fromkeys(fixes):
            print(f"\n- {fix}")
    return int(failed)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    sys.exit(main(sys.argv[1]))
