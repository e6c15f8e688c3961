"""The layout rule: snippets/ holds what pages show, readable in one sitting, needing only torch
and the standard library; everything else (commands, plots, caches) is in lab/."""

import ast
import sys

import pytest

from lab.common import ROOT

MODULES = sorted((ROOT / "snippets").glob("*.py"))
MAX_LINES = 470  # "about 450": a module a reader can take in at one sitting
ALLOWED = {"torch", "snippets"} | set(sys.stdlib_module_names)


def imported_packages(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_snippets_need_only_torch_and_the_standard_library(path):
    assert imported_packages(path) <= ALLOWED, imported_packages(path) - ALLOWED


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_snippets_modules_are_short(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.name}: {lines} lines; move tooling to lab/ or split it"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_snippets_module_has_its_tests(path):
    if path.name == "__init__.py":
        return
    assert (ROOT / "tests" / f"test_{path.stem}.py").is_file()
