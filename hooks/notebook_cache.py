"""MkDocs hook: the notebook pages' cache follows the code they run.

mkdocs-jupyter keys its cache of executed notebooks by the notebook file alone: an edit to
snippets/ or lab/ would leave the page showing the old code's results. on_config points the
plugin's cache at a folder named after the fingerprint of everything the notebooks import
(and of the torch and matplotlib versions); older folders are removed.
"""

from importlib.metadata import version
from pathlib import Path

# Both stdlib only, no torch: a build whose code did not change imports no torch at all.
from lab.shared import fingerprint
from lab.shared.common import CACHE, ROOT

NOTEBOOK_SUFFIXES = (".py", ".ipynb")
# The explorer's data (hooks/explorer_data.py) comes from the models the notebook trains.
MODEL_CACHE = ROOT / "lab" / "see_attention.py"


def notebooks(config) -> list[Path]:
    """The notebook pages mkdocs-jupyter executes (its `include` patterns under docs/)."""
    jupyter = config.plugins.get("mkdocs-jupyter")
    if jupyter is None:
        return []
    docs = Path(config["docs_dir"])
    return [
        path
        for pattern in jupyter.config["include"]
        for path in docs.rglob("*")
        if path.suffix in NOTEBOOK_SUFFIXES and path.match(pattern)
    ]


def code_fingerprint(notebook_paths: list[Path]) -> str:
    """A hash of what the notebooks and the explorer's data are computed from: the
    project's modules they import, the data, and the torch and matplotlib versions. (The
    notebooks' own text is in mkdocs-jupyter's key already.)"""
    roots = [*notebook_paths, MODEL_CACHE]
    versions = f"torch {version('torch')}, matplotlib {version('matplotlib')}"
    return fingerprint.code_fingerprint(roots, versions, ROOT)[:20]


def keep_only(folder: Path, current: Path) -> None:
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
    jupyter = config.plugins.get("mkdocs-jupyter")
    if jupyter is not None and jupyter.config["cache"]:
        current = CACHE / "mkdocs-jupyter" / code_fingerprint(notebooks(config))
        keep_only(current.parent, current)
        jupyter.config["cache_dir"] = str(current)
    return config
