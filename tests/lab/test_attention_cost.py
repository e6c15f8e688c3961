"""Tests for lab/attention_cost.py (and its runners and tables): the attention-cost command,
its result files and the committed ones."""

import json
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import torch

from lab import attention_cost
from lab.parts import attention_cost_runs
from lab.shared.common import RESULTS_DIR, ROOT
from snippets.pages.attention_cost import FORWARD_ONLY, VARIANTS, score_bytes

COMMITTED = RESULTS_DIR
SVG = "{http://www.w3.org/2000/svg}svg"


# --- the command, its result files and the committed ones -----------------------------------


def check_attention_result(data: dict, command: str = "python -m lab.attention_cost") -> None:
    """The schema of attention-cost.json, and a complete grid of results."""
    assert data["schema"] == attention_cost.SCHEMA
    assert data["command"].startswith(f"{command} attention")
    machine = data["machine"]
    for key in ("platform", "cpu_model", "torch", "torch_threads", "date", "page_size"):
        assert key in machine, key
    assert machine["torch"].startswith(torch.__version__.split("+")[0])
    assert isinstance(machine["torch_threads"], int) and machine["torch_threads"] >= 1
    settings = data["settings"]
    seq_lens, heads = settings["seq_lens"], settings["heads"]
    assert settings["plot_heads"] in heads
    assert set(data["variants"]) == set(VARIANTS)
    grid = {(r["variant"], r["n_head"], r["seq_len"]) for r in data["results"]}
    assert grid == {(v, h, t) for v in VARIANTS for h in heads for t in seq_lens}
    assert len(data["results"]) == len(grid)
    for row in data["results"]:
        assert row["score_bytes"] == score_bytes(settings["batch"], row["n_head"], row["seq_len"])
        # every variant computed SDPA's output (FlexAttention compiled, as timed)
        assert row["max_abs_diff_vs_sdpa"] <= 1e-5, row
        assert row["first_call_seconds"] > 0
        for mode in attention_cost_runs.MODES:
            cell = row[mode]
            if row["variant"] in FORWARD_ONLY and mode == "forward_backward":
                assert cell is None  # not measured: no backward on the CPU
                continue
            assert len(cell["samples_ms"]) == settings["repetitions"]
            assert cell["median_ms"] == pytest.approx(
                statistics.median(cell["samples_ms"]), abs=1e-3
            )
            assert isinstance(cell["peak_bytes"], int) and cell["peak_bytes"] > 0
            assert isinstance(cell["page_faults"], int) and cell["page_faults"] >= 0
            assert len(cell["waited"]) == settings["repetitions"]
            assert isinstance(cell["retaken"], int) and cell["retaken"] >= 0
            assert 0 < cell["largest_allocation_bytes"] <= cell["peak_bytes"]


def check_svg(path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag == SVG
    assert "sequence length T (log scale)" in path.read_text(encoding="utf-8")


def test_quick_command_end_to_end(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.attention_cost",
            "attention",
            "--quick",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # 12-20 s of CPU; a loaded 2-core machine stretched it past 120 s of wall
    )
    assert proc.returncode == 0, proc.stderr
    assert "[2/2] H=2 T=256" in proc.stderr  # progress went to stderr
    assert "forward+backward, ms" in proc.stdout and "fwd+bwd peak, MiB" in proc.stdout
    assert "first call, s" in proc.stdout  # FlexAttention's compile, apart from the runs
    data = json.loads((tmp_path / "attention-cost.json").read_text())
    check_attention_result(data)
    assert data["settings"]["seq_lens"] == [64, 256]
    assert sorted(p.name for p in tmp_path.glob("*.svg")) == [
        "attention-cost-memory.svg",
        "attention-cost-time.svg",
    ]
    for svg in tmp_path.glob("*.svg"):
        check_svg(svg)


def test_quick_overhead_command(tmp_path, capsys):
    attention_cost.main(["overhead", "--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "attention-overhead.json").read_text())
    assert data["schema"] == attention_cost.OVERHEAD_SCHEMA
    (row,) = data["results"]
    assert row["ratio"] == pytest.approx(row["module_us"] / row["inline_us"], rel=1e-3)
    assert "module / inline" in capsys.readouterr().out


def test_help_names_both_benchmarks(capsys):
    with pytest.raises(SystemExit) as exit_:
        attention_cost.command().parser.parse_args(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "attention" in out and "overhead" in out


@pytest.mark.parametrize("argv", [["attention", "-T", "64 x"], ["attention", "--heads", "0"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        attention_cost.command().parser.parse_args(argv)
    assert exit_.value.code == 2
    assert "expected" in capsys.readouterr().err


def test_committed_result_is_complete():
    data = json.loads((COMMITTED / "attention-cost.json").read_text())
    check_attention_result(data, "python -m lab.bench")  # the command's name when it ran
    assert data["settings"]["seq_lens"] == [64, 128, 256, 512, 1024, 2048, 4096]


def test_committed_overhead_result():
    data = json.loads((COMMITTED / "attention-overhead.json").read_text())
    assert data["schema"] == attention_cost.OVERHEAD_SCHEMA
    assert data["command"] == "python -m lab.bench overhead"  # the command's name when it ran
    assert [r["seq_len"] for r in data["results"]] == data["settings"]["seq_lens"]
