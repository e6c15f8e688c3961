"""Trial (issue 12): the page harness rebuilt on Sybil 10, to compare with tests/pagecheck.py.

Run it instead of pagecheck on the two trial pages:

    .venv/bin/python -m pytest -p no:tests.pagecheck -p tests.sybil_trial \
        docs/attention.md docs/optimization.md -q -p no:cacheprovider

Sybil gives the document model, the per-document namespace and the pytest items. What the
guide needs on top of it is written here: a lexer for ``python title="..."`` fences (Sybil's
Markdown lexer wants the info string to be exactly the language), include expansion,
Output blocks, the ``check: skip REASON`` directive (Sybil's reason is a Python expression, and
``skip: next`` without one passes the block without running it), and shell blocks. Not written
here, because Sybil has nothing to hang them on either: page lines inside expanded includes,
``--update-output``, the per-page summary, the green-page record and the xdist grouping.
"""

import contextlib
import io
import re
import subprocess
from pathlib import Path
from unittest import SkipTest

from sybil import Sybil
from sybil.example import NotEvaluated
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, RawFencedCodeBlockLexer

from tests.pagecheck import markdown_snippet_expander

ROOT = Path(__file__).resolve().parents[1]
_expand = markdown_snippet_expander(ROOT / "mkdocs.yml")

FENCE = RawFencedCodeBlockLexer(
    info_pattern=re.compile(r"[ \t]*(?P<language>\w*)(?P<rest>[^\n]*)$\n", re.MULTILINE)
)
SKIP = DirectiveInHTMLCommentLexer(directive=r"check: skip", arguments=".*?")


def run_python(example):
    out = io.StringIO()
    code = compile(example.parsed, f"{example.path}:{example.line}", "exec")
    with contextlib.redirect_stdout(out):
        exec(code, example.namespace)
    example.namespace["__printed__"] = out.getvalue()


def run_bash(example):
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", example.parsed],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        return f"exited {proc.returncode}\n{proc.stdout}{proc.stderr}"
    example.namespace["__printed__"] = proc.stdout


def compare_output(example):
    printed = example.namespace.pop("__printed__", None)
    if printed is None:
        return None  # its block printed nothing checked (a skipped block's Output)
    norm = lambda s: "\n".join(x.rstrip() for x in s.strip("\n").splitlines())  # noqa: E731
    if norm(printed) != norm(example.parsed):
        return f"--- page shows ---\n{norm(example.parsed)}\n--- code printed ---\n{norm(printed)}"
    return None


class SkipNext:
    """Skip the next code block and its Output, with the page's reason."""

    def __init__(self, document, reason):
        self.document, self.reason, self.seen_code = document, reason, False

    def __call__(self, example):
        if example.region.evaluator is compare_output and self.seen_code:
            self.document.pop_evaluator(self)
            raise SkipTest(self.reason)
        if example.region.evaluator in (run_python, run_bash):
            if self.seen_code:  # no Output after the skipped block
                self.document.pop_evaluator(self)
                raise NotEvaluated()
            self.seen_code = True
            raise SkipTest(self.reason)
        raise NotEvaluated()


def parse_page(document):
    for region in SKIP(document):
        reason = region.lexemes["arguments"].strip()
        if not reason:
            raise ValueError(f"{document.path}: 'check: skip' needs a reason")
        region.parsed = reason
        region.evaluator = lambda ex: ex.document.push_evaluator(SkipNext(ex.document, ex.parsed))
        yield region
    for region in FENCE(document):
        language, rest = region.lexemes["language"], region.lexemes["rest"]
        source = str(region.lexemes["source"])
        if language == "python":
            region.parsed = "\n".join(_expand(source.splitlines())) + "\n"
            region.evaluator = run_python
        elif language == "bash":
            region.parsed = source
            region.evaluator = run_bash
        elif language == "text" and 'title="Output"' in rest:
            region.parsed = source
            region.evaluator = compare_output
        else:
            continue
        yield region


pytest_collect_file = Sybil(parsers=[parse_page], patterns=["docs/*.md"], path=str(ROOT)).pytest()
