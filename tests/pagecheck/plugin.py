"""The pytest side of the page harness: collecting pages, running their blocks in order,
comparing output, and the per-page summary, green-page record and Output rewrites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hooks.page_parser import Block, PageError, Site, load_site, parse_page
from lab.shared.paths import LAST_RUN  # hooks/last_run.py reads the record from there too
from tests.pagecheck.runner import (
    BlockFailure,
    PageNamespace,
    first_difference,
    normalise,
    plural,
    run_shell,
)

SITE = pytest.StashKey[Site]()  # mkdocs.yml read once per process, at the first page


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
        "settings in tests/pages/test_portability.py uses it)",
    )


def pytest_configure(config):
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
        if SITE not in self.config.stash:
            self.config.stash[SITE] = load_site(root / "mkdocs.yml")
        site = self.config.stash[SITE]
        try:
            blocks = parse_page(self.path, root, site.expand)
        except PageError as err:
            raise self.CollectError(str(err)) from None
        page = self.path.relative_to(root).as_posix()
        resolved = self.path.resolve()
        in_site = site.nav is not None and site.docs_dir in resolved.parents
        in_docs = resolved.relative_to(site.docs_dir).as_posix() if in_site else None
        if in_site and in_docs not in site.nav:
            # mkdocs build --strict aborts on such a page; say so where the page is tested.
            item = NavItem.from_parent(self, name="nav", page=page, in_docs=in_docs)
            item.user_properties += [("page", page), ("nav_missing", True)]
            yield item
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


class NavItem(pytest.Item):
    """Fails when the page is missing from mkdocs.yml's nav."""

    def __init__(self, *, page: str, in_docs: str, **kwargs):
        super().__init__(**kwargs)
        self.page, self.in_docs = page, in_docs

    def runtest(self):
        raise PageError(
            f"{self.page} is not in the nav of mkdocs.yml, so `mkdocs build --strict` aborts "
            f"and no reader can reach it: add `- Title: {self.in_docs}` under `nav:`"
        )

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, PageError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"{self.page}: nav"


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
                f"{plural(namespace.done, 'block')} of the page ran before it in this process. "
                "A page's "
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
        expected, actual = normalise(output.code), normalise(printed)
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
                f"--- code printed ---\n{actual}\n{first_difference(expected, actual)}\n"
                f"If the change is on purpose: .venv/bin/python -m pytest {block.page} "
                "--update-output -n 0 -q writes what the code printed into the page (then "
                "read the diff).",
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
            props["page"], {"blocks": 0, "ran": 0, "passed": 0, "failed": 0, "outputs": 0}
        )
        stats.setdefault("skipped", [])  # "docs/page.md:LINE: reason", one per skipped block
        if "nav_missing" in props:  # not a block: it only keeps the page from being green
            stats["failed"] += report.failed
            return
        stats["blocks"] = props["page_blocks"]
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
