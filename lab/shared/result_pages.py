"""A measured result as a page shows it: Markdown tables and one collapsed note.

The pages hold `<!-- result: lab.module:function -->` lines that the build
(hooks/results.py) replaces by what `function()` returns; each function sits next to
the command that writes its result file and builds on these helpers:

- markdown_table(header, rows): a Markdown table, numbers right-aligned;
- from_text(text): the aligned plain-text tables the commands print, as Markdown tables
  (each command formats its tables once, for its own output and for the page);
- measured_note(data, ...): the `??? note "How this was measured"` admonition from a
  result file's header: command, machine, settings, seeds, CPU or wall time;
- load(name): a committed result file's content.

Standard library only (the build imports it).
"""

from __future__ import annotations

import json
import re

from lab.shared.paths import RESULTS_DIR

_NUMBER = re.compile(r"^-?$|^[-+x~±]?[\d,.]+(e[-+]?\d+)?\s*%?$|^n/a$|^\?$")
NOTE_TITLE = "How this was measured"


def load(name: str) -> dict:
    """The content of docs/assets/results/<name> (name may have a folder: training/x.json)."""
    return json.loads((RESULTS_DIR / name).read_text(encoding="utf-8"))


def _cell(text) -> str:
    return str(text).replace("|", "\\|")


def markdown_table(header: list[str], rows: list[list], title: str | None = None) -> str:
    """A Markdown table; a column whose cells are all numbers (or n/a) is right-aligned.

    title: a line in bold above the table.
    """
    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"every row needs {len(header)} cells: {rows}")
    cells = [[_cell(c) for c in row] for row in rows]
    right = [all(_NUMBER.match(row[i].strip()) for row in cells) for i in range(len(header))]
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "| " + " | ".join("---:" if r else ":---" for r in right) + " |",
        *("| " + " | ".join(row) + " |" for row in cells),
    ]
    return (f"**{title}**\n\n" if title else "") + "\n".join(lines)


def from_text(text: str) -> str:
    """Aligned plain-text tables (columns two or more spaces apart, as the commands
    print them) as Markdown tables: a line before a table (with fewer columns) is its
    title; blank lines separate tables.

    Raises ValueError when a row does not have the header's number of cells.
    """
    out = []
    for chunk in re.split(r"\n\s*\n", text.strip("\n")):
        lines = [line for line in chunk.split("\n") if line.strip()]
        split = [re.split(r"\s{2,}", line.strip()) for line in lines]
        title = None
        if len(split) > 1 and len(split[0]) < len(split[1]):
            title, split = lines[0].strip(), split[1:]
        out.append(markdown_table(split[0], split[1:], title))
    return "\n\n".join(out)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def shown_command(command: str) -> str:
    """A result's command as a reader would type it: without `--out /tmp/...` (the scratch
    folder a run wrote to before its files were copied here) and `--note ...` (shown apart)."""
    command = re.sub(r"\s--note\s.*$", "", command)
    return re.sub(r"\s--out\s+/tmp/\S+", "", command)


def machine_line(data: dict) -> str:
    """The processor, cores, memory, torch and its threads, and the date of a result file."""
    m = data["machine"]
    memory = f", {m['memory_gib']} GiB" if m.get("memory_gib") else ""
    return (
        f"{m['cpu_model']}, {m['cpu_count']} cores{memory}; torch {m['torch']} with"
        f" {m['torch_threads']} thread{'s' if m['torch_threads'] != 1 else ''}, Python"
        f" {m['python']}; {m['date'][:10]}"
    )


def load_line(data: dict) -> str | None:
    """The load average (1 min, per core) before and after the run, when recorded."""
    m = data["machine"]
    if "load_per_core" not in m:
        return None
    text = f"load average per core before the run: {m['load_per_core']}"
    if "load_1min_after" in m:
        text += f", after: {m['load_1min_after'] / (m['cpu_count'] or 1):.2g}"
    return text


def measured_note(
    data: dict | list[dict],
    settings: list[str] = (),
    seeds=None,
    seconds: float | None = None,
    clock: str = "wall-clock",
    notes: bool = True,
) -> str:
    """The collapsed note of a result: how it was measured.

    Args:
        data: a result file's content (or several, for a result made of several runs):
            its `command`, `machine` and `note` are shown.
        settings: lines about the run's settings (sizes, steps, repetitions).
        seeds: the seeds, when the result has any.
        seconds: the run's time; clock says which ("CPU" or "wall-clock").
        notes: show each run's `note` (the sentence its command was given).
    """
    runs = data if isinstance(data, list) else [data]
    items = []
    for run in runs:
        env = "".join(f"'{k}={v}' " for k, v in run.get("environment", {}).items())
        command = (
            f"env {env}{shown_command(run['command'])}" if env else shown_command(run["command"])
        )
        items.append(f"- Command: `{command}`")
    for line in sorted({machine_line(run) for run in runs}):
        items.append(f"- Machine: {line}")
    for run in runs:
        load = load_line(run)
        if load:
            items.append(f"- {load[0].upper()}{load[1:]}")
        if notes and run.get("note"):
            items.append(f"- Note kept with the run: {run['note']}")
    items += [f"- {line}" for line in settings]
    if seeds is not None:
        seeds = list(seeds) if not isinstance(seeds, int) else [seeds]
        items.append(f"- Seed{'s' if len(seeds) != 1 else ''}: {', '.join(map(str, seeds))}")
    if seconds is not None:
        items.append(f"- Time: {_duration(seconds)} ({clock} time)")
    body = "\n".join("    " + item for item in items)
    return f'??? note "{NOTE_TITLE}"\n\n{body}\n'


def value_table(values: dict) -> dict[str, str]:
    """The values of a page's prose as text (the value directives' dict), checked flat."""
    for key, text in values.items():
        if not isinstance(text, str) or not re.fullmatch(r"[\w.-]+", key):
            raise ValueError(f"value {key!r}: keys are words, values text ({text!r})")
    return values


def preformatted(text: str) -> str:
    """A command's printed table as it prints it, in a text block (for tables whose
    layout, with sub-columns or notes under them, a Markdown table would not keep)."""
    return f"```text\n{text.rstrip()}\n```"
