"""Tests for snippets/bench.py and the claims of the attention-cost page, at small sizes.

No timing is asserted anywhere: times depend on the machine and on what else runs on it.
Memory is asserted, because the profiler counts tensor bytes exactly and the same way on every
run. The whole file takes a few seconds on 2 CPU cores.
"""

import functools
import json
import os
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import torch
from torch.testing import assert_close

from snippets import bench
from snippets.attention import CausalSelfAttention, MultiHeadAttention
from snippets.bench import (
    VARIANTS,
    forward,
    forward_backward,
    inline_forward,
    make_variants,
    page_faults,
    peak_memory,
    score_bytes,
)
from tests.conftest import ROOT

COMMITTED = ROOT / "docs" / "assets" / "results"
SVG = "{http://www.w3.org/2000/svg}svg"


def randn(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- what the memory measurement sees -------------------------------------------------------


def test_manual_path_scores_are_B_H_T_T_float32_exactly():
    B, H, C, T = 2, 4, 64, 384  # B, H and T all different, so a missing factor shows
    torch.manual_seed(0)
    csa = CausalSelfAttention(H, C, context_length=T)
    x = randn(B, T, C)
    with torch.no_grad():
        _, weights = csa(x, return_weights=True)
    assert weights.shape == (B, H, T, T)
    assert weights.numel() * weights.element_size() == B * H * T * T * 4 == score_bytes(B, H, T)
    # The profiler sees the same tensors being allocated: the largest is a (B, H, T, T) one.
    calls, _ = make_variants(H, C, T)
    manual = peak_memory(lambda: forward(calls["manual"], x))
    assert manual["largest_allocation_bytes"] == B * H * T * T * 4
    # The per-head path holds one head's (B, T, T) at a time; the fused kernel none at all.
    per_head = peak_memory(lambda: forward(calls["per-head"], x))
    assert per_head["largest_allocation_bytes"] == B * T * T * 4
    sdpa = peak_memory(lambda: forward(calls["sdpa"], x))
    assert sdpa["largest_allocation_bytes"] < B * T * T * 4


def test_peak_memory_counts_tensors_alive_at_once():
    a = torch.zeros(1000)  # alive before: not counted

    def two_then_one():
        b = torch.ones(256)  # 1 KiB
        c = torch.ones(512)  # 2 KiB, both alive: 3 KiB
        del b, c
        d = torch.ones(128)  # 0.5 KiB
        del d

    assert peak_memory(two_then_one) == {"peak_bytes": 3072, "largest_allocation_bytes": 2048}
    assert a.sum() == 0


# The manual paths are compared between T=512 and T=1024, the fused kernel between T=1024 and
# T=2048: its scratch buffer (a few tiles per thread) is sized from T, in steps, and is the same
# for every T from 768 on. Width and head count are the benchmark's defaults.
MANUAL_T, FUSED_T = (512, 1024), (1024, 2048)


def test_page_faults_count_fresh_pages():
    n_bytes = 64 * 2**20  # above glibc's mmap threshold: fresh pages from the system
    faults = page_faults(lambda: torch.ones(n_bytes // 4))
    assert faults >= n_bytes // os.sysconf("SC_PAGE_SIZE") // 2
    assert page_faults(lambda: None) < 100


@pytest.fixture(scope="module")
def peaks() -> dict:
    """Peak bytes of each variant and mode at the sizes above, B=1, C=256, H=8."""
    B, C, H = 1, 256, 8
    result = {}
    for T in sorted(set(MANUAL_T + FUSED_T)):
        calls, modules = make_variants(H, C, T)
        x, grad_out = randn(B, T, C), randn(B, T, C, seed=2)
        for variant in VARIANTS:
            if T not in (FUSED_T if variant == "sdpa" else MANUAL_T):
                continue
            call = calls[variant]
            for module in modules:
                module.zero_grad(set_to_none=True)
            result[variant, "forward", T] = peak_memory(functools.partial(forward, call, x))[
                "peak_bytes"
            ]
            result[variant, "forward_backward", T] = peak_memory(
                functools.partial(forward_backward, call, x, grad_out)
            )["peak_bytes"]
    return result


@pytest.mark.parametrize("mode", ["forward", "forward_backward"])
@pytest.mark.parametrize("variant", ["per-head", "manual"])
def test_manual_paths_memory_grows_like_T_squared(peaks, variant, mode):
    small, large = MANUAL_T
    growth = peaks[variant, mode, large] / peaks[variant, mode, small]
    assert growth >= 3, f"{variant} {mode}: x{growth:.2f} from T={small} to T={large}"


@pytest.mark.parametrize("mode", ["forward", "forward_backward"])
def test_fused_kernel_memory_grows_like_T(peaks, mode):
    small, large = FUSED_T
    growth = peaks["sdpa", mode, large] / peaks["sdpa", mode, small]
    assert growth <= 2.2, f"sdpa {mode}: x{growth:.2f} from T={small} to T={large}"


# --- all variants compute the same function -------------------------------------------------


def test_all_variants_agree_outputs_and_gradients():
    B, C, H, T = 2, 64, 4, 48
    calls, (mha, csa) = make_variants(H, C, T)
    x, grad_out = randn(B, T, C), randn(B, T, C, seed=2)
    outputs, grads = {}, {}
    for variant in VARIANTS:
        mha.zero_grad(set_to_none=True)
        csa.zero_grad(set_to_none=True)
        out = calls[variant](x)
        out.backward(grad_out)
        outputs[variant] = out.detach()
        if variant == "per-head":  # rebuild the batched layout of the per-head gradients
            grads[variant] = (
                torch.cat(
                    [h.query.weight.grad for h in mha.heads]
                    + [h.key.weight.grad for h in mha.heads]
                    + [h.value.weight.grad for h in mha.heads]
                ),
                mha.proj.weight.grad,
            )
        else:
            grads[variant] = (csa.qkv.weight.grad, csa.proj.weight.grad)
    for variant in ("manual", "sdpa"):
        assert_close(outputs[variant], outputs["per-head"], rtol=1e-5, atol=1e-5)
        assert_close(grads[variant], grads["per-head"], rtol=1e-4, atol=1e-5)


def test_inline_forward_is_exactly_the_module():
    torch.manual_seed(0)
    csa = CausalSelfAttention(n_head=4, n_embed=64, context_length=32)
    x = randn(3, 32, 64)
    with torch.no_grad():
        assert_close(inline_forward(csa, x), csa(x), rtol=0, atol=0)


def test_variants_share_weights():
    calls, (mha, csa) = make_variants(2, 32, 16)
    assert isinstance(mha, MultiHeadAttention) and calls["per-head"] is mha
    assert calls["sdpa"] is csa
    assert_close(csa.proj.weight, mha.proj.weight, rtol=0, atol=0)


def test_time_interleaved_rotates_and_drops_warmup():
    order = []
    jobs = {name: (lambda name=name: order.append(name)) for name in "ABC"}
    timed = bench.time_interleaved(jobs, repetitions=3, warmup=1)
    assert "".join(order) == "ABC" + "BCA" + "CAB" + "ABC"
    for result in timed.values():
        assert len(result["seconds"]) == len(result["waited"]) == 3
        assert min(result["seconds"]) >= 0 and min(result["waited"]) >= 0
        assert result["retaken"] == 0


def test_time_interleaved_takes_a_run_again_when_it_waited(monkeypatch):
    clock = iter([0.0, 1.0, 1.0, 1.0])  # waiting_seconds before and after each run
    monkeypatch.setattr(bench, "waiting_seconds", lambda: next(clock))
    timed = bench.time_interleaved({"A": lambda: None}, 1, 0, retries=1)
    assert timed["A"]["retaken"] == 1 and timed["A"]["waited"] == [0.0]


def test_waiting_seconds_is_a_running_total():
    first = bench.waiting_seconds()
    assert 0 <= first <= bench.waiting_seconds()


# --- the command, its result files and the committed ones -----------------------------------


def check_attention_result(data: dict) -> None:
    """The schema of attention-cost.json, and a complete grid of results."""
    assert data["schema"] == bench.SCHEMA
    assert data["command"].startswith("python -m snippets.bench attention")
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
        for mode in bench.MODES:
            cell = row[mode]
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
    assert root.find(f"{SVG[:-3]}title").text


def test_quick_command_end_to_end(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "snippets.bench", "attention", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[3/3] H=2 T=256" in proc.stderr  # progress went to stderr
    assert "forward+backward, ms" in proc.stdout and "fwd+bwd peak, MiB" in proc.stdout
    data = json.loads((tmp_path / "attention-cost.json").read_text())
    check_attention_result(data)
    assert data["settings"]["seq_lens"] == [64, 128, 256]
    assert sorted(p.name for p in tmp_path.glob("*.svg")) == [
        "attention-cost-memory.svg",
        "attention-cost-time.svg",
    ]
    for svg in tmp_path.glob("*.svg"):
        check_svg(svg)


def test_quick_overhead_command(tmp_path, capsys):
    bench.main(["overhead", "--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "attention-overhead.json").read_text())
    assert data["schema"] == bench.OVERHEAD_SCHEMA
    (row,) = data["results"]
    assert row["ratio"] == pytest.approx(row["module_us"] / row["inline_us"], rel=1e-3)
    assert "module / inline" in capsys.readouterr().out


def test_help_names_both_benchmarks(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.parser().parse_args(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "attention" in out and "overhead" in out


@pytest.mark.parametrize("argv", [["attention", "-T", "64 x"], ["attention", "--heads", "0"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.parser().parse_args(argv)
    assert exit_.value.code == 2
    assert "expected" in capsys.readouterr().err


def test_committed_result_is_complete():
    data = json.loads((COMMITTED / "attention-cost.json").read_text())
    check_attention_result(data)
    assert data["settings"]["seq_lens"] == [64, 128, 256, 512, 1024, 2048, 4096]
    assert data["command"] == "python -m snippets.bench attention"


def test_committed_plots_are_drawn_from_the_committed_result():
    data = json.loads((COMMITTED / "attention-cost.json").read_text())
    for name, text in bench.plots(data).items():
        check_svg(COMMITTED / name)
        assert (COMMITTED / name).read_text(encoding="utf-8") == text, name


def test_committed_overhead_result():
    data = json.loads((COMMITTED / "attention-overhead.json").read_text())
    assert data["schema"] == bench.OVERHEAD_SCHEMA
    assert data["command"] == "python -m snippets.bench overhead"
    assert [r["seq_len"] for r in data["results"]] == data["settings"]["seq_lens"]
