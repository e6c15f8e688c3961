"""make test-page's "What to fix" (tests/browser/one_page.py), on a made-up repository: each
fault a contributor makes gives one paragraph naming the file, the line and the fix."""

import pytest

from tests.browser import one_page

MKDOCS = """\
site_name: x
validation:
  nav:
    omitted_files: warn
nav:
  - Home: index.md
  - A: a.md
{new}  - B: b.md
"""
PAGE = """\
---
requires: []
---

# {title}

```python
--8<-- "snippets/x.py:{section}"
```

## Next

[B](b.md) comes next.
"""
SNIPPET = "# --8<-- [start:imports]\nimport torch\n# --8<-- [end:imports]\n"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository whose new page, docs/new.md, is written by the test."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "x.py").write_text(SNIPPET)
    index = (
        "---\nrequires: []\n---\n\n# Home\n\n## Learning path\n\n1. [A](a.md)\n{new}2. [B](b.md)\n"
    )
    (tmp_path / "docs" / "a.md").write_text(PAGE.format(title="A", section="imports"))
    (tmp_path / "docs" / "b.md").write_text("# B\n")
    monkeypatch.setattr(one_page, "ROOT", tmp_path)

    def write(in_nav: bool, section: str = "imports", neighbours: bool = True):
        nav = "  - New: new.md\n" if in_nav else ""
        (tmp_path / "mkdocs.yml").write_text(MKDOCS.format(new=nav))
        listed = "2. [New](new.md)\n" if in_nav and neighbours else ""
        (tmp_path / "docs" / "index.md").write_text(index.format(new=listed))
        new = PAGE.format(title="New", section=section)
        (tmp_path / "docs" / "new.md").write_text(new)
        if in_nav and neighbours:
            a = PAGE.format(title="A", section="imports").replace("[B](b.md)", "[New](new.md)")
            (tmp_path / "docs" / "a.md").write_text(a)
        return one_page.source_fixes("new.md")

    return write


def test_a_correct_new_page_has_nothing_to_fix(repo):
    assert repo(in_nav=True) == []


def test_a_page_missing_from_the_nav(repo):
    (fix,) = repo(in_nav=False)
    assert fix.startswith("docs/new.md is not in the nav")
    assert "add `- Title: new.md` under `nav:` in mkdocs.yml (line 5)" in fix


def test_an_include_of_a_section_the_file_does_not_have(repo):
    (fix,) = repo(in_nav=True, section="imprts")
    assert fix.startswith("docs/new.md:8: the include `snippets/x.py:imprts` names no section")
    assert "snippets/x.py has the sections: imports. Did you mean 'imports'?" in fix


def test_the_neighbours_next_and_the_learning_path(repo):
    fixes = repo(in_nav=True, neighbours=False)
    assert len(fixes) == 2, fixes
    assert fixes[0].startswith("docs/a.md:11: the first link of its '## Next' section must be")
    assert "Fix: make new.md the first link under its `## Next`" in fixes[0]
    assert fixes[1].startswith("docs/index.md:7: its 'Learning path' must link every page")


def test_a_dead_link(repo):
    repo(in_nav=True)
    new = one_page.ROOT / "docs" / "new.md"
    new.write_text(new.read_text().replace("comes next.", "comes next, after [C](bb.md)."))
    warning = (
        "Doc file 'new.md' contains a link 'bb.md', but the target is not found among "
        "documentation files."
    )
    (fix,) = one_page.build_fixes("new.md", [warning], None)
    assert fix.startswith("docs/new.md:13: the link to bb.md finds no page"), fix
    assert "(did you mean b.md?)" in fix
    assert one_page.build_fixes("new.md", [warning.replace("'new.md'", "'a.md'")], None) == []


def test_a_required_page_never_linked_is_named_though_mkdocs_aborts(repo):
    """mkdocs logs the hook's words and raises a bare Abort: the fix still names them."""
    repo(in_nav=True)
    logged = "new.md: out of reading order:\n  requires a.md but never links to it"
    (fix,) = one_page.build_fixes("new.md", [logged], "Abort: Aborted with a BuildError!")
    assert fix == (
        "docs/new.md:2: requires a.md but never links to it. Fix: change that line "
        "(contributing.md, the reading order)."
    ), fix
    other = one_page.build_fixes("new.md", ["new.md: minutes of study: no placeholder"], "Abort: x")
    assert other == [
        "docs/new.md: the build of the page failed: new.md: minutes of study: no placeholder"
    ]


def test_an_output_changed_on_purpose():
    out = (
        "the block at docs/x.md:14 printed something other than its Output block at "
        "docs/x.md:19\nFAILED docs/x.md::line 14 - the block\n"
    )
    (fix,) = one_page.block_fixes("docs/x.md", out)
    assert fix.startswith("docs/x.md:19: the Output block is not what the block at docs/x.md:14")
    assert "`.venv/bin/python -m pytest docs/x.md --update-output -n 0 -q`" in fix
