"""hooks/results.py on what contributors write: Markdown pages with result directives, run
through a real strict mkdocs build (a tiny project with the project's hook and Markdown
extensions), with a planted module of result functions."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lab.shared.common import ROOT

CONFIG = f"""site_name: results
theme: material
hooks:
  - {ROOT / "hooks" / "results.py"}
markdown_extensions:
  - admonition
  - tables
  - pymdownx.details
  - pymdownx.superfences
"""
MODULE = """
def table():
    return (
        "| T | ms |\\n| ---: | ---: |\\n| 64 | 1.25 |\\n| 128 | 1.83 |\\n\\n"
        '??? note "How this was measured"\\n\\n    - Command: `python -m lab.x`\\n'
    )


def values():
    return {"ratio": "2.51", "T": "1,024"}


def broken():
    raise KeyError("no result for sdpa")


def not_text():
    return 3
"""
GOOD = """# Good

Intro.

<!-- result: planted_results:table -->

SDPA is <!-- value: planted_results:values ratio --> times faster at
T = <!-- value: planted_results:values T -->.

!!! note "Inside an admonition"

    <!-- result: planted_results:table -->

Written as code it stays: `<!-- value: planted_results:values nothing -->`.

```markdown
<!-- result: planted_results:nothing -->
```
"""


def build(tmp_path, page: str) -> subprocess.CompletedProcess:
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(CONFIG)
    (tmp_path / "planted_results.py").write_text(MODULE)
    (tmp_path / "docs" / "index.md").write_text(page)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_a_page_with_directives_builds_with_tables_notes_and_values(tmp_path):
    done = build(tmp_path, GOOD)
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    assert html.count("<table>") == 2  # the top-level one and the one in the admonition
    assert html.count("<details") == 2 and "How this was measured" in html
    assert "<td>1.83</td>" in html or '<td style="text-align: right;">1.83</td>' in html
    assert "SDPA is 2.51 times faster at\nT = 1,024." in html
    assert "values nothing --&gt;</code>" in html  # a code span keeps the directive
    assert "planted_results:nothing" in html  # and so does a fence


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("<!-- result: planted_nowhere:table -->", "cannot import planted_nowhere"),
        ("<!-- result: planted_results:missing -->", "planted_results has no function missing"),
        ("<!-- result: planted_results:broken -->", "planted_results:broken() raised KeyError"),
        ("<!-- result: planted_results:not_text -->", "not_text() returned int, not Markdown"),
        ("<!-- result: planted_results -->", "is not module:function"),
        (
            "The ratio <!-- value: planted_results:values speedup --> here.",
            "values() has no key 'speedup'",
        ),
        ("The ratio <!-- value: planted_results:values --> here.", "is not `module:function key`"),
        ("Table: <!-- result: planted_results:table -->", "must be a line of its own"),
    ],
)
def test_a_bad_directive_fails_the_strict_build_with_page_and_line(tmp_path, line, error):
    page = f"---\ntitle: Bad\n---\n\n# Bad\n\nFine.\n\n{line}\n"
    done = build(tmp_path, page)
    assert done.returncode != 0
    # The directive is on line 9 of the file, front matter included.
    lines = [line for line in done.stderr.splitlines() if "docs/index.md:9: " in line]
    assert lines and error in lines[0], done.stderr
