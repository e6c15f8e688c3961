"""Write docs/assets/diagram-sizes.json: the natural size of every Mermaid diagram of the site.

    .venv/bin/python -m tests.browser.diagram_sizes

Builds the site, opens every page that has a diagram in chromium, lets Mermaid draw each one
and notes the size of its drawing (the SVG's viewBox), keyed by a hash of the diagram's
text (hooks/diagram_boxes.py reserves that much room for it). Run it after adding or
editing a diagram; the browser tests say when it is due.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hooks.diagram_boxes import DIAGRAM, SIZES, diagram_key
from lab.shared.common import ROOT
from tests.browser import js
from tests.browser.server import CHROMIUM, CHROMIUM_ARGS, SiteServer, pages_from_sitemap, site_path
from tests.browser.visit import SiteBrowser


def measure(site: Path) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    sitemap = (site / "sitemap.xml").read_text(encoding="utf-8")
    server = SiteServer(site, prefix=site_path(sitemap))
    sizes = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            tab = SiteBrowser(browser, server.origin)
            for url in pages_from_sitemap(sitemap, server.base):
                local = server.file_for(url[len(server.origin) - 1 :])
                text = local.read_text(encoding="utf-8") if local else ""
                sources = [html.unescape(m.group(1)) for m in DIAGRAM.finditer(text)]
                if not sources:
                    continue
                tab.visit(url)  # scrolls through the page: every diagram is drawn
                drawn = tab.page.evaluate(js("diagram-boxes"))
                for source, diagram in zip(sources, drawn, strict=True):
                    width, height = diagram["natural"]
                    sizes[diagram_key(source)] = [round(width, 1), round(height, 1)]
            tab.close()
            browser.close()
    finally:
        server.close()
    return dict(sorted(sizes.items()))


def main() -> None:
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", out]
        subprocess.run(command, cwd=ROOT, check=True, env=env)
        sizes = measure(Path(out))
    rows = ",\n".join(f" {json.dumps(key)}: {json.dumps(size)}" for key, size in sizes.items())
    (ROOT / SIZES).write_text("{\n" + rows + "\n}\n", encoding="utf-8")
    print(f"{len(sizes)} diagrams measured, written to {SIZES}")


if __name__ == "__main__":
    main()
