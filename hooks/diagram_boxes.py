"""MkDocs hook: each Mermaid diagram's space is kept for it before it is drawn.

Mermaid draws a diagram in the reader's browser, when it scrolls near: the SVG then replaces
the diagram's source text, and on a first screen the text under it would jump (a layout
shift). on_page_content wraps each `<pre class="mermaid">` in a box of the drawing's own
proportions (CSS aspect-ratio, at most its natural width), read from
docs/assets/diagram-sizes.json by a hash of the diagram's text. That file is written by
`python -m tests.browser.diagram_sizes`, which draws every diagram of a built site in
chromium; the browser tests fail, naming that command, when a diagram has no box or a box of
the wrong size.
"""

from __future__ import annotations

import hashlib
import html as html_lib
import json
import re
from pathlib import Path

SIZES = Path("docs/assets/diagram-sizes.json")  # relative to the folder of mkdocs.yml
DIAGRAM = re.compile(r'<pre class="mermaid"><code>(.*?)</code></pre>', re.S)


def diagram_key(text: str) -> str:
    """The key of a diagram: its source as the browser hands it to Mermaid."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def on_page_content(html, page, config, files):
    path = Path(config["config_file_path"]).parent / SIZES
    sizes = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def box(m):
        size = sizes.get(diagram_key(html_lib.unescape(m.group(1))))
        if size is None:
            return m.group(0)
        width, height = size
        style = f"max-width: {width}px; aspect-ratio: {width} / {height}"
        return f'<div class="diagram-box" style="{style}">{m.group(0)}</div>'

    return DIAGRAM.sub(box, html)
