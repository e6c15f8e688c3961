"""Every page's "Run this page" downloads (hooks/page_downloads.py) run as a reader gets them.

The guide's package is built into a wheel from the checkout and installed into a throw-away
environment outside it; the environment reaches torch through a .pth line naming the project
venv's site-packages (the folder only: the venv's own .pth files, which put the checkout on
the path, are not read). Then every page's script runs, in one process, from an empty
folder (tests/pages/run_downloads.py): each cell must print exactly what the page's Output
block under that block shows, and the notebook must hold the same cells, with those outputs.

The scripts run on one torch thread with this machine's kernels, as the suite's own run of
the pages does: what this run is for is the wheel and the empty folder (a module or data file
missing from the wheel, a path into the checkout, a cell that needs a block the download
leaves out). Whether an Output holds on a reader's thread count and other CPUs is
tests/pages/test_portability.py's check. When the session runs that check too (`make test`),
this run takes its combined setting (plain kernels, old MKL/oneDNN instruction sets, two
threads) and does that check for every page a download runs whole: the rerun there leaves
those pages out, so that each page's blocks run once more, not twice (issue 48).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from hooks import page_downloads
from lab.shared.common import ROOT
from tests.pages import test_portability as portability

RUNNER = Path(__file__).with_name("run_downloads.py")


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


@pytest.fixture(scope="module")
def reader_python(tmp_path_factory) -> Path:
    """The Python of a fresh environment with the guide's wheel installed, and torch."""
    work = tmp_path_factory.mktemp("reader")
    src = work / "src"
    for folder, pattern in (("snippets", "*.py"), ("data", "*.txt")):
        for path in (ROOT / folder).rglob(pattern):  # subpackages too (lessons/)
            copy = src / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, copy)
    shutil.copy(ROOT / "pyproject.toml", src)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work), str(src)],
        check=True,
        cwd=work,
    )
    (wheel,) = work.glob("attention_guide-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / "venv")], check=True)
    python = work / "venv" / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", site, str(wheel)])
    (Path(site) / "project-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


@pytest.fixture(scope="module")
def downloads(built_site) -> dict[str, tuple[Path, dict]]:
    """Each page's script and notebook, as the build wrote them."""
    folder = built_site / page_downloads.DOWNLOADS
    return {
        script.stem: (script, json.loads(script.with_suffix(".ipynb").read_text("utf-8")))
        for script in sorted(folder.glob("*.py"))
    }


@pytest.fixture(scope="module")
def setting(request) -> str | None:
    """The portability run whose setting the downloads run under (None: this machine's
    kernels, one thread)."""
    if portability.downloads_carry_the_combined_run(request.session):
        return portability.COMBINED
    return None


@pytest.fixture(scope="module")
def ran(reader_python, downloads, setting, tmp_path_factory) -> dict:
    fresh = tmp_path_factory.mktemp("fresh-folder")
    scripts = [shutil.copy(path, fresh) for path, _ in downloads.values()]
    runner = shutil.copy(RUNNER, fresh.parent)  # its folder goes on sys.path: not tests/
    out = fresh.parent / "ran.json"
    proc = subprocess.run(
        [reader_python, runner, out, *[Path(s).name for s in scripts]],
        cwd=fresh,
        capture_output=True,
        text=True,
        timeout=900,
        # One torch thread, or the portability run's setting (see above).
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(fresh),
            **(portability.download_env(setting) if setting else {"OMP_NUM_THREADS": "1"}),
        },
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def test_every_page_with_code_has_downloads(downloads):
    def runs_outside(page: Path) -> bool:
        """A python block that imports none of the repository's tooling: the downloads
        leave out the others, and a page of those alone has nothing to download."""
        blocks = re.findall(r"```python[^\n]*\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
        packages = "|".join(sorted(page_downloads.CHECKOUT_ONLY))
        tooling = re.compile(rf"^\s*(from|import)\s+({packages})\b", re.M)
        return any(not tooling.search(b) for b in blocks)

    pages_with_code = {
        page_downloads.download_name(p.relative_to(ROOT / "docs").as_posix())
        for p in (ROOT / "docs").glob("*.md")
        if runs_outside(p)
    }
    pages_with_code -= {"index", "contributing"}  # their code needs the repository
    assert pages_with_code <= set(downloads), pages_with_code - set(downloads)
    assert len(downloads) >= 10


def test_downloads_run_outside_the_checkout(ran):
    assert not ran["snippets"].startswith(str(ROOT)), ran["snippets"]
    venv = sysconfig.get_path("purelib")  # the project venv's packages: torch, numpy
    inside = [p for p in ran["sys_path"] if p.startswith(str(ROOT)) and p != venv]
    assert not inside, ran["sys_path"]


def test_the_downloads_ran_under_their_setting(ran, setting):
    """The setting took effect: torch in the downloads' process reports it."""
    header = portability.EXPECTED_HEADER[setting] if setting else ", 1 threads"
    assert header in ran["torch"], (setting, ran["torch"])


def test_the_pages_the_portability_run_leaves_to_the_downloads_are_run_whole(downloads):
    """Each page the portability rerun leaves out when the downloads carry it has a download
    that runs every block the page runs: a cell per block, none of them left out."""
    from hooks.page_parser import markdown_snippet_expander, parse_page

    expand = markdown_snippet_expander(ROOT / "mkdocs.yml")
    whole = portability.pages_the_downloads_run_whole()
    assert len(whole) >= 10, whole
    for page in whole:
        name = page_downloads.download_name(page.removeprefix("docs/"))
        assert name in downloads, f"{page} has no download"
        runs = [b.where for b in parse_page(ROOT / page, ROOT, expand) if b.kind and not b.skip]
        script, notebook = downloads[name]
        cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        ran = [c["metadata"].get("page_line") for c in cells]
        assert [w for w in ran if w] == runs, page
        text = script.read_text(encoding="utf-8")
        assert "# Not run here" not in text, page


def test_downloads_print_what_their_pages_show(ran, downloads, setting):
    problems, checked, pages = [], 0, set()
    for name, (script, notebook) in downloads.items():
        cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        results = ran["scripts"][script.name]
        for cell, result in zip(cells, results, strict=False):
            where = f"{name}: the block at {result['where']}"
            page = result["where"].rsplit(":", 1)[0]  # docs/x.md:LINE, or "imports"
            page = page if page.endswith(".md") else f"docs/{name}.md"
            if result["error"]:
                problems.append(f"{where} failed:\n{result['error']}")
                pages.add(page)
                break
            shown = "".join(t for o in cell["outputs"] for t in o.get("text", []))
            if cell["outputs"]:
                checked += 1
                if _normalise(shown) != _normalise(result["printed"]):
                    pages.add(page)
                    problems.append(
                        f"{where} printed\n{result['printed']}\nnot what its page shows\n{shown}"
                    )
        else:
            if len(results) != len(cells):
                problems.append(f"{name}: {len(results)} cells ran, the notebook has {len(cells)}")
    if problems and setting:  # the portability run's check: its words, and its commands
        problems.insert(
            0,
            f"the downloads ran under the portability run's settings {setting!r} together "
            f"({portability.assignments(portability.download_env(setting))}), outside the "
            "checkout (tests/pages/test_portability.py). The pages' blocks under each "
            f"setting alone, in the checkout, by hand:\n"
            + portability.by_hand(setting, " ".join(sorted(pages))),
        )
    assert not problems, "\n\n".join(problems)
    assert checked >= 50, checked


def test_notebook_and_script_hold_the_pages_blocks(downloads):
    """The notebook's code cells are the script's cells, and every Output block of a page
    whose block is in the download is that cell's stored output (read from the page here,
    with the harness's parser, not from the hook)."""
    from hooks.page_parser import markdown_snippet_expander, parse_page

    expand = markdown_snippet_expander(ROOT / "mkdocs.yml")
    for name, (script, notebook) in downloads.items():
        cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        text = script.read_text(encoding="utf-8")
        for cell in cells:
            assert "".join(cell["source"]).rstrip() in text, (name, cell["source"][:2])
        blocks = parse_page(ROOT / "docs" / f"{name}.md", ROOT, expand)
        _, planned = page_downloads.plan(blocks)
        by_line = {c["metadata"].get("page_line"): c for c in cells}
        for p in planned:
            if p.left_out or p.block.expected_output is None:
                continue
            shown = "".join(by_line[p.block.where]["outputs"][0]["text"])
            assert _normalise(shown) == _normalise(p.block.expected_output.code), p.block.where
