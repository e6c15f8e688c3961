"""Code that fits its column at desktop width, checked in the browser (re-exported by
tests/browser/checks.py, where the other checks are)."""

from tests.browser import js
from tests.browser.visit import DESKTOP


def code_fit_problems(wide: list[dict]) -> list[str]:
    """code-fit.js's findings as problems: one line per block that scrolls sideways."""
    return [
        f"code block {w['n']}"
        + (f" ({w['title']})" if w["title"] else "")
        + f" under {w['heading']!r} scrolls sideways at {DESKTOP['width']} px: {w['over']} px"
        f" too wide, its longest line {w['chars']} characters ({w['line']!r}...)"
        for w in wide
    ]


def check_desktop_code_fit(page) -> list[str]:
    """At a desktop's 1280 px every code and output block shows its lines whole: none has
    to be scrolled sideways (phone widths scroll: check_phone_fit only asks that the page
    itself does not)."""
    from tests.browser.checks import viewport  # checks.py imports this module

    with viewport(page, DESKTOP):
        return code_fit_problems(page.evaluate(js("code-fit")))


def main(argv: list[str] | None = None) -> int:
    """Count the blocks that scroll sideways at 1280 px on every page of a built site:
    ``python -m tests.browser.fit [SITE_DIR] [--show]`` (default site/, as `mkdocs build`
    leaves it). Prints one line per page with any, and the total."""
    import argparse
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    from tests.browser.server import CHROMIUM, CHROMIUM_ARGS, SiteServer, pages_from_sitemap

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("site", nargs="?", default="site", type=Path)
    parser.add_argument("--show", action="store_true", help="print every block's problem")
    args = parser.parse_args(argv)
    server = SiteServer(args.site)
    total = pages = 0
    try:
        sitemap = (args.site / "sitemap.xml").read_text(encoding="utf-8")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=DESKTOP)
            for url in pages_from_sitemap(sitemap, server.base):
                page.goto(url, wait_until="load")
                found = check_desktop_code_fit(page)
                pages += 1
                total += len(found)
                if found:
                    print(f"{len(found):4}  {url[len(server.base) - 1 :]}")
                    for line in found if args.show else ():
                        print("        " + line)
            browser.close()
    finally:
        server.close()
    print(f"{total} blocks scroll sideways at {DESKTOP['width']} px, on {pages} pages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
