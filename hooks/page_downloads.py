"""MkDocs hook: every page with code, runnable as the reader takes it away.

- A "Run this page" box under the page's title links two downloads made by the build: a
  Jupyter notebook (downloads/<page>.ipynb, each Output block of the page stored as its cell's
  output) and a plain script (downloads/<page>.py, the same cells between `# %%` lines). Both
  hold the page's python blocks in order, collapsed ones included, as the page harness
  (tests/pagecheck/) reads them: includes expanded, in one namespace. The imports come
  first, unless a block defines a name an import would bind (then it stays where it is).
- A block in a collapsed admonition (`??? note "The input checks"`, or an exercise's
  `??? success "A solution"` under its stub) stays collapsed: a hidden cell in the notebook
  (JupyterLab and Notebook 7 open it on a click), and in both downloads its first line says
  what it is (a solution's asks the reader to try first). It still runs, as on the page, so
  the cell after a stub prints the solution's verdict.
- A block that uses names defined by the blocks above it says so right above its code
  ("Uses `torch`, `Head` from the blocks above"), where a reader copies it.
- What needs more than the installed package is left out of the downloads, as a comment
  saying why: a block skipped by its page (`check: skip`), a shell block, a block that
  imports the repository's tooling (lab/, tests/, hooks/), and any block using a name one
  of those defines. Such a block says so on the page too. Its plain imports still serve the
  blocks below: hoisted with the others, or, when a block rebinds their names, run where it
  stood.

The suite runs each download from a fresh folder against the installed package
(tests/pages/test_downloads.py).
"""

from __future__ import annotations

import ast
import builtins
import json
from dataclasses import dataclass, field
from pathlib import Path

import markdown as markdown_lib
from mkdocs.utils import get_relative_url

# The parser the page harness (tests/pagecheck/) reads pages with: the download holds exactly
# the blocks the suite runs.
from hooks.page_parser import Block, parse_page

DOWNLOADS = "downloads"
CHECKOUT_ONLY = {"lab", "tests", "hooks"}  # top-level packages the reader's wheel lacks
REPOSITORY_FOLDERS = {"docs", "data", "lab", "tests", "snippets", "runs"}
BUILTINS = set(dir(builtins)) | {"__name__", "__file__"}
_state: dict = {}


@dataclass
class Cell:
    """One python block of a page, as it goes into the downloads."""

    block: Block
    code: str  # the block's code, its hoisted imports removed
    needs: list[str] = field(default_factory=list)  # names from the blocks above
    left_out: str | None = None  # why the downloads do not run it
    # A left-out block's plain imports of names another block rebinds: they cannot go to
    # the top, so they run where the block stood, as they do on the page.
    imports_in_place: list[str] = field(default_factory=list)


def _bound(tree: ast.AST) -> set[str]:
    """Every name a block binds anywhere (assignments, definitions, parameters, imports)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _top_level_bound(tree: ast.Module) -> set[str]:
    """The names a block leaves in the page's namespace."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
    return names


def _loaded(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _checkout_import(tree: ast.Module) -> str | None:
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module]
        for module in modules:
            if module.split(".")[0] in CHECKOUT_ONLY:
                return module
    return None


def _repository_path(tree: ast.Module) -> str | None:
    """A path into the checkout that the block opens (the reader's folder has none)."""
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and "/" in text and text.split("/")[0] in REPOSITORY_FOLDERS:
            return text
    return None


def _hoist_imports(code, tree, bound_by_blocks, imports, left_out) -> tuple[set[int], set[str]]:
    """Add the block's top-level imports to `imports`; the code lines hoisted, and the
    names the block lends to the blocks after it.

    An import stays in place when a block rebinds its name; a left-out block lends only
    imports that need no checkout (lab, tests, hooks stay out), those that stay in place
    by running there alone (left_out.imports_in_place, its Cell's).
    """
    lines, hoisted, lent = code.splitlines(), set(), set()
    for node in tree.body:
        if not (isinstance(node, ast.Import | ast.ImportFrom) and node.col_offset == 0):
            continue
        if getattr(node, "module", None) == "__future__":
            continue
        if left_out and _checkout_import(ast.Module(body=[node], type_ignores=[])):
            continue
        names = {(a.asname or a.name).split(".")[0] for a in node.names}
        text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if names & bound_by_blocks:
            if left_out:
                left_out.imports_in_place.append(text)
                lent |= names
            continue
        if text not in imports:
            imports.append(text)
        hoisted |= set(range(node.lineno - 1, node.end_lineno))
        lent |= names
    return hoisted, lent


def plan(blocks: list[Block]) -> tuple[list[str], list[Cell]]:
    """The hoisted import lines, and one Cell per python block of the page, in order."""
    python = [b for b in blocks if b.kind == "python"]
    trees = [ast.parse(b.code) for b in python]
    bound_by_blocks: set[str] = set()
    for tree in trees:  # names that something other than an import binds
        for node in tree.body:
            if not isinstance(node, ast.Import | ast.ImportFrom):
                bound_by_blocks |= _top_level_bound(ast.Module(body=[node], type_ignores=[]))
    imports: list[str] = []
    cells: list[Cell] = []
    defined_by: dict[str, int] = {}  # name -> index of the block that last bound it
    unavailable: dict[str, str] = {}  # name -> why the downloads lack it
    for n, (block, tree) in enumerate(zip(python, trees, strict=True)):
        cell = Cell(block=block, code=block.code)
        free = _loaded(tree) - _bound(tree) - BUILTINS
        cell.needs = sorted(name for name in free if name in defined_by)
        module = _checkout_import(tree)
        repository_path = _repository_path(tree)
        missing = sorted(name for name in free if name in unavailable)
        if block.skip:
            cell.left_out = f"skipped on the page: {block.skip}"
        elif module:
            cell.left_out = f"needs the guide's repository (it imports {module})"
        elif repository_path:
            cell.left_out = f"needs the guide's repository (it reads {repository_path})"
        elif missing:
            cell.left_out = f"{unavailable[missing[0]]} (it uses {', '.join(missing)})"
        # A block left out still lends its plain imports (torch, json, snippets...): a block
        # kept above it may need them, as it does on the page where the order is the reader's.
        left_out = cell if cell.left_out else None
        hoisted, lent = _hoist_imports(block.code, tree, bound_by_blocks, imports, left_out)
        if cell.left_out:
            why = f"needs the block at {block.where}, which is not in the download"
            for name in _top_level_bound(tree) - lent:
                unavailable[name] = why
        else:
            lines = block.code.splitlines()
            kept = [line for i, line in enumerate(lines) if i not in hoisted]
            cell.code = "\n".join(kept).strip("\n") + "\n"
            for name in _top_level_bound(tree):
                unavailable.pop(name, None)
        for name in _top_level_bound(tree):
            defined_by[name] = n
        cells.append(cell)
    return imports, cells


def _commented(text: str) -> str:
    return "\n".join(f"# {line}".rstrip() for line in text.rstrip("\n").splitlines())


SOLUTION = "A solution"  # an exercise's: its first line asks the reader to try first


def _collapsed_note(title: str) -> str:
    note = f"# {title or 'Collapsed'}, collapsed on the page (hidden in the notebook)"
    return note + (": try your own first.\n" if title == SOLUTION else ".\n")


def script_cells(page_path: str, imports: list[str], cells: list[Cell]) -> list[tuple]:
    """(source, expected output or None, page line, hidden) of each cell of the downloads:
    hidden for a block of a collapsed admonition (an exercise's solution, a side detail)."""
    out = [("\n".join(imports) + "\n", None, None, False)] if imports else []
    for cell in cells:
        block, hidden = cell.block, cell.block.collapsed is not None
        if cell.left_out:
            source = f"# Not run here: {cell.left_out}.\n{_commented(block.code)}\n"
            if cell.imports_in_place:  # the blocks below use them
                source += "# Its imports the blocks below use:\n"
                source += "\n".join(cell.imports_in_place) + "\n"
            out.append((source, None, block.where, hidden))
        else:
            expected = block.expected_output.code if block.expected_output else None
            source = cell.code
            if hidden:  # as on the page: a reader scrolling past does not meet it unasked
                source = _collapsed_note(block.collapsed) + source
            out.append((source, expected, block.where, hidden))
    return out


def as_script(title: str, url: str, cells: list[tuple]) -> str:
    parts = [
        f"# {title}: the page's code, in order ({url}).\n"
        "# Needs the guide's package: see the home page. Each `# %%` starts one block of the\n"
        "# page; its page line is given, and what it prints is on the page under it.\n"
    ]
    for source, _, where, _ in cells:
        parts.append(f"# %% {where or 'imports'}\n{source}")
    return "\n".join(parts)


def as_notebook(title: str, url: str, cells: list[tuple]) -> dict:
    def lines(text: str) -> list[str]:
        return text.splitlines(keepends=True)

    nb_cells = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": lines(f"# {title}\n\nThe code of <{url}>, block by block, in order."),
        }
    ]
    for source, expected, where, hidden in cells:
        outputs = []
        if expected is not None:
            outputs = [{"output_type": "stream", "name": "stdout", "text": lines(expected)}]
        metadata = {"page_line": where} if where else {}
        if hidden:  # JupyterLab and Notebook 7 show a collapsed input, a click opens it
            metadata["jupyter"] = {"source_hidden": True}
        nb_cells.append(
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": metadata,
                "outputs": outputs,
                "source": lines(source.rstrip("\n")),
            }
        )
    return {
        "cells": nb_cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 4,
    }


def download_name(src_uri: str) -> str:
    return Path(src_uri).with_suffix("").as_posix().replace("/", "-")


# Why blocks are left out, as the page's header says it: the start of Cell.left_out -> words.
_REASONS = (
    ("needs the guide's repository (it imports", "they import the guide's tooling (lab/, tests/)"),
    ("needs the guide's repository (it reads", "they read a file of the repository"),
    ("skipped on the page", "they are not run on the page"),
    ("needs the block at", "they use what such a block made"),
)


def left_out_reasons(cells: list[Cell]) -> str:
    """The reasons of a page's left-out blocks, only those that occur, in one phrase."""
    found = [
        words
        for start, words in _REASONS
        if any(c.left_out and c.left_out.startswith(start) for c in cells)
    ]
    if len(found) > 1:
        found = [found[0], *(w.removeprefix("they ") for w in found[1:])]
    return ", ".join(found[:-1]) + (" or " if len(found) > 1 else "") + found[-1]


def on_config(config):
    md = markdown_lib.Markdown(
        extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"]
    )
    _state.update(expand=md.preprocessors["snippet"].run, downloads={})
    return config


def _note(cell: Cell) -> str | None:
    if cell.left_out:
        return f"Not in this page's download: {cell.left_out}."
    if cell.needs:
        names = ", ".join(f"<code>{name}</code>" for name in cell.needs[:6])
        if len(cell.needs) > 6:
            names += f" and {len(cell.needs) - 6} more"
        return f"Uses {names} from the blocks above (or run the page's download)."
    return None


def on_page_markdown(markdown, page, config, files):
    if not page.file.src_uri.endswith(".md"):
        return markdown
    root = Path(config["config_file_path"]).parent
    blocks = parse_page(Path(page.file.abs_src_path), root, _state["expand"])
    imports, cells = plan(blocks)
    runnable = [c for c in cells if not c.left_out]
    if not runnable:
        return markdown
    lines = markdown.split("\n")
    # The blocks' lines are the file's; mkdocs has taken the front matter off the top.
    source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    front = source.count("\n") - markdown.count("\n")
    for cell in reversed(cells):  # bottom-up: earlier line numbers stay valid
        note = _note(cell)
        if note:
            at, indent = cell.block.line - 1 - front, cell.block.indent
            html = f'<p class="block-needs" data-search-exclude><small>{note}</small></p>'
            lines[at:at] = [indent + html, ""]
    name = download_name(page.file.src_uri)
    title = page.title or name
    url = config["site_url"] + page.url if config.get("site_url") else page.url
    cells_out = script_cells(page.file.src_uri, imports, cells)
    _state["downloads"][name] = (
        as_script(title, url, cells_out),
        as_notebook(title, url, cells_out),
    )
    ipynb = get_relative_url(f"{DOWNLOADS}/{name}.ipynb", page.url)
    py = get_relative_url(f"{DOWNLOADS}/{name}.py", page.url)
    home = get_relative_url("", page.url).rstrip("/") + "/"
    left_out = len(cells) - len(runnable)
    skipped = (
        f" {left_out} of its {len(cells)} blocks are left out, each with its reason above its "
        f"code: {left_out_reasons(cells)}."
        if left_out
        else ""
    )
    box = (
        '<p class="run-this-page" data-search-exclude><small>Run this page: '
        f"{len(runnable)} code block{'s' if len(runnable) != 1 else ''} as a "
        f'<a href="{ipynb}" download>notebook (.ipynb)</a> or a '
        f'<a href="{py}" download>script (.py)</a>, with the guide\'s package installed '
        f'(<a href="{home}#take-the-code-away">how</a>; without a GPU, install PyTorch from '
        "its CPU wheel index first)."
        f"{skipped}</small></p>"
    )
    heading = next((i for i, line in enumerate(lines) if line.startswith("# ")), -1)
    lines[heading + 1 : heading + 1] = ["", box, ""]
    return "\n".join(lines)


def on_post_build(config):
    folder = Path(config["site_dir"]) / DOWNLOADS
    folder.mkdir(parents=True, exist_ok=True)
    for name, (script, notebook) in sorted(_state["downloads"].items()):
        (folder / f"{name}.py").write_text(script, encoding="utf-8")
        (folder / f"{name}.ipynb").write_text(
            json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
