"""Running a page's blocks: python blocks in one namespace per page, bash blocks from the
repository root, failures reported at page:line."""

from __future__ import annotations

import contextlib
import io
import linecache
import os
import re
import subprocess
import sys
import traceback
import types
from pathlib import Path

from hooks.page_parser import Block

HARNESS = Path(__file__).parent  # frames from these files are the harness's, not the page's


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def first_difference(expected: str, actual: str) -> str:
    """Where two outputs part: the first differing line of each, a caret under the first
    differing character."""
    shown, printed = expected.splitlines(), actual.splitlines()
    n = next(
        (i for i, (a, b) in enumerate(zip(shown, printed, strict=False)) if a != b),
        min(len(shown), len(printed)),
    )
    page_line = shown[n] if n < len(shown) else "(nothing: the page's output ends here)"
    code_line = printed[n] if n < len(printed) else "(nothing: the code's output ends here)"
    column = next(
        (i for i, (a, b) in enumerate(zip(page_line, code_line, strict=False)) if a != b),
        min(len(page_line), len(code_line)),
    )
    return (
        f"--- first difference: line {n + 1} ---\n"
        f"page shows:   {page_line}\ncode printed: {code_line}\n"
        f"              {' ' * column}^"
    )


def normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


class BlockFailure(Exception):
    def __init__(self, block: Block, message: str):
        super().__init__(message)
        self.block = block
        self.message = message


class PageNamespace:
    """The shared globals of one page's python blocks, as a real module (dataclasses need one)."""

    def __init__(self, page: str):
        name = "docs_page_" + re.sub(r"\W", "_", page)
        self.module = types.ModuleType(name)
        self.failed_at: str | None = None
        self.done = 0  # how many of the page's blocks this process has run or skipped, in order

    def run(self, block: Block) -> str:
        module = self.module
        filename = f"<{block.where}>"
        linecache.cache[filename] = (len(block.code), None, block.code.splitlines(True), filename)
        # dont_inherit: run the block as a reader's file runs, not under this module's
        # `from __future__ import annotations`, which would defer a missing annotation name.
        code = compile(block.code, filename, "exec", dont_inherit=True)
        out = io.StringIO()
        sys.modules[module.__name__] = module
        try:
            with contextlib.redirect_stdout(out):
                exec(code, module.__dict__)
        except BaseException as err:
            raise BlockFailure(block, _format_exception(block, err, out.getvalue())) from None
        finally:
            sys.modules.pop(module.__name__, None)
        return out.getvalue()


def _format_exception(block: Block, err: BaseException, printed: str) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    # Drop the harness's own frames; keep the block's and everything it called.
    filename = f"<{block.where}>"
    keep = [f for f in frames if f.filename == filename or Path(f.filename).parent != HARNESS]
    lines = []
    for frame in keep:
        if frame.filename == filename:
            page_line = block.line_map[frame.lineno - 1] if frame.lineno else block.line
            lines.append(f"  {block.page}:{page_line}\n    {frame.line}")
        else:
            lines.append(f"  {frame.filename}:{frame.lineno} in {frame.name}\n    {frame.line}")
    message = "".join(traceback.format_exception_only(type(err), err)).strip()
    text = f"{type(err).__name__} in the block at {block.where}:\n" + "\n".join(lines)
    text += f"\n{message}"
    if printed:
        text += f"\n--- the block printed ---\n{printed}"
    return text


def run_shell(block: Block, root: Path) -> str:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + ":" + env.get("PATH", "")
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise BlockFailure(
            block,
            f"shell block at {block.where} exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}--- stderr ---\n{proc.stderr}",
        )
    return proc.stdout
