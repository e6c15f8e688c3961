"""Taking the code away: one repository address everywhere, and the whole-module boxes
(hooks/module_boxes.py) list what a module really imports."""

import re

import yaml

from hooks import module_boxes
from lab.shared.common import ROOT


def _repo_url() -> str:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return re.search(r"^repo_url: (\S+)$", text, re.M)[1]


def test_the_install_line_names_the_repository_of_mkdocs_yml():
    line = f'pip install "git+{_repo_url()}"'
    for path in ("README.md", "docs/index.md"):
        assert line in (ROOT / path).read_text(encoding="utf-8"), path


PLACEHOLDER = "https://github.com/attention-guide/attention-guide"


def test_a_placeholder_address_is_called_one_and_where_to_change_it_is_said():
    """While repo_url is the placeholder, the README and the home page say so beside the
    install line, and the contributing page names the three places to change."""
    placeholder = _repo_url() == PLACEHOLDER
    for path in ("README.md", "docs/index.md"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert ("That address is a placeholder" in text) == placeholder, path
    if not placeholder:
        return  # published: the contributing page's paragraph is then to be rewritten
    contributing = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    for place in ("`repo_url` in `mkdocs.yml`", "`README.md`", "`docs/index.md`", PLACEHOLDER):
        assert place in contributing, place


def test_edit_links_point_into_the_repository():
    config = yaml.safe_load(
        re.sub(r"!!python/name:\S+|!ENV|!relative", "", (ROOT / "mkdocs.yml").read_text())
    )
    assert config["edit_uri"] == "edit/main/docs/"
    assert "content.action.edit" in config["theme"]["features"]


class _Files:
    def get_file_from_path(self, path):
        return path if path == "reference/b.md" else None


def test_a_box_lists_direct_and_indirect_guide_imports(tmp_path):
    pkg = tmp_path / "snippets"
    pkg.mkdir()
    (pkg / "a.py").write_text("import math\nimport torch\nfrom snippets.b import f\n")
    (pkg / "b.py").write_text("import json\nfrom snippets.c import g\n")
    (pkg / "c.py").write_text("import numpy as np\n")
    (pkg / "alone.py").write_text("import torch\n")
    lines = module_boxes.box("snippets/a.py", tmp_path, "https://x.org/r", "page.md", _Files())
    text = "\n".join(lines)
    assert "[`snippets/a.py`](https://x.org/r/blob/main/snippets/a.py), 3 lines." in text
    assert "it needs `numpy`, `torch`." in text  # c's import counts: a reader copies c too
    assert "imports the guide's [`snippets.b`](reference/b.md), which import `snippets.c`" in text
    alone = "\n".join(module_boxes.box("snippets/alone.py", tmp_path, None, "p.md", _Files()))
    assert "the file works alone" in alone and "`snippets/alone.py`, 1 line." in alone


def test_a_subpackage_s_module_links_to_its_own_reference_page(tmp_path):
    """snippets.lessons.b has its page at reference/lessons/b.md; reference/b.md is the
    package's snippets.b, another module."""
    (tmp_path / "snippets" / "lessons").mkdir(parents=True)
    (tmp_path / "snippets" / "lessons" / "a.py").write_text("from snippets.lessons.b import f\n")
    (tmp_path / "snippets" / "lessons" / "b.py").write_text("import torch\n")

    class Files:
        def get_file_from_path(self, path):
            return path if path in ("reference/b.md", "reference/lessons/b.md") else None

    text = "\n".join(module_boxes.box("snippets/lessons/a.py", tmp_path, None, "p.md", Files()))
    assert "[`snippets.lessons.b`](reference/lessons/b.md)" in text


def test_the_transformer_page_box_names_its_real_imports(built_site):
    page = (built_site / "transformer" / "index.html").read_text(encoding="utf-8")
    box = page[page.index("The whole module: snippets/lessons/transformer.py") :][:3000]
    assert "<code>snippets.lessons.attention</code>" in box
    assert "reference/lessons/attention/" in box  # the lesson's page, not the package's
    assert "blob/main/snippets/lessons/transformer.py" in box
