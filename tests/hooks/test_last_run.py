"""The 'last ran green' note: recorded by the page harness, shown by hooks/last_run.py."""

import json
from types import SimpleNamespace

from hooks import last_run
from lab.shared.paths import LAST_RUN
from tests.pages.test_pagecheck import GOOD, run_pages


def test_harness_records_only_pages_whose_blocks_all_passed(tmp_path):
    broken = "```python\nraise RuntimeError\n```\n"
    run_pages(tmp_path, {"good.md": GOOD, "broken.md": broken})
    record = json.loads((tmp_path / LAST_RUN).read_text())
    assert set(record) == {"docs/good.md"}
    assert record["docs/good.md"]["blocks"] == 2
    assert record["docs/good.md"]["torch"].startswith("2.")


def test_hook_puts_the_record_in_the_page_meta(tmp_path):
    (tmp_path / LAST_RUN).parent.mkdir(parents=True)
    (tmp_path / LAST_RUN).write_text(
        json.dumps({"docs/a.md": {"blocks": 3, "when": "W", "torch": "T", "python": "P"}})
    )
    config = {"config_file_path": str(tmp_path / "mkdocs.yml")}
    page = SimpleNamespace(file=SimpleNamespace(src_uri="a.md"), meta={})
    last_run.on_page_markdown("text", page=page, config=config, files=None)
    assert page.meta["code_last_ran"] == (
        "The 3 code blocks on this page last ran green on W, with torch T and Python P."
    )
    (tmp_path / LAST_RUN).write_text(
        json.dumps({"docs/a.md": {"blocks": 1, "when": "W", "torch": "T", "python": "P"}})
    )
    last_run.on_page_markdown("text", page=page, config=config, files=None)
    assert page.meta["code_last_ran"].startswith("The code block on this page last ran green")
    other = SimpleNamespace(file=SimpleNamespace(src_uri="b.md"), meta={})
    last_run.on_page_markdown("text", page=other, config=config, files=None)
    assert "code_last_ran" not in other.meta
