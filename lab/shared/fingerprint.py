"""What a cached result was computed from: the project's modules and shipped data.

Standard library only. The sources are read with ast, never imported, so a build
can ask whether anything changed without paying for a torch import.

code_fingerprint hashes the modules' text (the notebook cache: a page may print a
docstring); recipe_fingerprint, the trained models' key, hashes their syntax trees
without docstrings, so a comment or a docstring changes no model's key.
"""

import ast
import functools
import hashlib
from pathlib import Path

from lab.shared.common import ROOT

PACKAGES = ("snippets", "lab")  # the project's own code; any other import is a package's


def imported_modules(roots: list[Path], root: Path = ROOT, leave_out=()) -> set[Path]:
    """The modules of the project's packages among `roots` and those they import;
    `leave_out` (paths): modules neither counted nor followed."""
    seen, todo = set(), list(roots)
    skipped = {Path(p).resolve() for p in leave_out}
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file() or path.resolve() in skipped:
            continue
        seen.add(path)
        for name in _project_imports(path.read_text(encoding="utf-8")):
            # lab.shared.common is lab/shared/common.py; a name that is no module file
            # (a function imported from one, a package's __init__) leads nowhere.
            todo.append(root.joinpath(*name.split(".")).with_suffix(".py"))
    return {p for p in seen if p.relative_to(root).parts[0] in PACKAGES}


@functools.cache  # by the source text: an edited module is read anew
def _project_imports(source: str) -> tuple[str, ...]:
    """The dotted names of the project's packages that `source` imports: a module
    (lab.shared.common), or with `from x import y` also each x.y, which is a module
    when x is a package (from lab.shared import common)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if name.partition(".")[0] in PACKAGES]
    return tuple(found)


def code_fingerprint(roots: list[Path], versions: str, root: Path = ROOT) -> str:
    """A hash of `versions` (the packages that matter), the project's modules
    `roots` import, and the data in root/data/."""
    digest = hashlib.sha256(f"{versions}\n".encode())
    data = sorted((root / "data").glob("*.txt"))
    files = sorted(imported_modules(roots, root)) + data
    for path in files:
        digest.update(f"{path.relative_to(root).as_posix()}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache  # by the source text, as _project_imports
def without_docstrings(source: str) -> str:
    """The module's syntax tree, dumped without its docstrings (and so without comments,
    blank lines and line numbers, which the tree never holds): what Python runs."""
    tree = ast.parse(source)
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, kinds) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                node.body = body[1:]
    return ast.dump(tree)


def recipe_fingerprint(
    roots: list[Path], versions: str, data=(), root: Path = ROOT, leave_out=()
) -> str:
    """A trained model's key: a hash of `versions`, the code of the project's modules
    `roots` import (without docstrings; `leave_out` neither counted nor followed) and
    the files `data` (paths relative to root) as bytes."""
    digest = hashlib.sha256(f"{versions}\n".encode())
    for path in sorted(imported_modules(roots, root, leave_out)):
        digest.update(f"{path.relative_to(root).as_posix()}\n".encode())
        digest.update(without_docstrings(path.read_text(encoding="utf-8")).encode())
    for name in sorted(data):
        digest.update(f"{name}\n".encode())
        digest.update((root / name).read_bytes())
    return digest.hexdigest()
