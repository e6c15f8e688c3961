"""The browser harness's own pieces that need no browser: the vendored axe-core and the
sitemap's addresses moved to the test server."""

import re
from pathlib import Path

from tests.browser import checks as bc
from tests.browser import server as bs


def test_axe_is_vendored_pinned_and_licensed():
    vendor = Path(bc.AXE).parent
    pinned = re.search(r"^AXE_VERSION=(\S+)", (vendor.parent / "vendor-axe.sh").read_text(), re.M)
    assert (vendor / "VERSION").read_text().startswith(f"axe-core {pinned.group(1)} ")
    assert f"axe v{pinned.group(1)}" in Path(bc.AXE).read_text(encoding="utf-8")[:200]
    assert "Mozilla Public License" in (vendor / "LICENSE").read_text()


def test_sitemap_urls_move_to_the_test_server():
    sitemap = """<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>https://example.org/guide/</loc></url>
<url><loc>https://example.org/guide/attention/</loc></url>
</urlset>"""
    assert bs.pages_from_sitemap(sitemap, "http://127.0.0.1:1234/") == [
        "http://127.0.0.1:1234/",
        "http://127.0.0.1:1234/attention/",
    ]
