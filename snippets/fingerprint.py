"""What a cached result was computed from: snippets/ modules and shipped data.

Standard library only. The sources are read with ast, never imported, so a build
can ask whether anything changed without paying for a torch import.
"""

import ast
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def snippets_imported_by(roots: list[Path], root: Path = ROOT) -> set[Path]:
    """The modules of root/snippets/ among `roots` and those they import."""
    snippets = root / "snippets"
    seen, todo = set(), list(roots)
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
                if node.module == "snippets":  # from snippets import explorer
                    names = [f"snippets.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.startswith("snippets."):
                    todo.append(snippets / f"{name.split('.')[1]}.py")
    return {p for p in seen if p.parent == snippets}


def code_fingerprint(roots: list[Path], versions: str, root: Path = ROOT) -> str:
    """A hash of `versions` (the packages that matter), the snippets/ modules
    `roots` import, and the data in root/data/."""
    digest = hashlib.sha256(f"{versions}\n".encode())
    data = sorted((root / "data").glob("*.txt"))
    files = sorted(snippets_imported_by(roots, root)) + data
    for path in files:
        digest.update(f"{path.relative_to(root).as_posix()}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
