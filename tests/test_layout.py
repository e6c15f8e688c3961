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
    # tests/test_<name>.py, or where issue 19's layout puts it, tests/snippets/test_<name>.py
    name = f"test_{path.stem}.py"
    assert (ROOT / "tests" / name).is_file() or (ROOT / "tests" / "snippets" / name).is_file()


# --- lab/: imports point one way, files stay short ---------------------------------------------

LAB = sorted((ROOT / "lab").glob("*.py"))
LAB_MAX_LINES = 500


def lab_imports(path) -> set[str]:
    """The lab modules that a lab module imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "lab":  # from lab import style
                names |= {alias.name for alias in node.names}
            elif node.module.startswith("lab."):
                names.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] for a in node.names if a.name.startswith("lab.")}
    return names & {p.stem for p in LAB}


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """A chain of modules that leads back to its first one, or [] if there is none."""
    done, path = set(), []

    def visit(name: str) -> list[str]:
        if name in path:
            return path[path.index(name) :] + [name]
        if name in done:
            return []
        path.append(name)
        for other in sorted(graph[name]):
            if cycle := visit(other):
                return cycle
        path.pop()
        done.add(name)
        return []

    for name in sorted(graph):
        if cycle := visit(name):
            return cycle
    return []


def test_lab_has_no_import_circle():
    graph = {p.stem: lab_imports(p) - {p.stem} for p in LAB}
    assert import_cycle(graph) == [], " -> ".join(import_cycle(graph))


def test_import_cycle_finds_a_circle():
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


@pytest.mark.parametrize("path", LAB, ids=lambda p: p.name)
def test_lab_modules_are_short(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= LAB_MAX_LINES, f"{path.name}: {lines} lines; split it (runners, tables, CLI)"
