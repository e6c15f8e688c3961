"""MkDocs hook: notebook pages load nothing from another host.

nbconvert's "lab" template, which mkdocs-jupyter renders notebook pages with, adds scripts
that fetch MathJax 2 and Mermaid from a CDN. The site typesets its math at build time
(hooks/prerender_math.py) and no notebook cell draws a diagram, so on_post_page removes both
blocks, and fails the build if any other script or stylesheet of the article would still
load from another host.
"""

import re

from mkdocs.exceptions import PluginError

NOTEBOOK_SUFFIXES = (".py", ".ipynb")
NBCONVERT_CDN = [
    re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S),
    re.compile(
        r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded"'
        r".*?<!-- End of mermaid configuration -->",
        re.S,
    ),
]
REMOTE = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)
REMOTE_IMPORT = re.compile(r"import\(\s*[\"'](?:https?:)?//", re.I)


def strip_cdn_scripts(html: str, page) -> str:
    for pattern in NBCONVERT_CDN:
        html, n = pattern.subn("", html)
        if n != 1:
            raise PluginError(
                f"{page.file.src_uri}: expected one block of nbconvert's template "
                f"matching {pattern.pattern[:40]!r}, found {n}: has mkdocs-jupyter or "
                f"nbconvert changed its template? Update hooks/notebook_cdn.py"
            )
    return html


def on_post_page(output, page, config):
    if not page.file.src_uri.endswith(NOTEBOOK_SUFFIXES):
        return output
    output = strip_cdn_scripts(output, page)
    article = output[output.find("<article") : output.find("</article>")]
    if REMOTE.search(article) or REMOTE_IMPORT.search(article):
        raise PluginError(f"{page.file.src_uri}: the notebook loads from another host")
    return output
