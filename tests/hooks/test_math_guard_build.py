"""The math guards of hooks/prerender_math.py on what contributors write: Markdown pages run
through a real mkdocs build (a tiny project using the project's hook and its arithmatex
setting), not hand-written HTML. Python-Markdown turns \\[ into [ before any HTML check, so
only a build shows whether a guard can fail."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from lab.shared.common import ROOT

if shutil.which("node") is None or not (ROOT / "tools" / "node_modules" / "mathjax-full").is_dir():
    pytest.skip(
        "needs Node.js and `npm ci --prefix tools` (as the build does)", allow_module_level=True
    )

CONFIG = f"""site_name: guard
theme: material
hooks:
  - {ROOT / "hooks" / "prerender_math.py"}
markdown_extensions:
  - pymdownx.arithmatex:
      generic: true
"""
GOOD = (
    "# Good\n\nInline \\(\\sqrt{D}\\) math.\n\n\\[\nQK^\\top\n\\]\n\n"
    "Code keeps `\\[ as written \\]` and `$$x$$`.\n\n```text\n\\[ in a fence \\] $$y$$\n```\n"
)


def build(tmp_path, page: str) -> subprocess.CompletedProcess:
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(CONFIG)
    (tmp_path / "docs" / "index.md").write_text(page)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_correct_page_builds_with_its_math_typeset(tmp_path):
    done = build(tmp_path, GOOD)
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    assert html.count("<mjx-container") == 2  # the inline formula and the display one
    assert "\\[ as written \\]" in html  # code is shown as written


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (
            "The scores \\[ QK^\\top \\] on one line.",
            "'The scores \\\\[ QK^\\\\top \\\\] on one line.'",
        ),
        ("Inline $$\\sqrt{D}$$ here.", "'Inline $$\\\\sqrt{D}$$ here.'"),
    ],
    ids=["display-math-on-a-line-with-text", "inline-double-dollar"],
)
def test_a_planted_page_fails_the_build_naming_page_and_line(tmp_path, line, text):
    done = build(tmp_path, GOOD + f"\nMore text.\n\n{line}\n")
    assert done.returncode != 0
    at = len(GOOD.splitlines()) + 4
    assert f"index.md:{at}: {text}" in done.stderr, done.stderr


def test_tex_that_reaches_the_html_raw_fails_the_build_naming_page_and_line(tmp_path):
    """The second guard, on the rendered page: math inside a raw HTML block is left as
    written by Markdown and by arithmatex, and would reach the reader as TeX."""
    done = build(tmp_path, GOOD + "\n<p>A weight \\(w_{ij}\\) in raw HTML.</p>\n")
    assert done.returncode != 0
    at = len(GOOD.splitlines()) + 2
    assert "index.md: TeX left raw in the rendered page" in done.stderr, done.stderr
    assert f"index.md:{at}: " in done.stderr, done.stderr
