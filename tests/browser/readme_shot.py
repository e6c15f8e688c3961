"""Make the README's screenshot (.github/readme/attention-page.png) from the built site.

    .venv/bin/python -m tests.browser.readme_shot

Builds the site, opens the attention page in chromium at 1280 x 800, light scheme, scrolled
to its causal-masking section, and saves that screen. tests/pages/test_browser.py takes the same
picture of the site it tests and fails when the committed one no longer looks like it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from lab.shared.common import ROOT

PICTURE = ROOT / ".github" / "readme" / "attention-page.png"
SIZE = {"width": 1280, "height": 800}
SECTION = "#causal-masking"


def take(browser, base: str) -> bytes:
    """The README's picture of the site served at base, as PNG bytes."""
    context = browser.new_context(viewport=SIZE, color_scheme="light", reduced_motion="reduce")
    try:
        page = context.new_page()
        page.goto(base + "attention/" + SECTION, wait_until="networkidle")
        page.evaluate("() => document.fonts.ready")
        return page.screenshot(type="png")
    finally:
        context.close()


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tests.browser.server import CHROMIUM, CHROMIUM_ARGS, SiteServer, site_path

    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", out]
        subprocess.run(command, cwd=ROOT, check=True, env=env)
        site = Path(out)
        server = SiteServer(site, prefix=site_path((site / "sitemap.xml").read_text("utf-8")))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                PICTURE.write_bytes(take(browser, server.base))
                browser.close()
        finally:
            server.close()
    print(f"wrote {PICTURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
