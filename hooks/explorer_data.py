"""MkDocs hook: the attention explorer's data, and its script where a page holds one.

- on_post_page gives pages that hold an explorer (the attention and the mask figures)
  its script and stylesheet; no other page loads them.
- on_post_build writes assets/attention-explorer.json, the attention weights the explorer
  shows, made by lab/see_attention.py (explorer_data) from the models the notebook trained. It is
  kept in .cache/explorer/ under the notebooks' code fingerprint (hooks/notebook_cache.py),
  so a build whose code did not change imports no torch at all.
- on_post_build also writes assets/live/, the char GPT the explorer runs in the reader's
  browser (lab/recipes/live_model.py: its snippets.run.train checkpoint, a manifest and its float32
  weights), kept in .cache/live/ under the same fingerprint.
"""

import json
import shutil
from importlib.metadata import version
from pathlib import Path

from mkdocs.utils import get_relative_url

from hooks.notebook_cache import code_fingerprint, keep_only, notebooks
from lab.shared import fingerprint
from lab.shared.common import CACHE, ROOT, atomic_write

JSON_URI = "assets/attention-explorer.json"
SCRIPT_URI = "assets/javascripts/attention-explorer.js"
STYLE_URI = "assets/stylesheets/attention-explorer.css"
LIVE_URI = "assets/live"
LIVE_MODEL = ROOT / "lab" / "recipes" / "live_model.py"  # what the live model's files are made by
_state = {}


def on_config(config):
    _state["key"] = code_fingerprint(notebooks(config))
    torch = f"torch {version('torch')}"
    _state["live"] = fingerprint.code_fingerprint([LIVE_MODEL], torch, ROOT)[:20]
    return config


def on_post_page(output, page, config):
    if 'class="attention-explorer' in output or 'class="mask-explorer' in output:
        css = get_relative_url(STYLE_URI, page.url)
        js = get_relative_url(SCRIPT_URI, page.url)
        output = output.replace(
            "</head>", f'<link rel="stylesheet" href="{css}">\n</head>', 1
        ).replace("</body>", f'<script src="{js}"></script>\n</body>', 1)
    return output


def explorer_json(key: str) -> Path:
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
    keep_only(kept.parent, kept)
    return kept


def live_files(key: str) -> Path:
    """The folder of the page's live model (lab/recipes/live_model.py) for this version of the code,
    made if not kept already."""
    kept = CACHE / "live" / key
    if kept.is_dir():
        return kept
    from lab.recipes import live_model

    tmp = kept.parent / f"{key}.tmp"  # keep_only leaves another build's .tmp alone
    shutil.rmtree(tmp, ignore_errors=True)
    live_model.write(tmp)
    tmp.rename(kept)
    keep_only(kept.parent, kept)
    return kept


def on_post_build(config):
    out = Path(config["site_dir"]) / JSON_URI
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(explorer_json(_state["key"]).read_bytes())
    live = Path(config["site_dir"]) / LIVE_URI
    live.mkdir(parents=True, exist_ok=True)
    for kept in sorted(live_files(_state["live"]).iterdir()):
        (live / kept.name).write_bytes(kept.read_bytes())
