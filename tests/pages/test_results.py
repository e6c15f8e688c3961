"""Measured results on the built site are the committed result files' numbers: a table the
build renders (hooks/results.py) is read back from the page's HTML and compared, cell by cell,
with the file, read here on its own (not through the function that formatted the table)."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from hooks.page_parser import parse_page
from lab.shared.common import RESULTS_DIR, ROOT, TRAINING_RESULTS


class _Tables(HTMLParser):
    """Each <table> of a page, with the bold line above it: {title: [[cell, ...], ...]}."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._title, self._in, self._rows, self._cell = "", None, [], None

    def handle_starttag(self, tag, attrs):
        if tag == "strong":
            self._in = "strong"
            self._title = ""
        elif tag == "tr":
            self._rows.append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "strong":
            self._in = None
        elif tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append(self._cell.strip())
            self._cell = None
        elif tag == "table":
            self.tables[self._title] = self._rows
            self._rows = []

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        elif self._in == "strong":
            self._title += data


def tables(html: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def _close(cell: str, value: float) -> bool:
    """cell is value as the page rounds it: three significant digits, or whole numbers."""
    shown = float(cell.replace(",", ""))
    return abs(shown - value) <= max(0.0051 * abs(value), 0.5 if value >= 1000 else 0)


def time_table_mismatches(html: str, data: dict) -> list[str]:
    """Where the attention-cost page's time tables differ from data's median times."""
    labels = {"per-head": "per-head", "manual": "manual", "einsum": "einsum",
              "nn.MHA": "torch-mha", "Flex": "flex", "SDPA": "sdpa"}  # fmt: skip
    H = data["settings"]["plot_heads"]
    found = tables(html)
    problems = []
    for title, mode in (("forward, ms", "forward"), ("forward+backward, ms", "forward_backward")):
        rows = found.get(title)
        if not rows:
            problems.append(f"no table titled {title!r} on the page")
            continue
        header, body = rows[0], rows[1:]
        if len(body) != len(data["settings"]["seq_lens"]):
            problems.append(
                f"{title}: {len(body)} rows, the file has {data['settings']['seq_lens']}"
            )
        for row in body:
            T = int(row[0])
            for label, cell in zip(header[1:], row[1:], strict=False):
                if label not in labels:
                    continue
                (result,) = [
                    r for r in data["results"]
                    if (r["variant"], r["n_head"], r["seq_len"]) == (labels[label], H, T)
                ]  # fmt: skip
                measured = result[mode]
                if measured is None:
                    ok = cell == "n/a"
                else:
                    ok = cell != "n/a" and _close(cell, measured["median_ms"])
                if not ok:
                    problems.append(f"{title}, T={T}, {label}: page {cell}, file {measured}")
    return problems


def _page(site, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_the_cost_page_shows_the_result_files_times(built_site):
    data = json.loads((RESULTS_DIR / "attention-cost.json").read_text())
    assert time_table_mismatches(_page(built_site, "attention-cost"), data) == []


def test_a_changed_number_in_a_copy_of_the_result_file_is_caught(built_site):
    """The comparison can fail: one median in a copy of the file, 10% higher."""
    data = copy.deepcopy(json.loads((RESULTS_DIR / "attention-cost.json").read_text()))
    row = next(r for r in data["results"] if r["variant"] == "sdpa" and r["seq_len"] == 1024)
    row["forward"]["median_ms"] *= 1.1
    problems = time_table_mismatches(_page(built_site, "attention-cost"), data)
    assert len(problems) == 1 and "T=1024, SDPA" in problems[0], problems


def test_prose_values_come_from_the_result_file(built_site):
    """An inline value (the KV cache's speed-up) is the file's number."""
    bench = json.loads((TRAINING_RESULTS / "kv-cache.json").read_text())
    text = " ".join(re.sub(r"<[^>]+>", "", _page(built_site, "generation-in-depth")).split())
    assert f"makes a token {bench['speedup']:.1f} times as fast on average" in text
    assert "<!-- value:" not in _page(built_site, "generation-in-depth")


# A lesson shows a measured result as the table the build renders from its file (hooks/
# results.py), never as code that loads the file and prints it with the machine's lines.
RESULT_READING = re.compile(
    r"\b(RESULT_FILE|RESULTS_DIR|TRAINING_RESULTS|describe_machine|result_pages)\b"
    r"|assets/results/[\w/.-]+\.json"
)


def result_reading_blocks(pages: list[Path], root: Path) -> list[str]:
    """The Python blocks of `pages` that read a committed result file (a shell block may
    name one: the command that writes it)."""
    found = []
    for page in pages:
        for block in parse_page(page, root, lambda lines: lines):
            match = block.kind == "python" and RESULT_READING.search(block.code)
            if match:
                found.append(f"{block.where}: {match[0]!r} (render it: <!-- result: ... -->)")
    return found


def test_no_lesson_reads_a_result_file_in_its_code():
    assert result_reading_blocks(sorted((ROOT / "docs").rglob("*.md")), ROOT) == []


def test_a_block_reading_a_result_file_is_found(tmp_path):
    """The guard on a page as a contributor writes it: the kv-heads page's old block."""
    page = tmp_path / "docs" / "lesson.md"
    page.parent.mkdir()
    page.write_text(
        "# A lesson\n\n```python\nimport json\n\nfrom lab.kv_heads_recall import RESULT_FILE\n\n"
        "data = json.loads(RESULT_FILE.read_text())\nprint(data['variants'])\n```\n\n"
        "```python\nimport json\n\nprint(json.dumps({'a': 1}))\n```\n\n"
        "```bash\npython -m lab.kv_heads_recall    # writes docs/assets/results/x.json\n```\n",
        encoding="utf-8",
    )
    assert result_reading_blocks([page], tmp_path) == [
        "docs/lesson.md:3: 'RESULT_FILE' (render it: <!-- result: ... -->)"
    ]
