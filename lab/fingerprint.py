"""What a cached result was computed from: the project's modules and shipped data.

Standard library only. The sources are read with ast, never imported, so a build
can ask whether anything changed without paying for a torch import.
"""

import ast
import hashlib
from pathlib import Path

from lab.common import ROOT

PACKAGES = ("snippets", "lab")  # the project's own code; any other import is a package's


def imported_modules(roots: list[Path], root: Path = ROOT) -> set[Path]:
    """The modules of the project's packages among `roots` and those they import."""
    seen, todo = set(), list(roots)
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
                if node.module in PACKAGES:  # from snippets import attention
                    names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                package, _, module = name.partition(".")
                if package in PACKAGES and module:
                    todo.append(root / package / f"{module.split('.')[0]}.py")
    return {p for p in seen if p.parent.name in PACKAGES and p.parent.parent == root}


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
