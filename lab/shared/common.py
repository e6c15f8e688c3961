"""What every tool of the project shares: the machine, result files.

Standard library only at import time (torch is imported inside machine_info), so
that the build's hooks can import it without paying for a torch import.

- paths: ROOT and the folders under it, from lab/shared/paths.py (pages import them here);
- machine_info(): where a measurement was made, one set of keys for every tool;
- result_header(): the first fields of every committed result file;
- atomic_write() and write_json(): files a reader never sees half-written.
"""

import contextlib
import datetime
import json
import os
import platform
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

# Re-exported: pages and tests import the paths from here.
from lab.shared.paths import ARTIFACTS, CACHE, DOCS, RESULTS_DIR, ROOT, TRAINING_RESULTS  # noqa: F401


def machine_info() -> dict:
    """Where a measurement was made: enough to tell two machines apart.

    The 1-minute load average is per core: near 0 on an idle machine, 1 with
    every core busy. Linux fills cpu_model and memory_gib; elsewhere they are
    "unknown" and None.
    """
    import torch  # here, not at the top: the hooks import this module

    cpu_model, memory_gib = "unknown", None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
    cores = os.cpu_count() or 1
    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "torch_threads": torch.get_num_threads(),
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        "load_per_core": round(os.getloadavg()[0] / cores, 2),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def command_line(module: str, argv: list[str] | None = None) -> str:
    """The command that ran: `python -m lab.x` and its arguments (sys.argv's by default)."""
    argv = sys.argv[1:] if argv is None else argv
    return " ".join([f"python -m {module}", *argv])


def result_header(schema: str, command: str) -> dict:
    """The first fields of a result file: what it holds, how to remake it, where.

    Args:
        schema: "attention-guide/<what>/<version>", for readers of the file.
        command: the command that wrote it (command_line()).
    """
    return {"schema": schema, "command": command, "machine": machine_info()}


def note_load_after(header: dict) -> dict:
    """Add the 1-minute load average before (from the header) and now, after a
    measurement: how busy the machine was around it, in the units of `uptime`."""
    machine = header["machine"]
    cores = machine["cpu_count"] or 1
    machine["load_1min_before"] = round(machine["load_per_core"] * cores, 2)
    machine["load_1min_after"] = round(os.getloadavg()[0], 2)
    return header


def atomic_write(path: Path, write: Callable, mode: str = "w") -> Path:
    """Call write(f) on a temporary file beside path, then rename it over path.

    os.replace is atomic: a reader (another build, a resumed run) finds the old
    file or the new one, never half of one. A write that fails leaves no file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_text(path: Path, text: str) -> Path:
    """atomic_write of a string."""
    return atomic_write(path, lambda f: f.write(text))


_NUMBERS = re.compile(r"\[\s*(-?[\d.eE+-]+(?:,\s*-?[\d.eE+-]+)*)\s*\]")


def json_text(data: dict, indent: int = 1) -> str:
    """Indented JSON, each list of numbers on one line, ending in a newline."""
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return _NUMBERS.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m[1])) + "]", text) + "\n"


def write_json(path: Path, data: dict) -> Path:
    """A result file: json_text(data), written atomically."""
    return write_text(path, json_text(data))
