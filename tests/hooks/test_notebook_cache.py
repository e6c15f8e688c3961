"""Tests for hooks/notebook_cache.py: the notebook's cache is named after the code it runs."""

from hooks import notebook_cache
from lab.shared import fingerprint
from lab.shared.common import ROOT
from tests.code_copy import assert_key_follows_the_code, copy_of_the_code


def test_notebook_cache_key_covers_what_the_notebook_imports(tmp_path, monkeypatch):
    copy = copy_of_the_code(tmp_path)
    monkeypatch.setattr(notebook_cache, "ROOT", copy)
    monkeypatch.setattr(notebook_cache, "MODEL_CACHE", copy / "lab" / "see_attention.py")
    notebook = copy / "docs" / "see-attention.py"
    modules = {p.name for p in fingerprint.imported_modules([notebook], copy)}
    assert {"model_cache.py", "char_gpt.py", "induction.py", "style.py", "model.py"} <= modules
    assert_key_follows_the_code(copy, lambda: notebook_cache.code_fingerprint([notebook]))


def test_the_build_used_a_cache_named_after_the_code(built_site):
    """After the build, the notebook's and the explorer's caches are the ones of this code:
    an edit to snippets/ re-runs the notebook."""
    key = notebook_cache.code_fingerprint([ROOT / "docs" / "see-attention.py"])
    assert list((ROOT / ".cache" / "mkdocs-jupyter" / key).glob("*.json"))
    assert (ROOT / ".cache" / "explorer" / f"{key}.json").is_file()
