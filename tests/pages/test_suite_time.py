"""The time summary and the budget of tests/suite_time.py, on a throw-away project."""

import os
import subprocess
import sys
import time

from lab.shared.common import ROOT
from tests.suite_time import machine_cpu_seconds

SLOW = "import time\n\n\ndef test_slow():\n    time.sleep(0.4)\n\n\ndef test_quick():\n    pass\n"


def run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.suite_time"]\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = checks\n")
    (tmp_path / "checks").mkdir(exist_ok=True)
    (tmp_path / "checks" / "test_a.py").write_text(SLOW)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )


def test_the_summary_says_where_the_time_went(tmp_path):
    proc = run(tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "where the time went" in proc.stdout
    assert "longest chain: checks/test_a.py" in proc.stdout
    assert "busy: main" in proc.stdout
    assert "the machine's CPU over the run: " in proc.stdout
    slowest = proc.stdout.split("slowest (wall, CPU):\n", 1)[1].splitlines()
    assert slowest[0].endswith("checks/test_a.py::test_slow")
    assert "OVER ITS TIME BUDGET" not in proc.stdout


def test_the_budget_is_300_s_and_time_never_fails_a_run(tmp_path):
    """Over its budget a full run says so, and passes; no option makes time a failure."""
    proc = run(tmp_path)
    assert "(budget 300 s on 2 cores)" in proc.stdout, proc.stdout
    proc = run(tmp_path, "--time-budget", "0.2")
    assert proc.returncode == 0, proc.stdout
    assert "2 passed" in proc.stdout
    assert "SUITE OVER ITS TIME BUDGET" in proc.stdout
    assert "budget 0.2 s (moonshot 200 s)" in proc.stdout
    assert "never a failure" in proc.stdout
    proc = run(tmp_path, "--time-budget", "0.2", "--time-budget-fails")
    assert proc.returncode == 4 and "unrecognized arguments" in proc.stderr, proc.stderr


def test_a_partial_run_has_no_budget(tmp_path):
    for args in (["checks/test_a.py"], ["-k", "slow"]):
        proc = run(tmp_path, "--time-budget", "0.2", *args)
        assert proc.returncode == 0, proc.stdout
        assert "where the time went" in proc.stdout
        assert "OVER ITS TIME BUDGET" not in proc.stdout


def test_the_machine_cpu_counts_this_process_busy():
    """Half a second of this process's CPU shows in the machine's count (which also holds
    whatever else runs meanwhile, so only a lower bound can be asserted)."""
    before, start = machine_cpu_seconds(), time.process_time()
    while time.process_time() - start < 0.5:
        pass
    assert machine_cpu_seconds() - before >= 0.4


def test_the_processes_the_suite_starts_wait_without_spinning_and_compile_in_place():
    """conftest.py's settings reach what a test starts: OpenMP's threads sleep at a barrier
    (two-thread children beside busy workers spun through their waits), and torch.compile
    starts no pool of compile workers."""
    probe = (
        "import os, torch._inductor.config as c; "
        "print(os.environ.get('OMP_WAIT_POLICY'), c.compile_threads)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["PASSIVE", "1"], out.stdout + out.stderr
