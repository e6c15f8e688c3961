"""The tooling guard (hooks/lesson_prose.py): lesson prose names no test suite, CI, allocator,
instruction set, spelling check, build step or lab/ path outside collapsed "How ..." notes.
Planted pages go through a real mkdocs build of a tiny project with the project's hook, and the
real pages through the guard's own reading."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from hooks.lesson_prose import NOT_YET, prose_problems
from lab.shared.common import ROOT

CONFIG = f"""site_name: prose
theme: mkdocs
hooks:
  - {ROOT / "hooks" / "lesson_prose.py"}
markdown_extensions:
  - admonition
  - pymdownx.details
  - pymdownx.superfences
nav:
  - Home: index.md
  - Lessons:
      - A lesson: lesson.md
"""
HOME = "# Home\n\nEvery block runs in the test suite and its output is checked.\n"
CLEAN = """# A lesson

The causal mask hides the future: query \\(i\\) reads keys \\(0, \\ldots, i\\).

```python
# the test suite, lab/ and CI may be named in code
print("tests/ and lab/ in a string")
```

<!-- check: skip the suite runs a quick version in tests/lab/test_x.py -->

??? note "How this was measured"

    The test suite times it on two cores; the allocator of glibc keeps freed pages; the
    result file is written by `lab/measure.py`.

Back in prose after the note.
"""


def build(tmp_path, lesson: str, home: str = HOME) -> subprocess.CompletedProcess:
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "mkdocs.yml").write_text(CONFIG)
    (docs / "index.md").write_text(home)
    (docs / "lesson.md").write_text(lesson)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_lesson_with_tooling_only_in_code_comments_and_how_notes_builds(tmp_path):
    """The home page may say it; code, HTML comments and a collapsed How-note may name it."""
    done = build(tmp_path, CLEAN)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("sentence", "word", "names"),
    [
        ("Every block here runs in the test suite.", "test suite", "the test suite"),
        ("The suite checks it on every run.", "The suite", "the test suite"),
        ("A CI job reruns it weekly.", "CI", "CI"),
        ("What the allocator keeps for reuse shows at large T.", "allocator", "an allocator"),
        ("Inductor needs a vector instruction set.", "instruction set", "an instruction set"),
        ("Seed 7 passes the spelling check.", "spelling check", "the spelling check"),
        ("The site build typesets the math.", "site build", "a build step"),
        ("The loader is `lab/oracle/from_transformers.py`.", "lab/", "a path of lab/"),
        ("`tests/snippets/test_x.py` checks both.", "tests/", "a path of tests/"),
    ],
)
def test_a_planted_tooling_word_in_lesson_prose_fails_the_build(tmp_path, sentence, word, names):
    planted = CLEAN.replace("Back in prose after the note.", f"Back in prose. {sentence}")
    done = build(tmp_path, planted)
    assert done.returncode != 0, f"built with {sentence!r} in the prose"
    assert "lesson.md: its lesson prose talks about the tooling" in done.stderr, done.stderr
    line = planted.splitlines().index(f"Back in prose. {sentence}") + 1
    assert f'line {line}: "{word}" (names {names})' in done.stderr, done.stderr


def test_an_open_note_is_prose_and_a_collapsed_one_not_titled_how_is_too(tmp_path):
    """Only a collapsed note whose title starts with "How" holds the measuring."""
    for opener in ('???+ note "How this was measured"', '??? note "Details"'):
        planted = CLEAN.replace('??? note "How this was measured"', opener)
        sub = tmp_path / ("open" if "+" in opener else "other")
        sub.mkdir()
        done = build(sub, planted)
        assert done.returncode != 0, opener
        assert '"test suite" (names the test suite)' in done.stderr, done.stderr


def test_every_lesson_page_of_the_site_keeps_the_rule():
    """The real pages, read as the hook reads them: the nav's lessons, home and reference out."""
    import yaml

    text = (ROOT / "mkdocs.yml").read_text()
    config = yaml.safe_load(re.sub(r"!!python/name:\S+|!ENV|!relative", "", text))
    lessons = []

    def walk(entry, section=None):
        if isinstance(entry, str):
            if entry.endswith(".md") and entry != "index.md" and section != "API reference":
                lessons.append(entry)
        elif isinstance(entry, dict):
            for title, value in entry.items():
                walk(value, section or (title if isinstance(value, list) else None))
        elif isinstance(entry, list):
            for value in entry:
                walk(value, section)

    walk(config["nav"])
    assert "todays-models.md" in lessons and "contributing.md" not in lessons, lessons
    found = {
        page: prose_problems((ROOT / "docs" / page).read_text())
        for page in lessons
        if page not in NOT_YET
    }
    assert not any(found.values()), {page: p for page, p in found.items() if p}
