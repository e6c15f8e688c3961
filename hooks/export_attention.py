"""MkDocs hook: the attention explorer's data, and the upkeep of notebook pages.

- on_config: points mkdocs-jupyter's cache at a folder named after the fingerprint of the
  code the notebook runs. The plugin's own cache key hashes only the notebook file:
  without this, an edit to snippets/ would leave the page showing results of the
  old code.
- on_post_page: gives pages that hold an explorer its script and stylesheet; on
  notebook pages, removes the scripts of nbconvert's template that would fetch
  MathJax 2 and Mermaid from a CDN, and fails the build if any other script or
  stylesheet there would load from another host.
- on_post_build: writes assets/attention-explorer.json, the attention weights the
  explorer shows, made by lab/see_attention.py (explorer_data) from the models the
  notebook trained. It is kept in .cache/explorer/ under the same fingerprint, so a
  build whose code did not change imports no torch at all.
"""

import json
import re
from importlib.metadata import version
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.utils import get_relative_url

# The project is installed (pip install -e .): the hook, and the notebook's kernel, a
# separate process, import it like any package. Both modules: stdlib only, no torch.
from lab import fingerprint
from lab.common import CACHE, ROOT, atomic_write

JSON_URI = "assets/attention-explorer.json"
SCRIPT_URI = "assets/javascripts/attention-explorer.js"
STYLE_URI = "assets/stylesheets/attention-explorer.css"
NOTEBOOK_SUFFIXES = (".py", ".ipynb")
_state = {}


def code_fingerprint(notebooks: list[Path]) -> str:
    """A hash of what the notebooks and the explorer's data are computed from: the
    project's modules they import, the data, and the torch and matplotlib
    versions. (The notebooks' own text is in mkdocs-jupyter's key already.)"""
    roots = [*notebooks, ROOT / "lab" / "see_attention.py"]
    versions = f"torch {version('torch')}, matplotlib {version('matplotlib')}"
    return fingerprint.code_fingerprint(roots, versions, ROOT)[:20]


def _keep_only(folder: Path, current: Path) -> None:
    """Remove what older code left in folder: it is never used again."""
    if folder.is_dir():
        for old in folder.iterdir():
            if old == current or old.suffix == ".tmp":  # .tmp: another build's, unfinished
                continue
            if old.is_dir():
                for f in old.iterdir():
                    f.unlink()
                old.rmdir()
            else:
                old.unlink()


def on_config(config):
    notebooks = []
    jupyter = config.plugins.get("mkdocs-jupyter")
    if jupyter is not None:
        docs = Path(config["docs_dir"])
        notebooks = [
            path
            for pattern in jupyter.config["include"]
            for path in docs.rglob("*")
            if path.suffix in NOTEBOOK_SUFFIXES and path.match(pattern)
        ]
    key = _state["key"] = code_fingerprint(notebooks)
    if jupyter is not None and jupyter.config["cache"]:
        current = CACHE / "mkdocs-jupyter" / key
        _keep_only(current.parent, current)
        jupyter.config["cache_dir"] = str(current)
    return config


# The CDN scripts of nbconvert's "lab" template: MathJax 2 (the site serves MathJax 3
# itself) and Mermaid (no notebook cell draws a diagram).
_NBCONVERT_CDN = [
    re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S),
    re.compile(
        r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded"'
        r".*?<!-- End of mermaid configuration -->",
        re.S,
    ),
]
_REMOTE = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)
_REMOTE_IMPORT = re.compile(r"import\(\s*[\"'](?:https?:)?//", re.I)


def _strip_cdn_scripts(html: str, page) -> str:
    for pattern in _NBCONVERT_CDN:
        html, n = pattern.subn("", html)
        if n != 1:
            raise PluginError(
                f"{page.file.src_uri}: expected one block of nbconvert's template "
                f"matching {pattern.pattern[:40]!r}, found {n}: has mkdocs-jupyter or "
                f"nbconvert changed its template? Update hooks/export_attention.py"
            )
    return html


def on_post_page(output, page, config):
    if page.file.src_uri.endswith(NOTEBOOK_SUFFIXES):
        output = _strip_cdn_scripts(output, page)
        article = output[output.find("<article") : output.find("</article>")]
        if _REMOTE.search(article) or _REMOTE_IMPORT.search(article):
            raise PluginError(f"{page.file.src_uri}: the notebook loads from another host")
    if 'class="attention-explorer' in output or 'class="mask-explorer' in output:
        css = get_relative_url(STYLE_URI, page.url)
        js = get_relative_url(SCRIPT_URI, page.url)
        output = output.replace(
            "</head>", f'<link rel="stylesheet" href="{css}">\n</head>', 1
        ).replace("</body>", f'<script src="{js}"></script>\n</body>', 1)
    return output


def _explorer_json(key: str) -> Path:
    """The explorer's JSON for this version of the code, made if not kept already."""
    kept = CACHE / "explorer" / f"{key}.json"
    if kept.is_file():
        return kept
    import torch

    from lab.see_attention import explorer_data

    # Tiny models: one thread is faster than two fighting for a busy machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = explorer_data()
    finally:
        torch.set_num_threads(threads)
    atomic_write(kept, lambda f: json.dump(data, f, ensure_ascii=False, separators=(",", ":")))
    _keep_only(kept.parent, kept)
    return kept


def on_post_build(config):
    out = Path(config["site_dir"]) / JSON_URI
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(_explorer_json(_state["key"]).read_bytes())
