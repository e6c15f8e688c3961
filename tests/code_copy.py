"""A throw-away copy of the code the trained models and the notebook depend on, and the check
that a cache key follows it: shared by the model cache's tests (tests/lab/) and the notebook
cache's (tests/hooks/)."""

from pathlib import Path

from lab.shared.common import ROOT


def copy_of_the_code(tmp_path) -> Path:
    """snippets/, lab/, data/ and the notebook, copied: files to edit without harm."""
    copy = tmp_path / "repo"
    folders = (("snippets", "**/*.py"), ("lab", "**/*.py"), ("data", "*.txt"), ("docs", "*.py"))
    for folder, pattern in folders:
        for path in (ROOT / folder).glob(pattern):
            target = copy / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return copy


def assert_key_follows_the_code(copy: Path, key) -> None:
    """key() changes with any file the models are trained from, and only with those."""
    before = key()
    assert before == key()
    changed_files = (
        "snippets/core/attention.py",
        "snippets/pages/induction.py",
        "lab/model_cache.py",
    )
    for changed in (*changed_files, "data/guide-snapshot.txt"):
        path = copy / changed
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert key() != before, changed
        path.write_bytes(original)
    (copy / "snippets" / "unrelated.py").write_text("import torch\n")
    assert key() == before
