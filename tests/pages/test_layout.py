"""The layout rules: snippets/ holds what pages show, readable in one sitting, needing only torch
and the standard library; everything else (commands, plots, caches) is in lab/; the modules of
snippets/, lab/ and hooks/ import each other in no circle; tests/ mirrors the code; and no
project Python file holds so much that it does more than one job (MAX_FILE_LINES); and lab/
trains only through snippets.run.train's one loop."""

import ast
import sys
from pathlib import Path

import pytest

from lab.shared.common import ROOT

# Every module of the package, its subpackages' too (snippets/lessons/attention.py).
MODULES = sorted((ROOT / "snippets").rglob("*.py"))
MAX_LINES = 470  # "about 450": a module a reader can take in at one sitting
MAX_FILE_LINES = 500  # any project file: past this, it holds more than one job
ALLOWED = {"torch", "snippets"} | set(sys.stdlib_module_names)
PROJECT_FILES = sorted(
    path
    for folder in ("snippets", "lab", "hooks", "tests")
    for path in (ROOT / folder).rglob("*.py")
    if "vendor" not in path.relative_to(ROOT).parts
) + sorted((ROOT / "docs").glob("*.py"))


def imported_packages(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def module_names(folder: Path) -> dict[Path, str]:
    """Every module of a package folder, by its dotted name inside it (shared.common)."""
    return {
        path: ".".join(path.relative_to(folder).with_suffix("").parts)
        for path in sorted(folder.rglob("*.py"))
        if path.name != "__init__.py"
    }


def package_imports(path: Path, package: str = "lab", folder: Path | None = None) -> set[str]:
    """The modules of `package` (lab, snippets, hooks; its folder, by default path's) that
    one of its modules imports, anywhere in it (an import inside a function, or under
    `if TYPE_CHECKING:`, is still a dependency: it only hides a circle until that code runs
    or a tool reads it). Modules are named as module_names names them."""
    named = module_names(folder or path.parent)
    modules = set(named.values())
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from .x import y
                base = f"{package}.{base}" if base else package
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            head, _, inside = target.partition(".")
            if head == package and inside in modules:
                names.add(inside)
    names.discard(named.get(path))
    return names


def import_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph (as a path that ends where it starts), or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [])
            if found:
                return found
    return None


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT / "snippets").as_posix())
def test_snippets_need_only_torch_and_the_standard_library(path):
    assert imported_packages(path) <= ALLOWED, imported_packages(path) - ALLOWED


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT / "snippets").as_posix())
def test_snippets_modules_are_short(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    name = path.relative_to(ROOT / "snippets").as_posix()
    assert lines <= MAX_LINES, f"{name}: {lines} lines; move tooling to lab/ or split it"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT / "snippets").as_posix())
def test_every_snippets_module_has_its_tests(path):
    if path.name == "__init__.py":
        return
    # snippets/lessons/attention.py -> tests/snippets/lessons/test_attention.py
    inside = path.relative_to(ROOT / "snippets").parent
    expected = ROOT / "tests" / "snippets" / inside / f"test_{path.stem}.py"
    name = path.relative_to(ROOT / "snippets").as_posix()
    assert expected.is_file(), f"snippets/{name} has no {expected.relative_to(ROOT)}"


@pytest.mark.parametrize("package", ["snippets", "lab", "hooks"])
def test_a_package_s_modules_import_each_other_in_no_circle(package):
    folder = ROOT / package
    graph = {
        name: package_imports(path, package, folder) for path, name in module_names(folder).items()
    }
    circle = import_circle(graph)
    assert circle is None, (
        f"{package}/ imports in a circle: "
        + " -> ".join(f"{package}/{name.replace('.', '/')}.py" for name in circle)
        + "; move what both need into a module that imports neither (an import for an"
        " annotation only counts too: name the type in the annotation without importing it)"
    )


@pytest.mark.parametrize("path", sorted((ROOT / "hooks").glob("*.py")), ids=lambda p: p.name)
def test_the_build_s_hooks_never_import_the_tests(path):
    # The site builds from a checkout without tests/: what a hook and the suite both need (the
    # page parser) lives in hooks/, and the suite imports it from there.
    assert "tests" not in imported_packages(path), (
        f"hooks/{path.name} imports tests/: move what it needs into hooks/ (as the page "
        "parser is, in hooks/page_parser.py) and let the tests import it from there"
    )


def test_the_circle_finder_finds_circles_through_function_level_imports(tmp_path):
    # The finder itself, on a throw-away package: a top-level import one way, an import inside
    # a function the other way, and a module outside the circle.
    (tmp_path / "a.py").write_text("from lab.b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from lab import a\n    return a\n")
    (tmp_path / "c.py").write_text("import lab.a\n")
    graph = {path.stem: package_imports(path) for path in tmp_path.glob("*.py")}
    assert graph == {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert import_circle(graph) == ["a", "b", "a"]
    assert import_circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


@pytest.mark.parametrize("path", PROJECT_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_project_python_files_are_at_most_500_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_FILE_LINES, (
        f"{path.relative_to(ROOT)}: {lines} lines (at most {MAX_FILE_LINES}); split it by job"
    )


# What a lab module may call although it looks like training, and why.
NOT_TRAINING = {
    ("taming_softmax.py", "backward"): "times a layer's forward and backward; trains nothing",
}


def training_steps(source: str) -> list[str]:
    """Where a module steps an optimizer itself: train_step() or .backward() called, an
    optimizer's .step(), a learning rate written into a parameter group."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            stepped = name == "step" and "optim" in ast.unparse(getattr(func, "value", func))
            if name in ("train_step", "backward") or stepped:
                found.append((name, node.lineno))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "lr"
        ):
            found.append(('["lr"] =', node.lineno))
    return sorted(found, key=lambda item: item[1])


@pytest.mark.parametrize(
    "path", sorted((ROOT / "lab").rglob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_lab_trains_only_through_the_one_loop(path):
    # Experiments differ in their data and setup, not in loops: each trains with
    # snippets.run.train.fit (the learning rate set, the step taken, the next batch drawn).
    found = [
        f"{name} (line {line})"
        for name, line in training_steps(path.read_text(encoding="utf-8"))
        if (path.name, name) not in NOT_TRAINING
    ]
    assert not found, (
        f"{path.relative_to(ROOT)} steps an optimizer itself: {', '.join(found)}; train with "
        "snippets.run.train.fit, passing the batches and the schedule"
    )


def test_the_loop_finder_finds_a_hand_written_loop():
    loop = (
        "for step in range(9):\n"
        "    for group in optimizer.param_groups:\n"
        "        group['lr'] = lr_at(step)\n"
        "    loss = model(x)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    assert training_steps(loop) == [('["lr"] =', 3), ("backward", 5), ("step", 6)]
    assert training_steps("train_step(model, opt, batches, 1.0)\nscheduler.step()\n") == [
        ("train_step", 1)
    ]
