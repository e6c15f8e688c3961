"""MkDocs hook: tell each page's reader when its code blocks last ran green, and on what.

The test suite (tests/pagecheck/) records every page whose blocks all passed in
.cache/pagecheck/last-run.json; the deploy workflow runs the pages' blocks right before it
builds the site, so the published note is that run's.
"""

import json
from pathlib import Path

from lab.shared.paths import LAST_RUN  # where the page harness writes the record


def on_page_markdown(markdown, page, config, files):
    record_file = Path(config["config_file_path"]).parent / LAST_RUN
    try:
        record = json.loads(record_file.read_text())
    except (OSError, ValueError):
        record = {}
    entry = record.get(f"docs/{page.file.src_uri}")
    if entry:
        n = entry["blocks"]
        blocks = "The code block" if n == 1 else f"The {n} code blocks"
        page.meta["code_last_ran"] = (
            f"{blocks} on this page last ran green on {entry['when']}, "
            f"with torch {entry['torch']} and Python {entry['python']}."
        )
    return markdown
