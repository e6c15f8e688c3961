"""MkDocs hook: the "whole module" boxes, made from the modules' own imports.

A page line `<!-- module-box: snippets/core/attention.py -->` becomes a box that links the file in
the repository and lists what it imports: the guide's modules (and theirs, transitively:
what a reader copying the file must copy with it, in a folder named `snippets/`) and the
packages from outside the guide. The list is read from the file's import statements at every
build, so it cannot drift from the code. A marker naming a file that does not exist fails
the build.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^(?P<indent>[ \t]*)<!--\s*module-box:\s*(?P<path>\S+)\s*-->[ \t]*$", re.M)
PACKAGE = "snippets"


def imports_of(path: Path) -> set[str]:
    """The top-level names and `snippets.*` modules a file imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def guide_modules(path: Path, root: Path) -> tuple[list[str], list[str], list[str]]:
    """(guide modules it imports directly, those they import in turn, outside packages)."""

    def guide(names):
        return {n for n in names if n.split(".")[0] == PACKAGE and n != PACKAGE}

    direct = guide(imports_of(path))
    seen, todo, outside = (
        set(),
        list(direct),
        {n.split(".")[0] for n in imports_of(path) if n.split(".")[0] != PACKAGE},
    )
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        file = root / Path(*module.split(".")).with_suffix(".py")
        names = imports_of(file)
        todo += sorted(guide(names) - seen)
        outside |= {n.split(".")[0] for n in names if n.split(".")[0] != PACKAGE}
    outside -= set(sys.stdlib_module_names) | {"__future__"}
    return sorted(direct), sorted(seen - direct), sorted(outside)


def _module_link(module: str, page_uri: str, files) -> str:
    # snippets.core.model -> reference/core/model.md, snippets.lessons.attention ->
    # reference/lessons/attention.md (not the package's reference/core/attention.md)
    ref = "reference/" + "/".join(module.split(".")[1:]) + ".md"
    text = f"`{module}`"
    if files.get_file_from_path(ref) is None:
        return text
    depth = page_uri.count("/")
    return f"[{text}]({'../' * depth}{ref})"


def box(rel: str, root: Path, repo_url: str | None, page_uri: str, files) -> list[str]:
    path = root / rel
    if not path.is_file():
        raise PluginError(f"{page_uri}: module-box names {rel}, which does not exist")
    direct, indirect, outside = guide_modules(path, root)
    lines_count = len(path.read_text(encoding="utf-8").splitlines())
    where = f"[`{rel}`]({repo_url.rstrip('/')}/blob/main/{rel})" if repo_url else f"`{rel}`"
    size = f"{lines_count} line" + ("" if lines_count == 1 else "s")
    out = [f'!!! abstract "The whole module: {rel}"', f"    {where}, {size}."]
    needs = ", ".join(f"`{p}`" for p in outside) or "nothing"
    out.append(f"    Outside the standard library it needs {needs}.")
    if direct:
        text = ", ".join(_module_link(m, page_uri, files) for m in direct)
        out.append(f"    It imports the guide's {text}")
        if indirect:
            more = ", ".join(_module_link(m, page_uri, files) for m in indirect)
            out[-1] += f", which import {more}"
        out[-1] += (
            ": copy those with it, into a folder named `snippets/`, or install the guide's "
            "package (see the home page)."
        )
    else:
        out.append("    It imports none of the guide's other modules: the file works alone.")
    return out


def on_page_markdown(markdown, page, config, files):
    root = Path(config["config_file_path"]).parent

    def replace(m):
        lines = box(m["path"], root, config.get("repo_url"), page.file.src_uri, files)
        return "\n".join(m["indent"] + line if line else line for line in lines)

    return MARKER.sub(replace, markdown)
