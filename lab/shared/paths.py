"""Where things are: the repository and the folders under it.

Standard library only, and nothing else imported: the build's hooks and the page
harness read these paths without paying for a torch import.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
DOCS = ROOT / "docs"
RESULTS_DIR = DOCS / "assets" / "results"  # committed result files and figures
TRAINING_RESULTS = RESULTS_DIR / "training"
CACHE = ROOT / ".cache"  # ignored by git: trained models, notebook outputs
ARTIFACTS = ROOT / "test-artifacts"  # ignored by git: what tests and --quick runs leave
# The page harness records pages whose blocks all passed; hooks/last_run.py reads it.
# Relative: both resolve it against the folder they run in (pytest's rootdir, mkdocs.yml's).
LAST_RUN = Path(".cache") / "pagecheck" / "last-run.json"
