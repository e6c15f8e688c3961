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

The settings are read when torch is imported, so each needs a fresh `python -m pytest docs`,
and one such run costs about 25 s of CPU. The four are applied in two runs, two settings each:
the AVX2 kernels with the old MKL/oneDNN instruction sets, the plain kernels on two threads.
The two kernel settings cannot share a run (they are values of one variable); the other two
act on other code (matrix products, the thread pool), so they sit with either. Combining keeps
the check: every page's every block still runs under every setting, so a block that breaks
under one setting breaks its run. What it loses is the attribution (which of the two settings
it was), and the failure message gives that back by hand: one command per setting, each
applying that setting alone to the failing pages.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest
import torch

from lab.shared.common import ROOT

SETTINGS = {
    "avx2-kernels": {"ATEN_CPU_CAPABILITY": "avx2"},
    "plain-kernels": {"ATEN_CPU_CAPABILITY": "default"},
    "old-mkl-onednn": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    # A passive wait: threads that spin for work would take the core from the other worker.
    "2-threads": {"GUIDE_TORCH_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
}

# The runs: each applies the settings it names, all at once.
RUNS = {
    "avx2-kernels+old-mkl-onednn": ("avx2-kernels", "old-mkl-onednn"),
    "plain-kernels+2-threads": ("plain-kernels", "2-threads"),
}

# What conftest.py's report header must say under each run, so a setting that silently did not
# apply cannot pass. (MKL and oneDNN have no such read-back.)
EXPECTED_HEADER = {
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
    for setting in RUNS[run]:
        env.update(SETTINGS[setting])
    return {**env, **inductor_cache(run)}


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


def explain(run: str, proc: subprocess.CompletedProcess) -> str:
    """The failure: the run's settings, the blocks that failed, and one command per setting
    that applies it alone, to find which of the run's settings breaks them."""
    failed = failures(proc)
    where = ", ".join(failed) or "no block named: see the output"
    pages = " ".join(sorted({f.rsplit(":", 1)[0] for f in failed})) or "docs"
    alone = "\n".join(
        f"  {setting}: {assignments({**SETTINGS[setting], **inductor_cache(setting)})} "
        f".venv/bin/python -m pytest {pages} -n 0"
        for setting in RUNS[run]
    )
    return (
        f"under the settings {run!r} together ({assignments(run_env(run))}), the pages' blocks "
        f"fail at {where}.\nThe run applies {len(RUNS[run])} settings at once; to find which "
        f"one breaks them, rerun with each alone, by hand:\n{alone}\n"
        f"--- stdout (from the first failure) ---\n{first_failure(proc.stdout)[:8000]}\n"
        f"--- stderr (end) ---\n{proc.stderr[-2000:]}"
    )


def test_the_runs_apply_every_setting_once():
    applied = [setting for run in RUNS.values() for setting in run]
    assert sorted(applied) == sorted(SETTINGS)
    for run in RUNS.values():  # one value per variable in a run
        variables = [name for setting in run for name in SETTINGS[setting]]
        assert len(variables) == len(set(variables)), run


@pytest.mark.parametrize("run", RUNS)
def test_pages_hold_under(run):
    # contributing.md's one running block is a pytest run of attention.md, already run here.
    proc = run_pages(run_env(run), "docs", "--ignore", "docs/contributing.md")
    assert EXPECTED_HEADER[run] in proc.stdout, (
        f"the settings {run!r} did not take effect: {proc.stdout[:600]}"
    )
    assert proc.returncode == 0, explain(run, proc)
    assert re.search(r"\d+ passed", proc.stdout), explain(run, proc)


PLANTED = """\
# Planted

```python
import torch

torch.manual_seed(0)
x = torch.randn(4096)
print(f"{x.sum().item():.9f}")
```

```text title="Output"
{printed}
```
"""


def noise_level_sum() -> str:
    """What the planted page prints, printed here: this machine's best kernels, one thread,
    as in the suite's own run of the pages (whose Output blocks are written that way)."""
    torch.manual_seed(0)
    return f"{torch.randn(4096).sum().item():.9f}"


def test_a_noise_level_output_fails_under_the_combined_settings():
    """The check can fail: a sum of 4,096 floats printed to its last digits, in a throw-away
    page whose Output is what the suite's own settings print, fails under the plain kernels
    on two threads, and the message names both settings and a command for each alone."""
    run = "plain-kernels+2-threads"
    # Inside the repository (the harness reads its mkdocs.yml), outside what the suite collects.
    docs = ROOT / ".cache" / f"planted-{os.getpid()}" / "docs"
    docs.mkdir(parents=True)
    page = docs / "planted.md"
    assert torch.backends.cpu.get_cpu_capability() != "DEFAULT", "run it with vector kernels"
    printed = noise_level_sum()
    page.write_text(PLANTED.replace("{printed}", printed))
    try:
        proc = run_pages(run_env(run), str(page), "--docs-dir", str(docs.relative_to(ROOT)))
    finally:
        page.unlink()
        docs.rmdir()
        docs.parent.rmdir()
    assert EXPECTED_HEADER[run] in proc.stdout, proc.stdout[:600]
    assert proc.returncode == 1, proc.stdout
    assert "printed something other than its Output block" in proc.stdout
    shown = re.search(r"page shows:\s+(\S+)\ncode printed:\s+(\S+)", proc.stdout)
    assert shown and shown[1] == printed and shown[2] != printed, proc.stdout
    where = page.relative_to(ROOT).as_posix()
    assert failures(proc) == [f"{where}:3"], proc.stdout
    message = explain(run, proc)
    assert "'plain-kernels+2-threads' together (ATEN_CPU_CAPABILITY=default" in message
    assert "  plain-kernels: ATEN_CPU_CAPABILITY=default TORCHINDUCTOR_CACHE_DIR=" in message
    assert "GUIDE_TORCH_THREADS=2 OMP_WAIT_POLICY=PASSIVE TORCHINDUCTOR_CACHE_DIR=" in message
    assert message.count(f"-m pytest {where} -n 0") == 2, message
