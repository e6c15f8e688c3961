"""The page harness itself: one test per promise it makes, each able to fail.

The promises (docs/contributing.md, "How the code blocks are run"): a page's blocks run in page
order in one namespace; includes are expanded exactly as the site renders them; Output blocks
are compared; a skip needs a reason and the reason is shown; a failure names docs/<page>.md:<line>;
--update-output rewrites Output blocks; each page gets a ran/skipped line; no fence a reader
would take for runnable code is passed over; pages whose blocks all passed are recorded (see
also tests/test_last_run.py); and all of it holds under pytest-xdist.
"""

import html
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hooks.page_parser import RUN, PageError, markdown_snippet_expander, parse_page
from lab.shared.common import ROOT
from tests.pages.test_site import _CodeBlocks

MKDOCS_YML = """\
site_name: harness test
markdown_extensions:
  - admonition
  - pymdownx.details
  - pymdownx.highlight:
      pygments_lang_class: true
  - pymdownx.snippets:
      base_path: !relative $config_dir
      check_paths: true
      dedent_subsections: true
  - pymdownx.superfences
  - pymdownx.tabbed:
      alternate_style: true
"""

MODULE = """\
# --8<-- [start:greet]
def greet(name):
    return f"hello {name}"
# --8<-- [end:greet]
"""


def write_site(root: Path, pages: dict[str, str], extra_config: str = "") -> None:
    """A throw-away site: mkdocs.yml, a module to include from, and the pages."""
    (root / "mkdocs.yml").write_text(MKDOCS_YML + extra_config)
    (root / "conftest.py").write_text(
        'pytest_plugins = ["tests.pagecheck.plugin", "tests.xdist_scheduling"]\n'
    )
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = docs\naddopts = -ra\n")
    (root / "code").mkdir(exist_ok=True)
    (root / "code" / "greeting.py").write_text(MODULE)
    (root / "docs").mkdir(exist_ok=True)
    for name, text in pages.items():
        (root / "docs" / name).write_text(textwrap.dedent(text))


def run_pages(
    tmp_path: Path, pages: dict[str, str], *args: str, extra_config: str = ""
) -> subprocess.CompletedProcess:
    """Run the harness in a fresh pytest process on a throw-away site."""
    write_site(tmp_path, pages, extra_config)
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

ORDER = """\
    ```python
    seen = ["first"]
    ```

    ```python
    seen.append("second")
    print(seen)
    ```

    ```text title="Output"
    ['first', 'second']
    ```
"""


BROKEN = """\
    # Broken

    ```python
    x = 1
    y = x / 0
    ```
"""

CHAIN = """\
    ```python
    raise RuntimeError("first")
    ```

    ```python
    print("second")
    ```
"""

OUTPUT = """\
    ```python
    print(6 * 7)
    ```

    ```text title="Output"
    41
    ```
"""


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> subprocess.CompletedProcess:
    """One pytest process over several small pages; each test below reads one page's part."""
    pages = {"good.md": GOOD, "order.md": ORDER, "broken.md": BROKEN, "chain.md": CHAIN}
    return run_pages(tmp_path_factory.mktemp("site"), {**pages, "output.md": OUTPUT})


def test_blocks_run_in_page_order_in_one_namespace(one_run):
    assert "docs/order.md: 2 ran (1 with checked output), 0 skipped" in one_run.stdout
    assert "FAILED docs/order.md" not in one_run.stdout


def test_good_page_reports_counts_and_skip_reasons(one_run):
    assert "FAILED docs/good.md" not in one_run.stdout
    assert "docs/good.md: 2 ran (1 with checked output), 1 skipped" in one_run.stdout
    assert "skipped docs/good.md:19: needs a GPU" in one_run.stdout  # the harness's summary
    assert "SKIPPED [1] docs/good.md: docs/good.md:19: needs a GPU" in one_run.stdout  # -ra


def test_broken_block_fails_with_page_and_line(one_run):
    assert one_run.returncode == 1
    assert "ZeroDivisionError in the block at docs/broken.md:3" in one_run.stdout
    assert "docs/broken.md:5\n    y = x / 0" in one_run.stdout


def test_later_blocks_fail_after_an_earlier_one_failed(one_run):
    assert "FAILED docs/chain.md::line 1" in one_run.stdout
    assert "FAILED docs/chain.md::line 5" in one_run.stdout
    assert "not run: the block at docs/chain.md:1 failed earlier" in one_run.stdout


def test_wrong_output_fails(one_run):
    assert "FAILED docs/output.md::line 1" in one_run.stdout
    assert "--- page shows ---\n41\n--- code printed ---\n42" in one_run.stdout


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


def test_update_output_rewrites_the_output_block(tmp_path):
    proc = run_pages(tmp_path, {"output.md": OUTPUT}, "--update-output")
    assert proc.returncode == 0, proc.stdout
    assert "updated the Output block at docs/output.md:5" in proc.stdout
    assert '```text title="Output"\n42\n```' in (tmp_path / "docs" / "output.md").read_text()


def test_a_block_run_without_the_blocks_above_it_fails(tmp_path):
    """Selecting one block, or xdist splitting a page, would run it in an empty namespace."""
    proc = run_pages(tmp_path, {"order.md": ORDER}, "docs/order.md::line 5")
    assert proc.returncode == 1
    assert "is block 2 of its page, but only 0 blocks of the page ran before it" in proc.stdout


COUNTING = "".join(f"\n```python\nn{i} = n{i - 1} + 1\n```\n" for i in range(1, 7))


def test_under_xdist_a_page_stays_whole_and_the_controller_reports_and_records(tmp_path):
    """With two workers (as pytest.ini runs the suite), each page's blocks run in order in one
    worker, the summary lists every page, and only the green page is recorded."""
    chain = "```python\nn0 = 0\n```\n" + COUNTING
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


@pytest.mark.parametrize(
    "page, message",
    [
        ("<!-- check: skip -->\n```python\npass\n```\n", "'check: skip' needs a reason"),
        ("<!-- check: later -->\n```python\npass\n```\n", "unknown directive"),
        ("<!-- check: isolated -->\n```python\npass\n```\n", "unknown directive"),
        ("<!-- check: skip why -->\n\ntext\n```python\npass\n```\n", "directly above a fence"),
        ("```python\npass\n", "never closed"),
        ('```text title="Output"\n1\n```\n', "an Output block must follow a code block"),
        ('--8<-- "code/greeting.py:greet"\n', "includes outside a code fence"),
        ("Mark it with `# --8<-- [start:x]`.\n", "the build deletes a line holding"),
        # Fences a reader takes for runnable code, but which would not run as written.
        (">>> 1 + 1\n", None),  # plain text, not a fence: nothing to refuse
        ("```pycon\n>>> 1 + 1\n2\n```\n", "a 'pycon' fence would be shown but not run"),
        ("```console\n$ make test\n```\n", "a 'console' fence would be shown but not run"),
        ("```py\npass\n```\n", "a 'py' fence would be shown but not run"),
        ("```sh\ntrue\n```\n", "a 'sh' fence would be shown but not run"),
        ("``` { .python .annotate }\npass\n```\n", "fence would be shown but not run"),
    ],
)
def test_malformed_pages_are_refused(tmp_path, page, message):
    # In-process: none of these reaches an include, so no expander is needed. That a
    # PageError becomes a collection error that fails the run is shown by
    # test_missing_include_fails, through a real pytest process.
    (tmp_path / "docs").mkdir()
    path = tmp_path / "docs" / "bad.md"
    path.write_text(page)
    if message is None:
        assert parse_page(path, tmp_path, expand=lambda lines: lines) == []
        return
    with pytest.raises(PageError, match=re.escape(message)):
        parse_page(path, tmp_path, expand=lambda lines: lines)


TRICKY = """\
    ```python title="code/greeting.py"
    --8<-- "code/greeting.py:greet"
    ```

    !!! note

        ```python
        print(greet("admonition"))
        ```

    === "Tab"

        ```python
        print(greet("tab"))
        ```

    ````markdown
    A fence inside a Markdown example is text, not code:

    ```python
    print("never run")
    ```
    ````

    ```bash
    echo shell
    ```
"""


def test_code_collected_is_the_code_rendered(tmp_path):
    """The fence-not-collected check, on fences that are easy to miss or to over-collect.

    The page is rendered with Python-Markdown and the test site's extensions; the python and
    bash blocks of the HTML must be the blocks the harness runs, with the same text.
    tests/pages/test_site.py makes the same comparison on every page of the real build.
    """
    import markdown
    from mkdocs.config import load_config

    write_site(tmp_path, {"tricky.md": TRICKY})
    config = load_config(str(tmp_path / "mkdocs.yml"))
    md = markdown.Markdown(
        extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"]
    )
    page = tmp_path / "docs" / "tricky.md"
    parser = _CodeBlocks()
    parser.feed(md.convert(page.read_text()))
    shown = [(lang, html.unescape(code).rstrip("\n")) for lang, code in parser.blocks]
    expand = markdown_snippet_expander(tmp_path / "mkdocs.yml")
    blocks = parse_page(page, tmp_path, expand)
    tested = [(b.lang, b.code.rstrip("\n")) for b in blocks if b.kind]
    assert [s for s in shown if s[0] in RUN] == tested
    assert len(tested) == 4 and 'return f"hello {name}"' in tested[0][1]


def test_a_page_outside_nav_fails_its_own_page_test(tmp_path):
    nav = "nav:\n  - Home: listed.md\n"
    proc = run_pages(tmp_path, {"listed.md": ORDER, "orphan.md": ORDER}, extra_config=nav)
    assert proc.returncode == 1, proc.stdout
    assert "FAILED docs/orphan.md::nav" in proc.stdout
    assert "docs/orphan.md is not in the nav of mkdocs.yml" in proc.stdout
    assert "add `- Title: orphan.md` under `nav:`" in proc.stdout
    assert "FAILED docs/listed.md" not in proc.stdout
    assert "1 failed, 4 passed" in proc.stdout  # the orphan's blocks still run
    record = json.loads((tmp_path / ".cache" / "pagecheck" / "last-run.json").read_text())
    assert sorted(record) == ["docs/listed.md"]


def test_the_mismatch_report_marks_the_first_differing_line(tmp_path):
    page = '```python\nprint("a\\nb = 2\\nc")\n```\n\n```text title="Output"\na\nb = 3\nc\n```\n'
    proc = run_pages(tmp_path, {"lines.md": page})
    assert proc.returncode == 1, proc.stdout
    assert (
        "--- first difference: line 2 ---\n"
        "page shows:   b = 3\n"
        "code printed: b = 2\n"
        "                  ^"
    ) in proc.stdout


def test_a_missing_output_line_is_named(tmp_path):
    page = '```python\nprint("a")\n```\n\n```text title="Output"\na\nb\n```\n'
    proc = run_pages(tmp_path, {"short.md": page})
    assert "--- first difference: line 2 ---" in proc.stdout
    assert "code printed: (nothing: the code's output ends here)" in proc.stdout


def test_the_out_of_order_message_counts_one_block_in_the_singular(tmp_path):
    three = "```python\na = 1\n```\n\n```python\nb = a\n```\n\n```python\nc = b\n```\n"
    proc = run_pages(
        tmp_path, {"three.md": three}, "docs/three.md::line 1", "docs/three.md::line 9"
    )
    assert "is block 3 of its page, but only 1 block of the page ran before it" in proc.stdout
