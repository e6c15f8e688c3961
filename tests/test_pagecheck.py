"""The page harness itself: it must fail on broken pages, and say where."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.pagecheck import PageError, parse_page

MKDOCS_YML = """\
site_name: harness test
markdown_extensions:
  - admonition
  - pymdownx.details
  - pymdownx.snippets:
      base_path: !relative $config_dir
      check_paths: true
      dedent_subsections: true
  - pymdownx.superfences
"""

MODULE = """\
# --8<-- [start:greet]
def greet(name):
    return f"hello {name}"
# --8<-- [end:greet]
"""


def run_pages(tmp_path: Path, pages: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """Run the harness in a fresh pytest process on a throw-away site."""
    (tmp_path / "mkdocs.yml").write_text(MKDOCS_YML)
    (tmp_path / "conftest.py").write_text(
        'pytest_plugins = ["tests.pagecheck", "tests.xdist_scheduling"]\n'
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = docs\n")
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "greeting.py").write_text(MODULE)
    (tmp_path / "docs").mkdir(exist_ok=True)
    for name, text in pages.items():
        (tmp_path / "docs" / name).write_text(textwrap.dedent(text))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )


GOOD = """\
    # A page

    ```python title="code/greeting.py"
    --8<-- "code/greeting.py:greet"
    ```

    !!! note

        ```python
        message = greet("reader")
        print(message)
        ```

        ```text title="Output"
        hello reader
        ```

    <!-- check: skip needs a GPU -->
    ```python
    import cuda_only_package
    ```
"""


def test_good_page_runs_blocks_in_one_namespace_and_reports_counts(tmp_path):
    proc = run_pages(tmp_path, {"good.md": GOOD})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "docs/good.md: 2 ran (1 with checked output), 1 skipped" in proc.stdout
    assert "skipped line 19: needs a GPU" in proc.stdout


def test_broken_block_fails_with_page_and_line(tmp_path):
    page = """\
        # Broken

        ```python
        x = 1
        y = x / 0
        ```
    """
    proc = run_pages(tmp_path, {"broken.md": page})
    assert proc.returncode == 1
    assert "ZeroDivisionError in the block at docs/broken.md:3" in proc.stdout
    assert "docs/broken.md:5\n    y = x / 0" in proc.stdout


def test_missing_include_fails(tmp_path):
    page = """\
        ```python
        --8<-- "code/greeting.py:no_such_section"
        ```
    """
    proc = run_pages(tmp_path, {"missing.md": page})
    assert proc.returncode != 0
    assert "docs/missing.md:2: include failed" in proc.stdout
    assert "no_such_section" in proc.stdout


def test_wrong_output_fails_and_update_output_rewrites_it(tmp_path):
    page = """\
        ```python
        print(6 * 7)
        ```

        ```text title="Output"
        41
        ```
    """
    proc = run_pages(tmp_path, {"output.md": page})
    assert proc.returncode == 1
    assert "--- page shows ---\n41\n--- code printed ---\n42" in proc.stdout
    proc = run_pages(tmp_path, {"output.md": page}, "--update-output")
    assert proc.returncode == 0
    assert '```text title="Output"\n42\n```' in (tmp_path / "docs" / "output.md").read_text()


CHAIN = "".join(f"\n```python\nn{i} = n{i - 1} + 1\n```\n" for i in range(1, 7))


def test_under_xdist_a_page_stays_whole_and_the_controller_reports_and_records(tmp_path):
    """With two workers (as pytest.ini runs the suite), each page's blocks run in order in one
    worker, the summary lists every page, and only the green page is recorded."""
    chain = "```python\nn0 = 0\n```\n" + CHAIN
    wrong = '```python\nprint(6 * 7)\n```\n\n```text title="Output"\n41\n```\n'
    pages = {"chain.md": chain, "wrong.md": wrong}
    proc = run_pages(tmp_path, pages, "-n", "2")
    assert proc.returncode == 1, proc.stdout
    assert "bringing up nodes" in proc.stdout  # the workers of pytest-xdist
    assert "1 failed, 7 passed" in proc.stdout
    assert "docs/chain.md: 7 ran (0 with checked output), 0 skipped" in proc.stdout
    assert "docs/wrong.md: 1 ran (1 with checked output), 0 skipped" in proc.stdout
    record = json.loads((tmp_path / ".cache" / "pagecheck" / "last-run.json").read_text())
    assert sorted(record) == ["docs/chain.md"]
    assert record["docs/chain.md"]["blocks"] == 7
    proc = run_pages(tmp_path, pages, "-n", "2", "--update-output")
    assert proc.returncode == 0, proc.stdout
    assert "updated the Output block at docs/wrong.md:5" in proc.stdout
    assert '```text title="Output"\n42\n```' in (tmp_path / "docs" / "wrong.md").read_text()


def test_later_blocks_fail_after_an_earlier_one_failed(tmp_path):
    page = """\
        ```python
        raise RuntimeError("first")
        ```

        ```python
        print("second")
        ```
    """
    proc = run_pages(tmp_path, {"chain.md": page})
    assert "2 failed" in proc.stdout
    assert "not run: the block at docs/chain.md:1 failed earlier" in proc.stdout


@pytest.mark.parametrize(
    "page, message",
    [
        ("<!-- check: skip -->\n```python\npass\n```\n", "'check: skip' needs a reason"),
        ("<!-- check: later -->\n```python\npass\n```\n", "unknown directive"),
        ("```python\npass\n", "never closed"),
        ('```text title="Output"\n1\n```\n', "an Output block must follow a code block"),
        ('--8<-- "code/greeting.py:greet"\n', "includes outside a code fence"),
        ("Mark it with `# --8<-- [start:x]`.\n", "the build deletes a line holding"),
    ],
)
def test_malformed_pages_are_refused(tmp_path, page, message):
    # In-process: none of these reaches an include, so no expander is needed. That a
    # PageError becomes a collection error that fails the run is shown by
    # test_missing_include_fails, through a real pytest process.
    (tmp_path / "docs").mkdir()
    path = tmp_path / "docs" / "bad.md"
    path.write_text(page)
    with pytest.raises(PageError, match=re.escape(message)):
        parse_page(path, tmp_path, expand=lambda lines: lines)


def test_every_spelling_of_a_python_fence_is_collected(tmp_path):
    """Fences pytest-codeblocks would silently pass over are run here."""
    page = """\
        ```py
        a = 1
        ```

        ```python title="with a title"
        b = a + 1
        ```

        ``` { .python .annotate }
        c = b + 1
        ```

        ~~~~python3
        print(a + b + c)
        ~~~~

        ```text title="Output"
        6
        ```
    """
    proc = run_pages(tmp_path, {"spellings.md": page})
    assert proc.returncode == 0, proc.stdout
    assert "docs/spellings.md: 4 ran (1 with checked output), 0 skipped" in proc.stdout
