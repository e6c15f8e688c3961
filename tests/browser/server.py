"""The built site on 127.0.0.1, and its list of pages."""

from __future__ import annotations

import functools
import http.server
import os
import posixpath
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
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


# The pace a page's HTML is sent at (_Handler.copyfile): at once unless GUIDE_TRICKLE_S (or a
# test) sets a pause. 16 kB every 0.15 s made the reference index without its table rule shift
# by 0.165 on 3 loads of 3 (at once: 0 of 3), but costs about a second a page and depends on
# where the pieces break: no test uses it. A table that re-lays its columns is caught on every
# load by check_table_columns instead (tests/browser/checks.py); the trickle is for looking.
TRICKLE_BYTES = int(os.environ.get("GUIDE_TRICKLE_BYTES", "16000"))
TRICKLE_S = float(os.environ.get("GUIDE_TRICKLE_S", "0"))


def missing_browser() -> str | None:
    """What the browser tests lack on this machine, in words to install it; None if nothing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package (pip install -r requirements.txt)"
    if not Path(CHROMIUM).is_file():
        return f"chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    return None


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

    def copyfile(self, source, outputfile):
        """A page's HTML in pieces, TRICKLE_BYTES every TRICKLE_S, as over a slow network:
        the browser parses and paints each piece before the next arrives, so a layout that
        depends on what comes later (a table's columns on its last rows) shifts on every load,
        not only when a busy machine happens to paint mid-parse. Other files at once."""
        if not TRICKLE_S or not getattr(source, "name", "").endswith(".html"):
            return super().copyfile(source, outputfile)
        while piece := source.read(TRICKLE_BYTES):
            outputfile.write(piece)
            outputfile.flush()
            time.sleep(TRICKLE_S)
        return None


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
