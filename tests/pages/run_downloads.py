"""Run page downloads (the .py files of hooks/page_downloads.py) as a reader would, and report.

Run by tests/pages/test_downloads.py with the Python of a throw-away environment that has the
guide's package installed from its wheel, from an empty folder: `python run_downloads.py
OUT.json PAGE.py ...`. Each script runs in a namespace of its own, cell by cell (`# %%`
lines), as `python PAGE.py` would run it; what each cell printed, or the error that stopped
the script, goes into OUT.json, with where `snippets` was imported from.
Standard library only: it must not import anything from the checkout.
"""

import contextlib
import io
import json
import re
import sys
import time
import traceback
import types

CELL = re.compile(r"^# %% (?P<where>.*)$", re.M)


def run(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    marks = list(CELL.finditer(text))
    module = types.ModuleType("download_" + re.sub(r"\W", "_", path))
    sys.modules[module.__name__] = module  # dataclasses look their module up
    cells = []
    for n, mark in enumerate(marks):
        end = marks[n + 1].start() if n + 1 < len(marks) else len(text)
        source = text[mark.end() : end]
        out = io.StringIO()
        cell = {"where": mark["where"], "printed": None, "error": None}
        start = time.process_time()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(source, f"{path} ({mark['where']})", "exec"), module.__dict__)
        except BaseException:  # reported, and the rest of the script is not run
            cell["error"] = traceback.format_exc(limit=-4)
        cell["printed"] = out.getvalue()
        cell["cpu_s"] = round(time.process_time() - start, 2)
        cells.append(cell)
        if cell["error"]:
            break
    sys.modules.pop(module.__name__, None)
    return cells


def main() -> None:
    out, paths = sys.argv[1], sys.argv[2:]
    results = {"scripts": {path: run(path) for path in paths}}
    import snippets

    results["snippets"] = snippets.__file__
    results["sys_path"] = sys.path
    torch = sys.modules["torch"]  # the scripts imported it: what it ran with
    results["torch"] = (
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} threads"
    )
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
