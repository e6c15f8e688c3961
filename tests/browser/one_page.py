"""A contributor's loop: one page's blocks, its download and its browser checks, in seconds.

    python -m tests.browser.one_page docs/attention.md      # what `make test-page PAGE=...` runs

Three things run side by side, and each says what it found:

- the page's blocks, as the suite runs them (`pytest PAGE -n 0`, a process of its own);
- a build of that page alone (mkdocs with every other page excluded: not strict, since the
  page's links to the others are then dangling; the suite's strict build stays the judge),
  then its "Run this page" script run from an empty folder by tests/pages/run_downloads.py
  with the venv's Python on one thread (the suite runs it against the wheel, in a throw-away
  environment, on torch's default threads),
  each cell's print compared with the notebook's stored output;
- the built page in chromium with every check of tests/pages/test_browser.py's inspect_page,
  served over a whole build of the site, so its links reach the other pages: `site/` when
  `make build` made one, else .cache/one-page/whole/ (built on the first run, about a
  minute, and again whenever mkdocs.yml is newer than the build: a new page's links).

Exit status 1 if anything failed.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
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


def build_page(page: str, out: Path) -> None:
    """The site with only ``page`` (relative to docs/) built into ``out``."""
    code = (
        "import sys\n"
        "from mkdocs.commands.build import build\n"
        "from mkdocs.config import load_config\n"
        "page, out = sys.argv[1], sys.argv[2]\n"
        "keep = '\\n'.join(['*.md', '*.py', '!/' + page])\n"
        "cfg = load_config('mkdocs.yml', site_dir=out, exclude_docs=keep)\n"
        "build(cfg)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, page, str(out)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise RuntimeError(f"the build of {page} failed:\n{proc.stderr[-3000:]}")


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
                # One thread, as the blocks run (the suite runs it on torch's default threads).
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
    name = page.removesuffix(".md")
    path = "" if name == "index" else f"{name.removesuffix('/index')}/"
    start = time.perf_counter()
    blocks = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(page_file.relative_to(ROOT)), "-n", "0", "-q"]
        + ["-p", "no:cacheprovider", "--no-header"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    built = CACHE / "page"
    shutil.rmtree(built, ignore_errors=True)
    build_page(page, built)
    print(f"built {page} alone: {_elapsed(start)}", flush=True)
    from hooks import page_downloads

    def timed(check, *args):
        begin = time.perf_counter()
        return check(*args), _elapsed(begin)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        download = pool.submit(timed, check_download, built, page_downloads.download_name(page))
        browser = pool.submit(timed, check_in_browser, built, path)
        results, took = {}, {}
        for what, future in (("download", download), ("browser", browser)):
            results[what], took[what] = future.result()
    for what, problems in results.items():
        verdict = "ok" if not problems else f"{len(problems)} problem(s)"
        print(f"{what}: {verdict} ({took[what]}, once the page was built)")
        for problem in problems:
            print(f"  {problem}")
    out, _ = blocks.communicate()
    print(f"blocks ({page}): {out.strip().splitlines()[-1] if out.strip() else 'no output'}")
    if blocks.returncode:
        print(out[-6000:])
    print(f"test-page {page}: {_elapsed(start)} in all")
    return int(bool(blocks.returncode or any(results.values())))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    sys.exit(main(sys.argv[1]))
