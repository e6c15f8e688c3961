"""Every page's Output blocks hold on other CPUs: the pages' blocks again, under other settings.

A number printed at noise level (a rounding difference to two significant digits, a sum of
many floats to the last digit) changes with the CPU's vector width, the BLAS path and the
thread count. The suite's own run uses this machine's best kernels and one thread; each test
here runs every page's blocks once more in a fresh `python -m pytest docs` (the settings are
read when torch is imported, so they need a new process), with one setting changed:

* `ATEN_CPU_CAPABILITY`: PyTorch's own kernels built for AVX2, or the plain build with no
  vector instructions at all (an AVX-512 machine's own run covers AVX-512);
* `MKL_ENABLE_INSTRUCTIONS` / `ONEDNN_MAX_CPU_ISA`: matrix products on older instruction sets;
* two torch threads instead of one, as in a reader's notebook (`GUIDE_TORCH_THREADS`, read
  by the repository's conftest.py).

One setting by hand: `GUIDE_TORCH_THREADS=2 .venv/bin/python -m pytest docs -n 0`.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from lab.common import ROOT

SETTINGS = {
    "avx2-kernels": {"ATEN_CPU_CAPABILITY": "avx2"},
    "plain-kernels": {"ATEN_CPU_CAPABILITY": "default"},
    "old-mkl-onednn": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    # A passive wait: threads that spin for work would take the core from the other worker.
    "2-threads": {"GUIDE_TORCH_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
}

# What conftest.py's report header must say under each setting, so a setting that silently did
# not apply cannot pass. (MKL and oneDNN have no such read-back.)
EXPECTED_HEADER = {
    "avx2-kernels": "CPU capability AVX2, 1 threads",
    "plain-kernels": "CPU capability DEFAULT, 1 threads",
    "old-mkl-onednn": ", 1 threads",
    "2-threads": ", 2 threads",
}

_FAILED = re.compile(r"^(?:FAILED|ERROR) (?P<page>\S+\.md)::line (?P<line>\d+)", re.MULTILINE)


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


def explain(setting: str, proc: subprocess.CompletedProcess) -> str:
    env = " ".join(f"{k}={v}" for k, v in SETTINGS.get(setting, {}).items())
    where = ", ".join(failures(proc)) or "no block named: see the output"
    return (
        f"under the setting {setting!r} ({env}), the pages' blocks fail at {where}.\n"
        f"Rerun by hand: {env} .venv/bin/python -m pytest docs -n 0\n"
        f"--- stdout (from the first failure) ---\n{first_failure(proc.stdout)[:8000]}\n"
        f"--- stderr (end) ---\n{proc.stderr[-2000:]}"
    )


@pytest.mark.parametrize("setting", SETTINGS)
def test_pages_hold_under(setting):
    # Another CPU is another machine, with an inductor cache of its own: a kernel compiled
    # under this machine's AVX-512 and reused under ATEN_CPU_CAPABILITY=avx2 gives wrong
    # FlexAttention outputs, with no error (docs/masks.md).
    cache = {"TORCHINDUCTOR_CACHE_DIR": str(ROOT / ".cache" / "inductor" / setting)}
    # contributing.md's one running block is a pytest run of attention.md, already run here.
    proc = run_pages({**SETTINGS[setting], **cache}, "docs", "--ignore", "docs/contributing.md")
    assert EXPECTED_HEADER[setting] in proc.stdout, (
        f"the setting {setting!r} did not take effect: {proc.stdout[:600]}"
    )
    assert proc.returncode == 0, explain(setting, proc)
    assert re.search(r"\d+ passed", proc.stdout), explain(setting, proc)


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


def test_a_noise_level_output_fails_under_another_setting():
    """The check can fail: a sum of 4,096 floats printed to its last digits, in a throw-away
    page, passes with the kernels it was written with and fails under the plain kernels."""
    # Inside the repository (the harness reads its mkdocs.yml), outside what the suite collects.
    docs = ROOT / ".cache" / f"planted-{os.getpid()}" / "docs"
    docs.mkdir(parents=True)
    page = docs / "planted.md"
    page.write_text(PLANTED.replace("{printed}", "?"))
    args = (str(page), "--docs-dir", str(docs.relative_to(ROOT)))
    try:
        # The AVX2 kernels write the page's Output (so under them it passes), then the plain
        # kernels run the same page.
        written = run_pages(SETTINGS["avx2-kernels"], *args, "--update-output")
        assert written.returncode == 0, written.stdout + written.stderr
        assert "updated the Output block" in written.stdout, written.stdout
        proc = run_pages(SETTINGS["plain-kernels"], *args)
    finally:
        shutil.rmtree(docs.parent)
    assert proc.returncode == 1, proc.stdout
    assert "printed something other than its Output block" in proc.stdout
    assert failures(proc) == [f"{page.relative_to(ROOT).as_posix()}:3"], proc.stdout
    message = explain("plain-kernels", proc)
    assert "'plain-kernels' (ATEN_CPU_CAPABILITY=default)" in message
