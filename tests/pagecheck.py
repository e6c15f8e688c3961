"""Run every code block of every page in ``docs/``, as the reader sees it.

This is a pytest plugin (enabled by the repository's ``conftest.py``). For each Markdown page
it finds the fenced code blocks, expands ``--8<--`` includes with the very pymdownx snippet
preprocessor and settings that ``mkdocs.yml`` gives the site, and then:

* runs the page's ``python`` blocks in order in one namespace, like a notebook;
* runs ``bash`` blocks with bash from the repository root;
* refuses a fence it would not run but a reader would take for runnable code (``py``,
  ``pycon``, ``console``, ...): it must be written as ``python`` or ``bash``;
* compares what a block printed with the block titled ``Output`` that follows it, if any;
* skips a block only when the comment just above it says ``<!-- check: skip REASON -->``.

pytest-codeblocks, the usual tool, reads raw Markdown: it would run an include line as Python
and it gives every block a fresh namespace. Why we replaced it is in ``docs/contributing.md``.

The Markdown conventions are documented for contributors on that page too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import linecache
import os
import re
import subprocess
import sys
import traceback
import types
from pathlib import Path

import pytest

from lab.paths import LAST_RUN  # hooks/last_run.py reads the record from there too

# The only two spellings that run. Others a reader would take for runnable code are refused
# rather than passed over: ``pycon``/``console`` fences hold prompts (``>>> ``, ``$ ``) and
# output, and running them as code would be wrong; the rest are synonyms nobody needs.
RUN = {"python": "python", "bash": "shell"}
REFUSED = {"py", "python3", "py3", "pycon", "ipython", "pytb", "sh", "shell", "zsh", "console"}

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")
_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*check:\s*(?P<verb>[\w-]+)\s*(?P<arg>.*?)\s*-->\s*$")
_TAB_HEADER = re.compile(r'^\s*===!?\+?\s+".*"\s*$')
_TITLE = re.compile(r'title="(?P<title>[^"]*)"')
_VERBS = {"skip"}
_INCLUDE = re.compile(r"^[ \t]*-+8<-+")  # where pymdownx.snippets sees an include line
_SECTION = re.compile(r"(?<![;-])-+8<-+[ \t]+\[[ \t]*(start|end)[ \t]*:")  # it deletes such lines


class PageError(Exception):
    """A page breaks the harness's conventions (reported as a collection error)."""


@dataclasses.dataclass
class Block:
    """One fenced block of a page, after includes are expanded."""

    page: str  # path relative to the repository root, e.g. "docs/attention.md"
    line: int  # 1-based line of the opening fence
    end: int  # 1-based line of the closing fence
    indent: str  # the fence's indentation (inside an admonition or a content tab)
    lang: str  # the first word of the info string, lower-cased
    title: str | None
    code: str  # the code as rendered: includes expanded, fence indentation removed
    line_map: list[int]  # page line of each line of `code`
    skip: str | None = None  # reason from <!-- check: skip REASON -->
    expected_output: Block | None = None

    @property
    def kind(self) -> str | None:
        return RUN.get(self.lang)

    @property
    def is_output(self) -> bool:
        return self.lang == "text" and self.title == "Output"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _language(info: str) -> tuple[str, str | None]:
    title = _TITLE.search(info)
    lang = info.split()[0].lower() if info.strip() else ""
    return lang, title.group("title") if title else None


def markdown_snippet_expander(config_file: Path):
    """Return ``expand(lines) -> lines`` using the site's own pymdownx snippet settings."""
    import markdown
    from mkdocs.config import load_config

    with contextlib.redirect_stderr(io.StringIO()):
        config = load_config(str(config_file))
    md = markdown.Markdown(
        extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"]
    )
    preprocessor = md.preprocessors["snippet"]
    return preprocessor.run


def parse_page(path: Path, root: Path, expand) -> list[Block]:
    """Find the fenced blocks of a page, expand their includes and attach directives."""
    rel = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: dict[str, str] = {}  # directives waiting for the next fence
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive:
            verb, arg = directive["verb"], directive["arg"]
            if verb not in _VERBS:
                raise PageError(f"{rel}:{i + 1}: unknown directive 'check: {verb}'")
            if verb == "skip" and not arg:
                raise PageError(f"{rel}:{i + 1}: 'check: skip' needs a reason")
            pending[verb] = arg
            i += 1
            continue
        opening = _OPEN.match(line)
        if not opening:
            if line.strip() and pending:
                raise PageError(
                    f"{rel}:{i + 1}: a 'check:' directive must sit directly above a fence"
                )
            if _INCLUDE.match(line):
                raise PageError(f"{rel}:{i + 1}: includes outside a code fence are not supported")
            if _SECTION.search(line):
                raise PageError(
                    f"{rel}:{i + 1}: the build deletes a line holding a section marker; "
                    "escape it as ;--8<--"
                )
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        lang, title = _language(opening["info"])
        if lang in REFUSED or lang.startswith("{"):
            raise PageError(
                f"{rel}:{i + 1}: a '{opening['info']}' fence would be shown but not run: "
                "write ```python or ```bash (no prompts; printed text goes in an Output block)"
            )
        start = i
        body: list[str] = []
        line_map: list[int] = []
        i += 1
        while True:
            if i >= len(lines):
                raise PageError(f"{rel}:{start + 1}: fence opened here is never closed")
            closing = _CLOSE.match(lines[i])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence):
                break
            raw = lines[i]
            if raw.strip() == "--8<--":
                raise PageError(f'{rel}:{i + 1}: use the one-line form --8<-- "file:section"')
            try:
                expanded = expand([raw]) if "8<-" in raw else [raw]
            except Exception as err:  # pymdownx's SnippetMissingError and friends
                raise PageError(f"{rel}:{i + 1}: include failed: {err}") from err
            for text in expanded:
                body.append(text[len(indent) :] if text.startswith(indent) else text.lstrip())
                line_map.append(i + 1)
            i += 1
        blocks.append(
            Block(
                page=rel,
                line=start + 1,
                end=i + 1,
                indent=indent,
                lang=lang,
                title=title,
                code="\n".join(body) + "\n",
                line_map=line_map,
                skip=pending.get("skip"),
            )
        )
        pending = {}
        i += 1
        # An "Output" block belongs to the runnable block before it, if only blank lines and
        # content-tab headers stand between them.
        current = blocks[-1]
        if current.is_output:
            previous = blocks[-2] if len(blocks) > 1 else None
            between = lines[previous.end : current.line - 1] if previous else []
            if (
                previous is None
                or previous.kind is None
                or previous.expected_output is not None
                or any(s.strip() and not _TAB_HEADER.match(s) for s in between)
            ):
                raise PageError(f"{current.where}: an Output block must follow a code block")
            previous.expected_output = current
    return blocks


def _normalise(text: str) -> str:
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
        code = compile(block.code, filename, "exec")
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
    keep = [f for f in frames if f.filename == filename or not f.filename.endswith("pagecheck.py")]
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


# ----------------------------------------------------------------------------- pytest glue


def pytest_addoption(parser):
    group = parser.getgroup("pagecheck", "running the code blocks of docs/ pages")
    group.addoption(
        "--update-output",
        action="store_true",
        help="rewrite each page's Output blocks with what the code printed, instead of failing",
    )
    group.addoption(
        "--docs-dir", default="docs", help="folder of Markdown pages, relative to rootdir"
    )
    group.addoption(
        "--no-record",
        action="store_true",
        help=f"do not note the pages that ran green in {LAST_RUN} (the run under other CPU "
        "settings in tests/test_portability.py uses it)",
    )


def pytest_configure(config):
    config._pagecheck_expand = None
    # Under pytest-xdist the blocks run in the workers, and their reports come back to the
    # controller: the summary, the green-page record and the Output rewrites are made there,
    # from the reports, so that they are the same with and without -n. A page's blocks must
    # all run in one worker, in order: tests/xdist_scheduling.py sends each page to one.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(PageRun(config), "pagecheck-run")


def pytest_collect_file(file_path: Path, parent):
    root = parent.config.rootpath
    docs = (root / parent.config.getoption("--docs-dir")).resolve()
    if file_path.suffix == ".md" and docs in file_path.resolve().parents:
        return MarkdownPage.from_parent(parent, path=file_path)
    return None


class MarkdownPage(pytest.File):
    def collect(self):
        root = self.config.rootpath
        if self.config._pagecheck_expand is None:
            self.config._pagecheck_expand = markdown_snippet_expander(root / "mkdocs.yml")
        try:
            blocks = parse_page(self.path, root, self.config._pagecheck_expand)
        except PageError as err:
            raise self.CollectError(str(err)) from None
        page = self.path.relative_to(root).as_posix()
        namespace = PageNamespace(page)
        runnable = [block for block in blocks if block.kind]
        for index, block in enumerate(runnable):
            item = CodeBlockItem.from_parent(
                self, name=f"line {block.line}", block=block, namespace=namespace, index=index
            )
            item.user_properties += [("page", page), ("page_blocks", len(runnable))]
            if block.skip:
                item.add_marker(pytest.mark.skip(reason=f"{block.where}: {block.skip}"))
            yield item


class CodeBlockItem(pytest.Item):
    def __init__(self, *, block: Block, namespace: PageNamespace, index: int, **kwargs):
        super().__init__(**kwargs)
        self.block = block
        self.namespace = namespace
        self.index = index  # position among the page's runnable blocks

    def runtest(self):
        block, namespace = self.block, self.namespace
        if namespace.done != self.index:
            raise BlockFailure(
                block,
                f"the block at {block.where} is block {self.index + 1} of its page, but only "
                f"{namespace.done} blocks of the page ran before it in this process. A page's "
                "blocks share one namespace and must run in order in one process: do not "
                "select single blocks, and under pytest-xdist keep tests/xdist_scheduling.py.",
            )
        namespace.done += 1
        if namespace.failed_at and block.kind == "python":
            raise BlockFailure(block, f"not run: the block at {namespace.failed_at} failed earlier")
        try:
            if block.kind == "python":
                printed = namespace.run(block)
            else:
                printed = run_shell(block, self.config.rootpath)
        except BlockFailure:
            if block.kind == "python":
                namespace.failed_at = block.where
            raise
        output = block.expected_output
        if output is None:
            return
        self.user_properties.append(("output_checked", True))
        expected, actual = _normalise(output.code), _normalise(printed)
        if expected != actual and self.config.getoption("--update-output"):
            update = {"page": output.page, "line": output.line, "end": output.end}
            self.user_properties.append(
                ("output_update", {**update, "indent": output.indent, "text": actual})
            )
        elif expected != actual:
            raise BlockFailure(
                block,
                f"the block at {block.where} printed something other than its Output "
                f"block at {output.where}\n--- page shows ---\n{expected}\n"
                f"--- code printed ---\n{actual}",
            )

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, BlockFailure):
            numbered = "\n".join(
                f"{self.block.line_map[n]:>5} | {text}"
                for n, text in enumerate(self.block.code.splitlines())
            )
            return f"{excinfo.value.message}\n--- block source ---\n{numbered}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, self.block.line - 1, f"{self.block.page}:{self.block.line}"


def pytest_runtest_makereport(item, call):
    # A block skipped by its page still takes its turn in the page's order.
    if isinstance(item, CodeBlockItem) and call.when == "setup" and item.block.skip:
        item.namespace.done += 1


class PageRun:
    """Per-page counts, the green-page record and Output rewrites, made from test reports."""

    def __init__(self, config):
        self.config = config
        self.pages: dict[str, dict] = {}
        self.updates: list[dict] = []

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        if "page" not in props:
            return
        stats = self.pages.setdefault(
            props["page"],
            {"blocks": props["page_blocks"], "ran": 0, "passed": 0, "failed": 0, "outputs": 0},
        )
        stats.setdefault("skipped", [])  # "docs/page.md:LINE: reason", one per skipped block
        if report.skipped and report.when == "setup":
            stats["skipped"].append(report.longrepr[2].removeprefix("Skipped: "))
        elif report.failed and report.when == "setup":
            stats["failed"] += 1
        elif report.when == "call":
            stats["ran"] += 1
            stats["passed" if report.passed else "failed"] += 1
            stats["outputs"] += "output_checked" in props
            if "output_update" in props:
                self.updates.append(props["output_update"])

    def pytest_sessionfinish(self, session):
        if not self.config.getoption("--no-record"):
            self._record_green_pages()
        self._update_outputs()

    def _record_green_pages(self) -> None:
        """Note each page whose every block ran (or was skipped by its page) and passed.

        hooks/last_run.py puts the note in the page's footer when the site is built.
        """
        import json
        import platform
        from datetime import UTC, datetime
        from importlib.metadata import version  # the torch version without importing torch

        path = self.config.rootpath / LAST_RUN
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            record = {}
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        for page, stats in self.pages.items():
            if not stats["failed"] and stats["passed"] + len(stats["skipped"]) == stats["blocks"]:
                record[page] = {
                    "when": now,
                    "blocks": stats["ran"],
                    "torch": version("torch"),
                    "python": platform.python_version(),
                }
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write, then rename: a run started from a page (contributing.md) never reads half a file.
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        os.replace(partial, path)

    def _update_outputs(self) -> None:
        """With --update-output, write what the code printed into the pages' Output blocks."""
        root = self.config.rootpath
        for output in sorted(self.updates, key=lambda u: (u["page"], -u["line"])):
            # bottom-up, so that earlier line numbers stay valid
            path = root / output["page"]
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            new = [
                f"{output['indent']}{row}".rstrip() + "\n" for row in output["text"].splitlines()
            ]
            lines[output["line"] : output["end"] - 1] = new
            path.write_text("".join(lines), encoding="utf-8")
            print(f"updated the Output block at {output['page']}:{output['line']}")

    def pytest_terminal_summary(self, terminalreporter):
        if not self.pages:
            return
        terminalreporter.section("code blocks per page")
        for page, stats in sorted(self.pages.items()):
            terminalreporter.write_line(
                f"{page}: {stats['ran']} ran ({stats['outputs']} with checked output), "
                f"{len(stats['skipped'])} skipped"
            )
            for reason in stats["skipped"]:
                terminalreporter.write_line(f"    skipped {reason}")
