"""The minutes of study (hooks/reading_time.py): counted from each page's words and shown
code, filled into the page's header and the home page's learning path, never typed in.
Planted pages go through a real mkdocs build of a tiny project with the project's hook; the
real site through the hook's own counting and a page of the real build."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from hooks.reading_time import count_markdown, count_notebook, minutes
from lab.shared.common import ROOT

CONFIG = f"""site_name: minutes
theme: mkdocs
hooks:
  - {ROOT / "hooks" / "reading_time.py"}
markdown_extensions:
  - pymdownx.snippets:
      base_path: !relative $config_dir
      check_paths: true
  - pymdownx.superfences
nav:
  - Home: index.md
  - Core path:
      - First: first.md
      - Second: second.md
  - Deep dives (optional):
      - Extra: extra.md
"""
HOME = """# Home

## Learning path

The core path takes about <!-- hours: core --> hours (<!-- minutes: core --> minutes).

1. [First](first.md) (<!-- minutes: first.md --> min): one.
2. [Second](second.md) (<!-- minutes: second.md --> min): two.
3. [Extra](extra.md) (<!-- minutes: extra.md --> min): optional.
"""
WORDS = " ".join(["word"] * 360)  # two minutes at 180 words a minute


def lesson(title: str, body: str = "") -> str:
    return f"# {title}\n\n**About <!-- minutes --> minutes.**\n\n{body}\n\n## Next\n\nOn.\n"


FIRST = lesson("First", WORDS)  # 2 + 5 + 6 words: 2 minutes
# 24 lines included from a module (one blank line not counted) and 12 typed: 3 minutes,
# plus 360 words: 5 minutes.
MODULE = "\n".join(
    ["# --8<-- [start:part]"] + [f"x{i} = {i}" for i in range(24)] + ["", "# --8<-- [end:part]"]
)
SECOND = lesson(
    "Second",
    WORDS
    + '\n\n```python\n--8<-- "snippets/m.py:part"\n```\n\n```python\n'
    + "\n".join(f"y{i} = {i}" for i in range(12))
    + "\n```",
)
EXTRA = lesson("Extra", WORDS + " " + WORDS + " " + WORDS)  # 6 minutes, not core


def build(tmp_path, pages: dict[str, str]) -> subprocess.CompletedProcess:
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "m.py").write_text(MODULE)
    (tmp_path / "mkdocs.yml").write_text(CONFIG)
    files = {"index.md": HOME, "first.md": FIRST, "second.md": SECOND, "extra.md": EXTRA}
    for name, text in {**files, **pages}.items():
        (docs / name).write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_the_build_fills_each_page_s_minutes_and_the_core_total(tmp_path):
    done = build(tmp_path, {})
    assert done.returncode == 0, done.stderr
    site = tmp_path / "site"
    assert "About 2 minutes." in text((site / "first" / "index.html").read_text())
    assert "About 5 minutes." in text((site / "second" / "index.html").read_text())
    assert "About 6 minutes." in text((site / "extra" / "index.html").read_text())
    home = text((site / "index.html").read_text())
    # The core total sums the core pages only (2 + 5), not the deep dive's 6.
    assert "about 0.1 hours (7 minutes)" in home, home
    for shown in ("First (2 min)", "Second (5 min)", "Extra (6 min)"):
        assert shown in home, home


@pytest.mark.parametrize(
    ("page", "planted", "message"),
    [
        # A count typed by hand under a lesson's title (right or wrong, it goes stale).
        (
            "first.md",
            FIRST.replace("<!-- minutes -->", "2"),
            '"2 minutes" under its title is typed in by hand',
        ),
        ("first.md", FIRST.replace("**About <!-- minutes --> minutes.**", ""), "0 <!-- minutes"),
        # The placeholder must sit under the title, not further down.
        (
            "first.md",
            FIRST.replace("**About <!-- minutes --> minutes.**", "").replace(
                "## Next\n\nOn.", "## Next\n\nOn, <!-- minutes --> minutes."
            ),
            "0 under its title",
        ),
        # The home page: a typed count, a page left out, a page the nav does not have.
        (
            "index.md",
            HOME.replace("(<!-- minutes: second.md --> min)", "(5 min)"),
            '"5 min" is typed in by hand',
        ),
        (
            "index.md",
            HOME.replace("(<!-- minutes: extra.md --> min)", ""),
            "shows no minutes for extra.md",
        ),
        (
            "index.md",
            HOME.replace("<!-- minutes: extra.md -->", "<!-- minutes: gone.md -->"),
            "gone.md is no lesson of the nav",
        ),
        (
            "index.md",
            HOME.replace("<!-- minutes: core -->", "7"),
            '"7 minutes" is typed in by hand',
        ),
    ],
)
def test_a_planted_typed_or_missing_count_fails_the_build(tmp_path, page, planted, message):
    done = build(tmp_path, {page: planted})
    assert done.returncode != 0, f"built with {message!r}"
    assert f"{page}: minutes of study" in done.stderr, done.stderr
    assert message in done.stderr, done.stderr


def test_the_count_is_issue_47_s_rule(tmp_path):
    """180 words a minute, 5 s a shown line; included sections expanded (blank lines and the
    markers not counted), HTML comment lines and fence lines not counted, a code span one
    word."""
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "m.py").write_text(MODULE)
    page = (
        "Two `code spans` words.\n<!-- check: skip not counted -->\n"
        '```python\n--8<-- "snippets/m.py:part"\n\nz = 1\n```\n'
    )
    assert count_markdown(page, tmp_path) == (3, 24 + 1)
    assert minutes(180, 12) == 2.0
    notebook = (
        "# ---\n# jupyter: x\n# ---\n\n"
        "# %% [markdown]\n# Three words here\n\n# %%\na = 1\n\nb = 2\n"
    )
    assert count_notebook(notebook) == (3, 2)


def test_no_page_of_the_site_types_its_minutes_by_hand():
    """The real pages: every lesson's opening and the home page's learning path hold only
    placeholders (the build fails otherwise; this says which page without a build)."""
    from hooks.reading_time import NOT_YET, TYPED, opening

    typed = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name in ("index.md", "contributing.md") or page.name in NOT_YET:
            continue
        head = opening(page.read_text())
        found = [m.group(0) for m in TYPED.finditer(head)]
        if found or "<!-- minutes -->" not in page.read_text():
            typed[page.name] = found or "no placeholder"
    assert not typed, typed
    home = (ROOT / "docs" / "index.md").read_text()
    assert home.count("<!-- minutes: ") > 20 and "<!-- minutes: core -->" in home
