"""Every page's Output blocks hold on other CPUs: the pages' blocks again, under other settings.

A number printed at noise level (a rounding difference to two significant digits, a sum of
many floats to the last digit) changes with the CPU's vector width, the BLAS path and the
thread count. The suite's own run uses this machine's best kernels and one thread. Four
settings change that:

* `ATEN_CPU_CAPABILITY`: PyTorch's own kernels built for AVX2, or the plain build with no
  vector instructions at all (an AVX-512 machine's own run covers AVX-512);
* `MKL_ENABLE_INSTRUCTIONS` / `ONEDNN_MAX_CPU_ISA`: matrix products on older instruction sets;
* two torch threads instead of one, as in a reader's notebook (`GUIDE_TORCH_THREADS`, read
  by the repository's conftest.py).

The settings are read when torch is imported, so each run needs a fresh `python -m pytest
docs`: every page under the combined setting below takes about 57 s of CPU on 2 cores (the
downloads carry 22 of the 32 pages with code: see the end of this text). Until issue 48 the
four were applied in two runs, two settings each (the AVX2 kernels with the old MKL/oneDNN
instruction sets, the plain kernels on two threads). Now one run applies three at once (the
plain kernels, the old MKL/oneDNN instruction sets, two threads), and the AVX2 kernels are left
out: the two kernel settings are values of one variable, and the plain kernels are the further
from this machine's (no vector instructions against AVX-512), so that an output at noise level
which the AVX2 kernels change, the plain ones change too. The proof is planted
(test_every_planted_noise_level_output_fails_under_the_combined_setting): the noise-level
outputs the suite planted for the two old runs, and one more per old run, each printed as the
suite's own settings print it, all fail under the combined run. (That each new one fails under
its old run was shown by hand, with the commands the failure message gives, when the change
was made: see the commit.)

What combining loses is the attribution (which of the settings it was): the failure message
gives it back by hand, one command per setting, each applying that setting alone to the
failing pages.

The pages' downloads (tests/pages/test_downloads.py) run most pages' blocks once more, in a
fresh process outside the checkout. When a session runs both (`make test`), that process runs
under the combined setting, its cells are checked against the pages' Output blocks there, and
the rerun here takes only the pages a download does not run whole (a block left out of it, a
shell block): each page's blocks run once under the setting, not twice (issue 48). A session
without the downloads' check (`-m portability`) reruns every page here.
"""

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hooks import page_downloads
from hooks.page_parser import markdown_snippet_expander, parse_page
from lab.shared.common import ROOT

SETTINGS = {
    "avx2-kernels": {"ATEN_CPU_CAPABILITY": "avx2"},
    "plain-kernels": {"ATEN_CPU_CAPABILITY": "default"},
    "old-mkl-onednn": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    # A passive wait: threads that spin for work would take the core from the other worker.
    "2-threads": {"GUIDE_TORCH_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
}

# The runs: each applies the settings it names, all at once. One run (issue 48's budget); the
# AVX2 kernels are covered by the plain ones (see above), and stay here for a run by hand.
COMBINED = "plain-kernels+old-mkl-onednn+2-threads"
RUNS = {COMBINED: ("plain-kernels", "old-mkl-onednn", "2-threads")}
# The two runs before issue 48, kept to show that the planted outputs fail there too (by hand:
# python -m tests.pages.test_portability OLD-RUN).
OLD_RUNS = {
    "avx2-kernels+old-mkl-onednn": ("avx2-kernels", "old-mkl-onednn"),
    "plain-kernels+2-threads": ("plain-kernels", "2-threads"),
}

# What conftest.py's report header must say under each run, so a setting that silently did not
# apply cannot pass. (MKL and oneDNN have no such read-back.)
EXPECTED_HEADER = {
    COMBINED: "CPU capability DEFAULT, 2 threads",
    "avx2-kernels+old-mkl-onednn": "CPU capability AVX2, 1 threads",
    "plain-kernels+2-threads": "CPU capability DEFAULT, 2 threads",
}

_FAILED = re.compile(r"^(?:FAILED|ERROR) (?P<page>\S+\.md)::line (?P<line>\d+)", re.MULTILINE)


def inductor_cache(name: str) -> dict[str, str]:
    """A compile cache of its own: another CPU is another machine. A kernel compiled under this
    machine's AVX-512 and reused under ATEN_CPU_CAPABILITY=avx2 gives wrong FlexAttention
    outputs, with no error (docs/masks.md)."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(ROOT / ".cache" / "inductor" / name)}


def run_env(run: str) -> dict[str, str]:
    """The environment a run adds: every one of its settings, and its own compile cache."""
    env = {}
    for setting in {**RUNS, **OLD_RUNS}[run]:
        env.update(SETTINGS[setting])
    return {**env, **inductor_cache(run)}


DOWNLOADS_CHECK = "tests/pages/test_downloads.py::test_downloads_print_what_their_pages_show"
COMBINED_CHECK = f"tests/pages/test_portability.py::test_pages_hold_under[{COMBINED}]"


def downloads_carry_the_combined_run(session: pytest.Session) -> bool:
    """Whether this session runs both the downloads' check and the combined rerun: then the
    downloads run under the combined setting, and the rerun skips the pages they run whole."""
    ids = {item.nodeid for item in session.items}
    return DOWNLOADS_CHECK in ids and COMBINED_CHECK in ids


def download_env(run: str) -> dict[str, str]:
    """The run's settings for a download, which is a script, not the suite: torch's thread
    count through OMP_NUM_THREADS (GUIDE_TORCH_THREADS is read by the suite's conftest.py)."""
    env = run_env(run)
    threads = env.pop("GUIDE_TORCH_THREADS", None)
    return {**env, "OMP_NUM_THREADS": threads} if threads else env


def pages_the_downloads_run_whole(root=ROOT) -> list[str]:
    """The pages (docs/x.md) whose every block their download runs: no shell block, and no
    python block left out of it but those the page itself skips (hooks/page_downloads.py's
    plan, which the build's downloads are made by)."""
    expand = markdown_snippet_expander(root / "mkdocs.yml")
    whole = []
    for page in sorted((root / "docs").rglob("*.md")):
        blocks = parse_page(page, root, expand)
        runs = [b for b in blocks if b.kind and not b.skip]
        if not runs or any(b.kind != "python" for b in runs):
            continue
        _, cells = page_downloads.plan(blocks)
        if not any(c.left_out and not c.block.skip for c in cells):
            whole.append(page.relative_to(root).as_posix())
    return whole


def run_pages(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """Run the pages' blocks in a fresh process with `env` added to this one's environment."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "-n", "0"]
        # No captured logs in the report: torch.compile's debug log would bury the failure.
        + ["--no-record", "--show-capture=no", "-o", "console_output_style=classic"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def failures(proc: subprocess.CompletedProcess) -> list[str]:
    """The page:line of each block that failed, from pytest's short summary."""
    return [f"{m['page']}:{m['line']}" for m in _FAILED.finditer(proc.stdout)]


def first_failure(stdout: str) -> str:
    start = stdout.find("= FAILURES =")
    return stdout[start:] if start >= 0 else stdout[-8000:]


def assignments(env: dict[str, str]) -> str:
    """VAR=value ..., for a command run from the repository's root."""
    root = f"{ROOT}{os.sep}"
    return " ".join(f"{k}={shlex.quote(v.removeprefix(root))}" for k, v in env.items())


def by_hand(run: str, pages: str) -> str:
    """One command per setting of the run, each applying that setting alone to ``pages``."""
    return "\n".join(
        f"  {setting}: {assignments({**SETTINGS[setting], **inductor_cache(setting)})} "
        f".venv/bin/python -m pytest {pages} -n 0"
        for setting in {**RUNS, **OLD_RUNS}[run]
    )


def explain(run: str, proc: subprocess.CompletedProcess) -> str:
    """The failure: the run's settings, the blocks that failed, and one command per setting
    that applies it alone, to find which of the run's settings breaks them."""
    failed, settings = failures(proc), {**RUNS, **OLD_RUNS}[run]
    where = ", ".join(failed) or "no block named: see the output"
    pages = " ".join(sorted({f.rsplit(":", 1)[0] for f in failed})) or "docs"
    return (
        f"under the settings {run!r} together ({assignments(run_env(run))}), the pages' blocks "
        f"fail at {where}.\nThe run applies {len(settings)} settings at once; to find "
        f"which one breaks them, rerun with each alone, by hand:\n{by_hand(run, pages)}\n"
        f"--- stdout (from the first failure) ---\n{first_failure(proc.stdout)[:8000]}\n"
        f"--- stderr (end) ---\n{proc.stderr[-2000:]}"
    )


def test_the_run_applies_every_setting_once_but_the_avx2_kernels():
    applied = [setting for run in RUNS.values() for setting in run]
    assert sorted(applied) == sorted(set(SETTINGS) - {"avx2-kernels"})
    for run in [*RUNS.values(), *OLD_RUNS.values()]:  # one value per variable in a run
        variables = [name for setting in run for name in SETTINGS[setting]]
        assert len(variables) == len(set(variables)), run


@pytest.mark.portability
@pytest.mark.parametrize("run", RUNS)
def test_pages_hold_under(run, request):
    # contributing.md's one running block is a pytest run of attention.md, already run here.
    ignored = ["docs/contributing.md"]
    if run == COMBINED and downloads_carry_the_combined_run(request.session):
        ignored += pages_the_downloads_run_whole()  # their downloads run under it instead
    args = [arg for page in ignored for arg in ("--ignore", page)]
    proc = run_pages(run_env(run), "docs", *args)
    assert EXPECTED_HEADER[run] in proc.stdout, (
        f"the settings {run!r} did not take effect: {proc.stdout[:600]}"
    )
    assert proc.returncode == 0, explain(run, proc)
    assert re.search(r"\d+ passed", proc.stdout), explain(run, proc)


# Outputs at noise level, each printed to digits that the CPU's kernels, the BLAS path or the
# thread count change. "sum" is the one the suite planted for the old plain-kernels+2-threads
# run; "softmax" (torch's vectorised exp inside softmax: AVX2 and AVX-512 round it apart) and
# "matmul" (MKL's sgemm on older instruction sets) are more for the old AVX2+old-MKL/oneDNN run,
# "exp-and-mean" (a mean that two threads split, and exp) one more for plain+2-threads. Under
# the old runs, by hand (python -m tests.pages.test_portability RUN), on 2026-12-07 on an
# AVX-512 machine: avx2-kernels+old-mkl-onednn failed softmax and matmul, plain-kernels+2-threads
# all four; the combined run fails all four (the test below).
NOISE = {
    "sum": 'x = torch.randn(4096)\nprint(f"{x.sum().item():.9f}")',
    "softmax": "x = torch.randn(5000)\nprint(torch.softmax(x, 0)[:2].tolist())",
    "matmul": "a, b = torch.randn(64, 512), torch.randn(512, 64)\nprint((a @ b)[0, :4].tolist())",
    "exp-and-mean": (
        'x = torch.randn(200_000)\nprint(f"{x.exp()[:3].tolist()} {x.mean().item():.12f}")'
    ),
}

PLANTED = """\
# Planted

```python
import torch

torch.manual_seed(0)
{code}
```

```text title="Output"
{printed}
```
"""


def printed_here(code: str) -> str:
    """What a planted block prints, printed here: this machine's best kernels, one thread, as
    in the suite's own run of the pages (whose Output blocks are written that way)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        torch.manual_seed(0)
        exec(code, {"torch": torch})
    return out.getvalue().strip()


def run_planted(run: str, names) -> tuple[subprocess.CompletedProcess, dict, dict]:
    """The planted pages of ``names`` (NOISE's keys) under ``run``: the process, each page's
    path (from the repository's root) and what this process printed for it."""
    # Inside the repository (the harness reads its mkdocs.yml), outside what the suite collects.
    docs = ROOT / ".cache" / f"planted-{os.getpid()}-{run}" / "docs"
    docs.mkdir(parents=True)
    assert torch.backends.cpu.get_cpu_capability() != "DEFAULT", "run it with vector kernels"
    pages, printed = {}, {}
    for name in names:
        printed[name] = printed_here(NOISE[name])
        page = docs / f"planted-{name}.md"
        page.write_text(PLANTED.format(code=NOISE[name], printed=printed[name]))
        pages[name] = page.relative_to(ROOT).as_posix()
    try:
        folder = str(docs.relative_to(ROOT))
        proc = run_pages(run_env(run), folder, "--docs-dir", folder)
    finally:
        shutil.rmtree(docs.parent)
    return proc, pages, printed


def test_every_planted_noise_level_output_fails_under_the_combined_setting():
    """The check can fail, and one run does the two old runs' work: each planted noise-level
    output (a block whose Output is what the suite's own settings print) fails under the
    combined run, each at its block; the message names the run's settings and a command for
    each alone."""
    proc, pages, printed = run_planted(COMBINED, NOISE)
    assert EXPECTED_HEADER[COMBINED] in proc.stdout, proc.stdout[:600]
    assert proc.returncode == 1, proc.stdout
    assert sorted(failures(proc)) == sorted(f"{p}:3" for p in pages.values()), proc.stdout
    # once per block in the reports: the short summary repeats it whole under CI=true, where
    # pytest does not cut its lines
    reports = proc.stdout.split("short test summary info")[0]
    assert reports.count("printed something other than its Output block") == len(NOISE)
    for name, shown in printed.items():  # what the page shows, and something else printed
        assert shown in proc.stdout, (name, proc.stdout)
    message = explain(COMBINED, proc)
    assert f"{COMBINED!r} together (ATEN_CPU_CAPABILITY=default" in message
    assert "  plain-kernels: ATEN_CPU_CAPABILITY=default TORCHINDUCTOR_CACHE_DIR=" in message
    assert "  old-mkl-onednn: MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41" in message
    assert "GUIDE_TORCH_THREADS=2 OMP_WAIT_POLICY=PASSIVE TORCHINDUCTOR_CACHE_DIR=" in message


def test_every_planted_noise_level_output_fails_in_a_download_under_the_combined_setting(
    tmp_path,
):
    """The downloads carry the combined run for the pages they run whole (see the top): in
    their runner (tests/pages/run_downloads.py), under download_env(COMBINED), each planted
    noise-level output prints other than this process prints it, and the runner reports the
    setting. (tests/pages/test_downloads.py compares each cell with its page's Output.)"""
    script = tmp_path / "planted.py"
    script.write_text(
        "".join(
            f"# %% docs/planted-{name}.md:3\nimport torch\n\ntorch.manual_seed(0)\n{code}\n"
            for name, code in NOISE.items()
        )
    )
    out = tmp_path / "ran.json"
    runner = Path(__file__).with_name("run_downloads.py")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **download_env(COMBINED)}
    proc = subprocess.run(
        [sys.executable, runner, out, script.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    ran = json.loads(out.read_text())
    assert EXPECTED_HEADER[COMBINED] in ran["torch"], ran["torch"]
    cells = ran["scripts"][script.name]
    assert [c["where"] for c in cells] == [f"docs/planted-{name}.md:3" for name in NOISE]
    for name, cell in zip(NOISE, cells, strict=True):
        assert cell["error"] is None, cell
        assert cell["printed"].strip() != printed_here(NOISE[name]), name


if __name__ == "__main__":  # the planted outputs under one of the runs, old or new, by hand
    which = sys.argv[1]
    proc, pages, _ = run_planted(which, NOISE)
    print(f"{which}: header {EXPECTED_HEADER[which] in proc.stdout}, failed: {failures(proc)}")
