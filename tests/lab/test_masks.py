"""Tests for lab/masks.py: its compiled FlexAttention (flex_forward), `python -m lab.masks cost
--quick` end to end and the committed result file (tests/lab/test_figures.py redraws the mask
figures). No timing is asserted: times depend on the machine.

Every test here that runs flex_forward calls it with the benchmark's shapes (B=1, H=4, D=32,
the window of 64), so the process compiles the kernel once, at the first call, and the others
reuse it: the compile is most of this module's time (about 15 s of CPU with a cold inductor
cache, as on a clean clone), and these tests are one module so that they share one process.
"""

import json
import xml.etree.ElementTree as ET

import torch
import torch.nn.functional as F
from torch.testing import assert_close

from lab import masks as lab_masks
from lab.masks import WINDOW, block_mask_for, flex_forward, window_mask_mod
from snippets.core.masks import sliding_window_mask

H, D = 4, 32  # the benchmark's heads and head size: one compiled kernel for all


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_flex_forward_sees_exactly_the_last_window_tokens():
    T = 512  # four 128-blocks: whole blocks outside the window are skipped
    block_mask = block_mask_for(window_mask_mod(WINDOW), T)
    q, k, v = (randn(1, H, T, D, seed=s) for s in range(3))  # B = 1, as the benchmark
    base = flex_forward(q, k, v, block_mask)  # (1, H, T, D)
    for t in (WINDOW, 200, 255, 256, T - 1):  # in the first block, across a block edge
        # Token t - window is just outside the window, t - window + 1 the oldest one inside.
        for s, inside in ((t - WINDOW, False), (t - WINDOW + 1, True)):
            k2, v2 = k.clone(), v.clone()
            k2[:, :, s] += 5.0
            v2[:, :, s] += 5.0
            moved = not torch.equal(flex_forward(q, k2, v2, block_mask)[:, :, t], base[:, :, t])
            assert moved == inside, f"t={t}: token {s} changed; the output moved: {moved}"


def test_flex_forward_equals_sdpa_with_the_dense_mask():
    for T in (512, 1024):
        q, k, v = (randn(1, H, T, D, seed=T + s) for s in range(3))
        got = flex_forward(q, k, v, block_mask_for(window_mask_mod(WINDOW), T))
        dense = sliding_window_mask(T, WINDOW)  # (T, T), broadcast over B and H
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=dense)
        assert_close(got, expected, atol=1e-5, rtol=0)


def test_cost_quick_runs_end_to_end(tmp_path, capsys):
    lab_masks.main(["cost", "--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "masks-cost.json").read_text())
    assert data["schema"] == lab_masks.SCHEMA and data["machine"]["cpu_count"] >= 1
    assert [row["seq_len"] for row in data["results"]] == lab_masks.QUICK_T
    for row in data["results"]:
        assert row["flex_matches_dense"], row
        # 128-blocks, window 64: each query block needs its own and the previous key block,
        # 2n - 1 of the n^2 blocks: the work grows linearly in T.
        n = row["seq_len"] // 128
        assert row["block_density"] == round((2 * n - 1) / n**2, 4)
        for job in lab_masks.JOBS:
            for clock in ("runs_cpu_ms", "runs_wall_ms"):
                assert len(row[job][clock]) == data["settings"]["repetitions"]
    ET.parse(tmp_path / "masks-cost.svg")  # a well-formed plot
    printed = capsys.readouterr().out
    assert lab_masks.cost_table(data) in printed


def test_committed_cost_file_is_a_full_run():
    data = json.loads(lab_masks.COST_FILE.read_text())
    assert data["schema"] == lab_masks.SCHEMA
    assert data["command"].startswith("python -m lab.masks cost")
    assert [row["seq_len"] for row in data["results"]] == lab_masks.DEFAULT_T
    assert all(row["flex_matches_dense"] for row in data["results"])
    assert data["settings"]["window"] == lab_masks.WINDOW
    assert lab_masks.COST_PLOT.exists()
